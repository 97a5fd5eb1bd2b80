//! The device state every adapter's work is done on: the hub (the model),
//! each adapter's device-side state (node/), the deliveries not yet due
//! (delivery/), and the cluster clock. One mutex guards it all (device.rs);
//! the hub thread and the vhost-user workers take it for short, bounded
//! pieces of work, and nobody sleeps or waits holding it.
//!
//! Its fields are private to this folder, and everything done on them is
//! here, each job in a file of its own: what needs the hub and a node
//! together is done by calling the node's own methods (which never call
//! back):
//!
//! - this file: the state, one pass of the hub thread, faults, a guest's
//!   memory table and its departure;
//! - errors.rs: a guest's error counted by the model and raised as an
//!   event, events routed to the nodes they concern;
//! - transmit.rs: records taken from a FIFO and sent through the hub;
//! - control.rs: the control queue's requests.
//!
//! The jobs with state of their own are owners elsewhere, called from here:
//! each node's (node/), the deliveries not yet due and their performing
//! (delivery/), what drivers are shown (status.rs), the clock
//! (cluster_clock.rs).

mod control;
mod errors;
mod transmit;

use firmware_model::{Arbiter, FaultCommand, Hub, ModelError, Nanos, NodeId, PassBudget, PctEntry};
use log::info;
use vm_memory::GuestMemoryAtomic;

use firmware_model::abi::Registers;

use crate::cluster_clock::ClusterClock;
use crate::delivery::{Deliveries, EventCollector, Receivers};
use crate::memory::{Mem, Mems};
use crate::node::NodeState;
use crate::status::{self, StatusBoard};
use transmit::TxBuffers;

pub(crate) struct DeviceState {
    hub: Hub,
    /// Whose stores the hub takes next, and how many (the model's).
    arbiter: Arbiter,
    /// Per node, by `NodeId::index`.
    nodes: Vec<NodeState>,
    /// Deliveries, ACK answers and events not yet due, per receiver.
    deliveries: Deliveries,
    /// When each node is shown the cluster error count.
    status: StatusBoard,
    /// Buffers the transmit path reuses from store to store.
    tx_buffers: TxBuffers,
    clock: ClusterClock,
}

impl DeviceState {
    pub(crate) fn new(hub: Hub, clock: ClusterClock) -> DeviceState {
        let pages = hub.config().page_count();
        DeviceState {
            nodes: NodeId::all(hub.nodes())
                .map(|id| NodeState::new(id, pages))
                .collect(),
            deliveries: Deliveries::new(hub.nodes()),
            arbiter: Arbiter::new(hub.nodes(), PassBudget::DEFAULT),
            status: StatusBoard::default(),
            tx_buffers: TxBuffers::default(),
            hub,
            clock,
        }
    }

    pub(crate) fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// The model, to read.
    pub(crate) fn hub(&self) -> &Hub {
        &self.hub
    }

    /// Every node's device-side state, in order.
    pub(crate) fn nodes(&self) -> &[NodeState] {
        &self.nodes
    }

    /// Node `id`'s device-side state (`id` is one of this cluster's nodes).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn node(&self, id: NodeId) -> &NodeState {
        &self.nodes[id.index()]
    }

    pub(crate) fn node_mut(&mut self, id: NodeId) -> &mut NodeState {
        &mut self.nodes[id.index()]
    }

    /// Every node, in order (an iterator that does not borrow the state).
    pub(crate) fn node_ids(&self) -> impl Iterator<Item = NodeId> + Clone {
        NodeId::all(self.hub.nodes())
    }

    /// Every node's guest memory, taken once for one pass of work.
    pub(crate) fn memory_snapshot(&self) -> Mems {
        Mems(self.nodes.iter().map(NodeState::memory).collect())
    }

    /// Nothing waits to be delivered anywhere.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn nothing_pending(&self) -> bool {
        self.deliveries.all_empty()
    }

    /// The hub's arbitration as it stands (tests replay it).
    #[cfg(test)]
    pub(crate) fn arbiter(&self) -> &Arbiter {
        &self.arbiter
    }

    /// One bounded pass of the hub thread (hub_loop.rs): scheduled faults,
    /// every FIFO (a budget each), the deliveries due, status pages. Returns
    /// the work done and when the next queued item (delivery, lagging error
    /// count, fault) is due.
    pub(crate) fn pass(&mut self) -> (usize, Option<Nanos>) {
        self.advance();
        let mems = self.memory_snapshot();
        let mut work = 0;
        // The model's arbitration: every node a turn, in rotating order.
        let turns: Vec<_> = self.arbiter.pass().collect();
        for turn in turns {
            work += self.take_from_fifo(turn, &mems);
        }
        let now = self.now();
        let mut to = Receivers::new(&mut self.hub, &mut self.nodes, &mut self.status, self.clock);
        let (done, next_delivery) = self.deliveries.deliver_due(now, &mems, &mut to);
        let (events, failures) = to.finish();
        self.dispatch(events);
        self.report_dma_failures(&failures);
        drop(mems);
        work += done;
        let next_error = status::next_error_visible(&self.nodes);
        if work > 0 || next_error.is_some_and(|t| t <= self.now()) {
            self.refresh_status_pages();
        }
        let next_fault = self.hub.scheduled_faults().first().map(|f| f.at);
        let next = [
            next_delivery,
            status::next_error_visible(&self.nodes),
            next_fault,
        ]
        .into_iter()
        .flatten()
        .min();
        (work, next)
    }

    /// The register file as `id` sees it now.
    pub(crate) fn registers(&self, id: NodeId) -> Registers {
        status::registers(&self.hub, &self.nodes[id.index()])
    }

    /// Write every status page whose contents changed.
    pub(crate) fn refresh_status_pages(&mut self) {
        self.status
            .refresh(&mut self.hub, &mut self.nodes, self.clock);
    }

    /// `id`'s guest sent a new memory table (checked: mem_table.rs).
    pub(crate) fn memory_table_changed(&mut self, id: NodeId, mem: GuestMemoryAtomic<Mem>) {
        let (lost, table_lost) = self.nodes[id.index()].memory_table_changed(mem);
        for page in lost {
            self.unbind_lost_page(id, page);
        }
        if table_lost {
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
            let off = PctEntry {
                receive: false,
                interrupt: false,
                ack: false,
                ..e
            };
            let _ = self.hub.set_pct(id, p, off);
        }
        self.nodes[id.index()].unbind_frames(page);
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

    /// Schedule a fault (control socket, fault plans); the hub applies it
    /// when due.
    pub(crate) fn schedule_fault(
        &mut self,
        at: Nanos,
        cmd: FaultCommand,
    ) -> Result<(), ModelError> {
        self.hub.schedule_fault(at, cmd)
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
                    node.clear_frames();
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

/// A fault applied, for the log.
fn log_fault_applied(command: &FaultCommand, at: Nanos) {
    info!("fault applied at {:.3} ms: {command}", at.0 as f64 / 1e6);
}
