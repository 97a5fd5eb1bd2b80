//! The device state every adapter's work is done on: the hub (the model),
//! each adapter's device-side state, the deliveries not yet due, and the
//! cluster clock. One mutex guards it all; the hub thread and the vhost-user
//! workers take it for short, bounded pieces of work (transmit.rs, due.rs,
//! control.rs, events.rs, status_page.rs), and nobody sleeps holding it.

use std::fmt;
use std::time::Instant;

use firmware_model::{FaultCommand, Hub, ModelError, Nanos, NodeId};
use log::{log, warn, Level};

use crate::delivery::{EventCollector, PendingCopy, PendingQueue};
use crate::guest_log::{BURST, INTERVAL};
use crate::memory::Piece;
use crate::node::NodeState;

pub(crate) struct DeviceState {
    pub(crate) hub: Hub,
    pub(crate) nodes: Vec<NodeState>,
    /// Per receiver: deliveries, ACK answers and events not yet due.
    pub(crate) pending: Vec<PendingQueue>,
    /// Per sender: bytes of its stores waiting in `pending`.
    pub(crate) queued_bytes: Vec<usize>,
    /// The cluster error count when status-page lags were last handed out.
    pub(crate) noted_errors: u64,
    /// Buffers the transmit path reuses from store to store.
    pub(crate) copies_scratch: Vec<Option<PendingCopy>>,
    pub(crate) pieces_scratch: Vec<Piece>,
    pub(crate) start: Instant,
}

impl DeviceState {
    pub(crate) fn new(hub: Hub) -> DeviceState {
        let n = usize::from(hub.nodes());
        let pages = hub.config().page_count();
        DeviceState {
            nodes: (0..n).map(|_| NodeState::new(pages)).collect(),
            pending: (0..n).map(|_| PendingQueue::default()).collect(),
            queued_bytes: vec![0; n],
            noted_errors: 0,
            copies_scratch: Vec::new(),
            pieces_scratch: Vec::new(),
            hub,
            start: Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Nanos {
        Nanos(self.start.elapsed().as_nanos() as u64)
    }

    /// A guest did something wrong: log it (rate-limited), count a protection
    /// error for its adapter and raise an error event.
    pub(crate) fn guest_error(&mut self, node: usize, what: fmt::Arguments<'_>) {
        self.guest_log(node, Level::Warn, what);
        let mut sink = EventCollector::default();
        let now = self.now();
        let _ = self
            .hub
            .report_protection_error(now, NodeId(node as u8), &mut sink);
        self.dispatch(sink.events);
    }

    /// Log a line a guest caused, within its node's allowance (guest_log.rs).
    pub(crate) fn guest_log(&mut self, node: usize, level: Level, what: fmt::Arguments<'_>) {
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        let v = n.log_limit.admit(Instant::now());
        if let Some(k) = v.suppressed_before {
            report_suppressed(node, k);
        }
        if v.log {
            log!(level, "node{node}: {what}");
        }
    }

    /// Report guest-caused lines left out in an interval that has ended (a
    /// flood that stopped). Cheap enough for every pass of the hub.
    fn report_suppressed_lines(&mut self) {
        if !self.nodes.iter().any(|n| n.log_limit.has_suppressed()) {
            return;
        }
        let now = Instant::now();
        for (i, n) in self.nodes.iter_mut().enumerate() {
            if let Some(k) = n.log_limit.summary_due(now) {
                report_suppressed(i, k);
            }
        }
    }

    /// A guest went away: send the stores it had committed (posted writes
    /// already on their way leave the adapter even when the program that
    /// made them is gone), then reset its adapter and forget its memory and
    /// whatever was still on its way to it.
    pub(crate) fn disconnected(&mut self, i: usize) {
        self.take_committed_stores(i);
        let _ = self.hub.reset_adapter(NodeId(i as u8));
        self.nodes[i].forget_guest();
        self.drop_pending(i);
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
                self.drop_pending(n.index());
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
    pub(crate) fn refuse_config_write(&mut self, node: usize, offset: u32, len: usize) {
        self.guest_error(
            node,
            format_args!("write of {len} bytes to read-only register offset {offset:#x} refused"),
        );
        self.refresh_status_pages();
    }
}

fn report_suppressed(node: usize, lines: u64) {
    warn!(
        "node{node}: {lines} more guest-caused messages suppressed (at most {BURST} per {:?} are logged)",
        INTERVAL
    );
}
