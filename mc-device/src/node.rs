//! Per-adapter device state that the model does not hold: the guest's memory,
//! its virtqueues, the receive frames bound to each page, the status page and
//! the events waiting for an event buffer.

use std::collections::VecDeque;

use firmware_model::abi::{EventRecord, StatusPage, FRAME_SIZE};
use vhost_user_backend::VringRwLock;
use vm_memory::GuestMemoryAtomic;

use crate::guest_log::GuestLogLimit;
use crate::memory::{Mem, Piece};
use crate::ring_access::configured;

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

/// One adapter's device-side state.
pub(crate) struct NodeState {
    /// Guest RAM, shared by the frontend with SET_MEM_TABLE, once checked
    /// (mem_table.rs). The backend's own snapshot: the vhost-user daemon's view
    /// is replaced by a new table before it has been checked.
    pub(crate) mem: Option<GuestMemoryAtomic<Mem>>,
    /// The vrings, captured from the backend's first `handle_event`.
    pub(crate) vrings: Option<Vec<VringRwLock>>,
    pub(crate) frames: DmaMap,
    pub(crate) status_page: Option<u64>,
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

    /// Whether the device may touch queue `q` through `vring` without first
    /// checking it: configured by the driver and not broken. Reads no guest
    /// memory (ring_access.rs checks the rings before serving them).
    pub(crate) fn queue_live(&self, q: u16, vring: &VringRwLock) -> bool {
        self.broken_queues & (1 << q) == 0 && configured(vring)
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
