//! Per-adapter device state that the model does not hold: the guest's memory,
//! its virtqueues, its transmit FIFO, the receive frames bound to each page,
//! the status page and the events waiting for an event buffer.

use std::collections::VecDeque;

use firmware_model::abi::{fifo, EventRecord, StatusPage, FRAME_SIZE};
use vhost_user_backend::VringRwLock;
use vm_memory::GuestMemoryAtomic;

use crate::guest_log::GuestLogLimit;
use crate::memory::{Mem, Piece};

/// Events kept for a driver that has posted no event buffers; beyond this they
/// are counted as lost and reported with one overflow event.
pub(crate) const MAX_PENDING_EVENTS: usize = 4096;

/// Receive frames bound per global page (the adapter's DMA map).
#[derive(Debug, Default)]
pub(crate) struct DmaMap {
    pages: Vec<Option<Box<[Piece]>>>,
}

impl DmaMap {
    pub(crate) fn new(pages: u32) -> Self {
        let mut v = Vec::new();
        v.resize_with(pages as usize, || None);
        DmaMap { pages: v }
    }

    pub(crate) fn get(&self, page: u32) -> Option<&[Piece]> {
        self.pages.get(page as usize).and_then(|p| p.as_deref())
    }

    pub(crate) fn bind(&mut self, page: u32, frames: &[u64]) {
        if let Some(slot) = self.pages.get_mut(page as usize) {
            *slot = Some(frames.iter().map(|f| (*f, FRAME_SIZE)).collect());
        }
    }

    pub(crate) fn unbind(&mut self, page: u32) {
        if let Some(slot) = self.pages.get_mut(page as usize) {
            *slot = None;
        }
    }

    pub(crate) fn clear(&mut self) {
        self.pages.iter_mut().for_each(|p| *p = None);
    }
}

/// Where a driver's transmit FIFO is and how far the hub has taken it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegisteredFifo {
    pub(crate) gpa: u64,
    pub(crate) slots: u32,
    /// Next position to take.
    pub(crate) head: u64,
    pub(crate) state: fifo::State,
    /// Records refused so far.
    pub(crate) refused: u64,
    /// The doorbell is armed: the hub asked for a kick before it sleeps.
    pub(crate) armed: bool,
}

impl RegisteredFifo {
    pub(crate) fn new(gpa: u64, slots: u32) -> RegisteredFifo {
        RegisteredFifo {
            gpa,
            slots,
            head: 0,
            state: fifo::State::Running,
            refused: 0,
            armed: false,
        }
    }

    pub(crate) fn tag_gpa(&self, position: u64) -> u64 {
        self.gpa + fifo::HEADER_SIZE as u64 + 4 * (position % u64::from(self.slots))
    }

    pub(crate) fn slot_gpa(&self, position: u64) -> u64 {
        self.gpa
            + fifo::slots_offset(self.slots) as u64
            + fifo::SLOT_SIZE as u64 * (position % u64::from(self.slots))
    }

    /// Slots from `position` to the end of the ring.
    pub(crate) fn slots_to_end(&self, position: u64) -> u64 {
        u64::from(self.slots) - position % u64::from(self.slots)
    }
}

/// One adapter's device-side state.
pub(crate) struct NodeState {
    /// Guest RAM, shared by the frontend with SET_MEM_TABLE, once checked
    /// (mem_table.rs). The backend's own snapshot: the vhost-user daemon's view
    /// is replaced by a new table before it has been checked.
    pub(crate) mem: Option<GuestMemoryAtomic<Mem>>,
    /// The vrings, captured from the backend's first `handle_event`.
    pub(crate) vrings: Option<Vec<VringRwLock>>,
    pub(crate) frames: DmaMap,
    pub(crate) fifo: Option<RegisteredFifo>,
    pub(crate) status_page: Option<u64>,
    /// The cluster error count this node's status page shows: the true
    /// count in eager mode; in skewed mode other adapters' errors reach it
    /// late (`error_lag`), its own and every ACK answer bring it up to date.
    pub(crate) shown_errors: u64,
    pub(crate) error_lag: VecDeque<(u64, firmware_model::Nanos)>,
    /// What was last written to the status page (its update count aside).
    pub(crate) last_status: Option<StatusPage>,
    /// Updates written to the status page so far.
    pub(crate) status_updates: u64,
    pub(crate) pending_events: VecDeque<EventRecord>,
    pub(crate) events_lost: u64,
    /// Events lost that the driver has not yet been told about.
    pub(crate) overflow_unreported: u64,
    pub(crate) connections: u64,
    /// Bit q: queue q is broken and not served until the driver re-initialises
    /// its ring (ring_access.rs; the register file's `broken_queues`).
    pub(crate) broken_queues: u32,
    /// This node's allowance of guest-caused log lines (kept across reconnects).
    pub(crate) log_limit: GuestLogLimit,
}

impl NodeState {
    pub(crate) fn new(pages: u32) -> Self {
        NodeState {
            mem: None,
            vrings: None,
            frames: DmaMap::new(pages),
            fifo: None,
            shown_errors: 0,
            error_lag: VecDeque::new(),
            status_page: None,
            last_status: None,
            status_updates: 0,
            pending_events: VecDeque::new(),
            events_lost: 0,
            overflow_unreported: 0,
            connections: 0,
            broken_queues: 0,
            log_limit: GuestLogLimit::default(),
        }
    }

    /// A guest connected or disconnected: forget everything about the old one.
    pub(crate) fn forget_guest(&mut self) {
        self.mem = None;
        self.vrings = None;
        self.frames.clear();
        self.fifo = None;
        self.status_page = None;
        self.last_status = None;
        self.pending_events.clear();
        self.overflow_unreported = 0;
        self.broken_queues = 0;
    }

    /// The driver stopped queue `q` (VHOST_USER_GET_VRING_BASE): whatever it
    /// broke about the ring, it is setting it up afresh.
    pub(crate) fn ring_stopped(&mut self, q: u32) {
        if q < 32 {
            self.broken_queues &= !(1 << q);
        }
    }

    pub(crate) fn queue_event(&mut self, e: EventRecord) {
        if self.pending_events.len() >= MAX_PENDING_EVENTS {
            self.events_lost += 1;
            self.overflow_unreported += 1;
        } else {
            self.pending_events.push_back(e);
        }
    }
}
