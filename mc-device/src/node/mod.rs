//! One adapter's device-side state, the part the model does not hold: the
//! guest's memory and virtqueues, the receive frames bound to each page (its
//! DMA map), its transmit FIFO, its status page and the events waiting for an
//! event buffer. Each piece is worked on by methods of the node it belongs to
//! (events.rs, status_page.rs, queues.rs); what needs the hub as well is done
//! by the device state (state.rs), which calls these and is never called back.

mod arrival;
mod dma_map;
mod events;
mod queues;
mod status_page;

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use firmware_model::NodeId;
use log::{log, Level};
use vhost_user_backend::VringRwLock;
use vm_memory::{GuestAddressSpace, GuestMemoryAtomic};

pub(crate) use arrival::ArrivalTable;
pub(crate) use dma_map::DmaMap;
pub(crate) use events::{EventQueue, EventsFlushed};
pub(crate) use queues::{queue_name, RingDefect, ServedQueue};
pub(crate) use status_page::StatusView;

use crate::guest_log::{report_suppressed, GuestLogLimit};
use crate::memory::{Mem, MemGuard};
use crate::transmit::{RegisteredFifo, TxProgress};

/// One adapter's device-side state.
pub(crate) struct NodeState {
    pub(crate) id: NodeId,
    /// Guest RAM, shared by the frontend with SET_MEM_TABLE, once checked
    /// (mem_table.rs). The backend's own snapshot: the vhost-user daemon's view
    /// is replaced by a new table before it has been checked.
    pub(crate) mem: Option<GuestMemoryAtomic<Mem>>,
    /// The vrings, captured from the backend's first `handle_event`.
    pub(crate) vrings: Option<Vec<VringRwLock>>,
    /// Bit q: queue q is broken and not served until the driver re-initialises
    /// its ring (queues.rs; the register file's `broken_queues`).
    pub(crate) broken_queues: u32,
    pub(crate) frames: DmaMap,
    /// The registered transmit FIFO (transmit/), if any.
    pub(crate) fifo: Option<RegisteredFifo>,
    /// Where stamped deliveries' virtual arrivals go (arrival.rs), if any.
    pub(crate) arrival: Option<ArrivalTable>,
    /// How far the hub has taken the FIFO, readable without the device lock.
    pub(crate) tx_progress: Arc<TxProgress>,
    pub(crate) status: StatusView,
    pub(crate) events: EventQueue,
    pub(crate) connections: u64,
    /// This node's allowance of guest-caused log lines (kept across reconnects).
    pub(crate) log_limit: GuestLogLimit,
}

impl NodeState {
    pub(crate) fn new(id: NodeId, pages: u32) -> Self {
        NodeState {
            id,
            mem: None,
            vrings: None,
            broken_queues: 0,
            frames: DmaMap::new(pages),
            fifo: None,
            arrival: None,
            tx_progress: Arc::default(),
            status: StatusView::default(),
            events: EventQueue::default(),
            connections: 0,
            log_limit: GuestLogLimit::default(),
        }
    }

    /// The guest's memory now, if a guest is attached.
    pub(crate) fn memory(&self) -> Option<MemGuard> {
        self.mem.as_ref().map(GuestAddressSpace::memory)
    }

    /// A guest connected or disconnected: forget everything about the old one.
    pub(crate) fn forget_guest(&mut self) {
        self.mem = None;
        self.vrings = None;
        self.frames.clear();
        self.fifo = None;
        self.arrival = None;
        self.tx_progress.replaced();
        self.status.forget_page();
        self.events.forget_guest();
        self.broken_queues = 0;
    }

    /// The driver stopped queue `q` (VHOST_USER_GET_VRING_BASE): whatever it
    /// broke about the ring, it is setting it up afresh.
    pub(crate) fn ring_stopped(&mut self, q: u32) {
        if q < 32 {
            self.broken_queues &= !(1 << q);
        }
    }

    /// Log a line this node's guest caused, within its allowance
    /// (guest_log.rs): a guest can cause them as fast as it can post buffers.
    pub(crate) fn log(&mut self, level: Level, what: fmt::Arguments<'_>) {
        let v = self.log_limit.admit(Instant::now());
        if let Some(k) = v.suppressed_before {
            report_suppressed(self.id, k);
        }
        if v.log {
            log!(level, "{}: {what}", Node(self.id));
        }
    }
}

pub(crate) use crate::node_name::Node;
