//! The device state every adapter's work is done on: the hub (the model),
//! each adapter's device-side state (node/), the deliveries not yet due
//! (delivery/), and the cluster clock. One mutex guards it all (device.rs);
//! the hub thread and the vhost-user workers take it for short, bounded
//! pieces of work, and nobody sleeps or waits holding it.
//!
//! What needs both the hub and a node is done here, by calling the node's
//! own methods (which never call back): a guest's error counted by the model
//! and raised as an event, events routed to the nodes they concern, faults.

use std::fmt;
use std::time::Instant;

use firmware_model::abi::EventRecord;
use firmware_model::{Arbiter, Event, FaultCommand, Hub, ModelError, Nanos, NodeId, PassBudget};
use log::{info, Level};

use crate::delivery::{Deliveries, DmaFailure, EventCollector, PendingCopy};
use crate::guest_log::report_suppressed;
use crate::memory::{Mems, Piece};
use crate::node::{queue_name, EventsFlushed, NodeState, RingDefect};

pub(crate) struct DeviceState {
    pub(crate) hub: Hub,
    /// Whose stores the hub takes next, and how many (the model's).
    pub(crate) arbiter: Arbiter,
    /// Per node, by `NodeId::index`.
    pub(crate) nodes: Vec<NodeState>,
    /// Deliveries, ACK answers and events not yet due, per receiver.
    pub(crate) deliveries: Deliveries,
    /// The cluster error count when status-page lags were last handed out.
    pub(crate) noted_errors: u64,
    /// Buffers the transmit path reuses from store to store.
    pub(crate) copies_scratch: Vec<Option<PendingCopy>>,
    pub(crate) pieces_scratch: Vec<Piece>,
    pub(crate) start: Instant,
}

impl DeviceState {
    pub(crate) fn new(hub: Hub) -> DeviceState {
        let pages = hub.config().page_count();
        DeviceState {
            nodes: NodeId::all(hub.nodes())
                .map(|id| NodeState::new(id, pages))
                .collect(),
            deliveries: Deliveries::new(hub.nodes()),
            arbiter: Arbiter::new(hub.nodes(), PassBudget::DEFAULT),
            noted_errors: 0,
            copies_scratch: Vec::new(),
            pieces_scratch: Vec::new(),
            hub,
            start: Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Nanos {
        Nanos(u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// Every node, in order (an iterator that does not borrow the state).
    pub(crate) fn node_ids(&self) -> impl Iterator<Item = NodeId> + Clone {
        NodeId::all(self.hub.nodes())
    }

    /// Every node's guest memory, taken once for one pass of work.
    pub(crate) fn memory_snapshot(&self) -> Mems {
        Mems(self.nodes.iter().map(NodeState::memory).collect())
    }

    /// A guest did something wrong: log it (rate-limited), count a protection
    /// error for its adapter and raise an error event.
    pub(crate) fn guest_error(&mut self, id: NodeId, what: fmt::Arguments<'_>) {
        self.protection_error(id, what);
        self.flush_events(id);
    }

    /// The first half of [`Self::guest_error`]: logged and counted, its event
    /// queued for the node but not yet handed out.
    fn protection_error(&mut self, id: NodeId, what: fmt::Arguments<'_>) {
        let Some(node) = self.nodes.get_mut(id.index()) else {
            return;
        };
        node.log(Level::Warn, what);
        let mut sink = EventCollector::default();
        let now = self.now();
        let _ = self.hub.report_protection_error(now, id, &mut sink);
        for e in &sink.events {
            self.queue_event(e);
        }
    }

    /// Queue each event for the adapter it concerns and hand out what fits in
    /// the posted event buffers.
    pub(crate) fn dispatch(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut touched = 0u64;
        for e in &events {
            if let Some(n) = self.queue_event(e) {
                touched |= 1 << n.0;
            }
        }
        for id in self.node_ids() {
            if touched & (1 << id.0) != 0 {
                self.flush_events(id);
            }
        }
    }

    /// Queue `e` for its node (if a guest is there to read it); returns that node.
    fn queue_event(&mut self, e: &Event) -> Option<NodeId> {
        match (e.node(), EventRecord::from_event(e)) {
            (Some(n), Some(rec)) => {
                let node = self.nodes.get_mut(n.index())?;
                node.mem.as_ref()?;
                node.events.push(rec);
                Some(n)
            }
            _ => {
                if let Event::FaultApplied { command, at } = e {
                    info!("fault applied at {:.3} ms: {command}", at.0 as f64 / 1e6);
                }
                None
            }
        }
    }

    /// Hand out `id`'s pending events, and report what was wrong with its
    /// buffers: those reports' own events are handed out in one more round,
    /// whose complaints are counted but not flushed again (so a driver that
    /// keeps posting unusable buffers cannot keep this going).
    pub(crate) fn flush_events(&mut self, id: NodeId) {
        for round in 0..2 {
            let Some(node) = self.nodes.get_mut(id.index()) else {
                return;
            };
            let flushed = node.flush_events();
            if !self.report_events_flushed(id, flushed) || round == 1 {
                return;
            }
        }
    }

    /// Count and log what a flush found wrong; true if anything was.
    fn report_events_flushed(&mut self, id: NodeId, f: EventsFlushed) -> bool {
        let mut any = false;
        if let Some(e) = f.signal {
            self.nodes[id.index()].log(Level::Warn, format_args!("{e}"));
        }
        if f.unusable > 0 {
            let bad = f.unusable;
            self.protection_error(
                id,
                format_args!(
                    "{bad} event buffer(s) unusable (need one writable buffer of {} bytes)",
                    firmware_model::abi::EVENT_SIZE
                ),
            );
            any = true;
        }
        if let Some(d) = f.defect {
            self.protection_error(
                id,
                format_args!("{}", BrokenQueue(firmware_model::abi::EVENT_QUEUE, d)),
            );
            any = true;
        }
        any
    }

    /// The driver broke `id`'s queue `q` (reported once: the node knows).
    pub(crate) fn queue_broken(&mut self, id: NodeId, q: u16, defect: RingDefect) {
        self.guest_error(id, format_args!("{}", BrokenQueue(q, defect)));
    }

    /// DMA into a receiver's frames failed: its memory changed under a bound
    /// frame. Logged within that node's allowance.
    pub(crate) fn report_dma_failures(&mut self, failures: &[DmaFailure]) {
        for f in failures {
            if let Some(node) = self.nodes.get_mut(f.node.index()) {
                node.log(
                    Level::Warn,
                    format_args!(
                        "DMA of {} bytes to page {} failed (guest memory changed?)",
                        f.len, f.page
                    ),
                );
            }
        }
    }

    /// Report guest-caused lines left out in an interval that has ended (a
    /// flood that stopped). Cheap enough for every pass of the hub.
    fn report_suppressed_lines(&mut self) {
        if !self.nodes.iter().any(|n| n.log_limit.has_suppressed()) {
            return;
        }
        let now = Instant::now();
        for n in &mut self.nodes {
            if let Some(k) = n.log_limit.summary_due(now) {
                report_suppressed(n.id, k);
            }
        }
    }

    /// `id`'s guest sent a new memory table (checked: mem_table.rs).
    pub(crate) fn memory_table_changed(
        &mut self,
        id: NodeId,
        mem: vm_memory::GuestMemoryAtomic<crate::memory::Mem>,
    ) {
        let lost = self.nodes[id.index()]
            .frames
            .uncovered(&vm_memory::GuestAddressSpace::memory(&mem));
        let table_lost = self.nodes[id.index()]
            .arrival
            .is_some_and(|t| !t.lies_in(&vm_memory::GuestAddressSpace::memory(&mem)));
        self.nodes[id.index()].mem = Some(mem);
        for page in lost {
            self.unbind_lost_page(id, page);
        }
        if table_lost {
            self.nodes[id.index()].arrival = None;
            self.guest_error(
                id,
                format_args!(
                    "the new memory table leaves out the arrival table: \
                     it is unregistered until the driver registers it again"
                ),
            );
        }
    }

    /// A page whose receive frames the guest's memory no longer holds stops
    /// receiving, as after a reset: receive (and what needs it: interrupt,
    /// ACK) is turned off in its PCT entry and its frames are unbound, with
    /// an error event for the driver.
    fn unbind_lost_page(&mut self, id: NodeId, page: u32) {
        let p = firmware_model::PageNumber(page);
        if let Ok(e) = self.hub.pct_entry(id, p) {
            let off = firmware_model::PctEntry {
                receive: false,
                interrupt: false,
                ack: false,
                ..e
            };
            let _ = self.hub.set_pct(id, p, off);
        }
        self.nodes[id.index()].frames.unbind(page);
        self.guest_error(
            id,
            format_args!(
                "the new memory table leaves out the receive frames of page {page}: \
                 the page no longer receives until it is programmed again"
            ),
        );
    }

    /// A guest went away (the stores it had committed were taken first:
    /// posted writes already on their way leave the adapter even when the
    /// program that made them is gone): reset its adapter and forget its
    /// memory and whatever was still on its way to it.
    pub(crate) fn disconnected(&mut self, id: NodeId) {
        let _ = self.hub.reset_adapter(id);
        self.nodes[id.index()].forget_guest();
        self.deliveries.drop_for(id);
    }

    /// Apply a fault now (control socket, fault plans).
    pub(crate) fn apply_fault(&mut self, cmd: FaultCommand) -> Result<(), ModelError> {
        let mut sink = EventCollector::default();
        let now = self.now();
        let r = self.hub.apply_fault(now, cmd, &mut sink);
        if let FaultCommand::Crash(n) | FaultCommand::Rejoin(n) = cmd {
            if r.is_ok() {
                // The adapter's PCT is gone, so is its DMA map, and what
                // was still on its way to it is lost.
                if let Some(node) = self.nodes.get_mut(n.index()) {
                    node.frames.clear();
                }
                self.deliveries.drop_for(n);
            }
        }
        self.dispatch(sink.events);
        self.refresh_status_pages();
        r
    }

    /// Apply scheduled faults due by now (and report suppressed log lines).
    pub(crate) fn advance(&mut self) {
        self.report_suppressed_lines();
        if self
            .hub
            .scheduled_faults()
            .first()
            .is_some_and(|f| f.at <= self.now())
        {
            let mut sink = EventCollector::default();
            let now = self.now();
            self.hub.advance(now, &mut sink);
            self.dispatch(sink.events);
            self.refresh_status_pages();
        }
    }

    /// A guest wrote the read-only register file.
    pub(crate) fn refuse_config_write(&mut self, id: NodeId, offset: u32, len: usize) {
        self.guest_error(
            id,
            format_args!("write of {len} bytes to read-only register offset {offset:#x} refused"),
        );
        self.refresh_status_pages();
    }
}

/// The line that says a driver broke a queue.
struct BrokenQueue(u16, RingDefect);

impl fmt::Display for BrokenQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} queue broken, no longer served until the driver resets it: {}",
            queue_name(self.0),
            self.1
        )
    }
}
