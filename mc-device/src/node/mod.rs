//! One adapter's device-side state, the part the model does not hold: the
//! guest's memory and virtqueues (guest.rs), the receive frames bound to each
//! page (its DMA map), its transmit side (transmit/side.rs), its arrival
//! table, its status page and the events waiting for an event buffer, and
//! its guest's log allowance (guest_log.rs). Each piece is an owner of its
//! own, worked on by methods of the node it belongs to (events.rs,
//! status_page.rs, guest.rs, queues.rs); what needs the hub as well is done
//! by the device state (state/), which calls these and is never called back.

mod arrival;
mod dma_map;
mod events;
mod guest;
mod queues;
mod status_page;

use std::fmt;
use std::time::Instant;

use firmware_model::abi::{EventRecord, Status};
use firmware_model::{ClusterConfig, NodeId};
use log::Level;
use vm_memory::GuestMemoryAtomic;

pub(crate) use arrival::ArrivalTable;
pub(crate) use dma_map::DmaMap;
pub(crate) use events::{EventQueue, EventsFlushed};
pub(crate) use guest::Guest;
pub(crate) use queues::{queue_name, RingDefect, ServedQueue};
pub(crate) use status_page::StatusView;

use crate::guest_log::GuestLog;
use crate::memory::{Mem, MemGuard, Piece};
use crate::transmit::TxSide;

/// One adapter's device-side state.
pub(crate) struct NodeState {
    id: NodeId,
    /// The guest's memory and virtqueues, while one is attached.
    guest: Guest,
    frames: DmaMap,
    /// The transmit FIFO and how far it has been taken (transmit/).
    tx: TxSide,
    /// Where stamped deliveries' virtual arrivals go (arrival.rs), if any.
    arrival: Option<ArrivalTable>,
    status: StatusView,
    events: EventQueue,
    /// Guest connections so far.
    connections: u64,
    /// This node's allowance of guest-caused log lines (kept across reconnects).
    log: GuestLog,
}

impl NodeState {
    pub(crate) fn new(id: NodeId, pages: u32) -> Self {
        NodeState {
            id,
            guest: Guest::default(),
            frames: DmaMap::new(pages),
            tx: TxSide::default(),
            arrival: None,
            status: StatusView::default(),
            events: EventQueue::default(),
            connections: 0,
            log: GuestLog::new(id),
        }
    }

    pub(crate) fn id(&self) -> NodeId {
        self.id
    }

    /// The guest's memory now, if a guest is attached.
    pub(crate) fn memory(&self) -> Option<MemGuard> {
        self.guest.memory()
    }

    /// The guest's memory, virtqueues and broken queues.
    pub(crate) fn guest(&self) -> &Guest {
        &self.guest
    }

    pub(crate) fn guest_mut(&mut self) -> &mut Guest {
        &mut self.guest
    }

    /// A guest connected (its vhost-user session started): returns its
    /// connection number.
    pub(crate) fn connected(&mut self) -> u64 {
        self.connections += 1;
        self.connections
    }

    /// Guest connections so far.
    pub(crate) fn connections(&self) -> u64 {
        self.connections
    }

    /// A guest connected or disconnected: forget everything about the old one.
    pub(crate) fn forget_guest(&mut self) {
        self.guest = Guest::default();
        self.frames.clear();
        self.tx.forget_guest();
        self.arrival = None;
        self.status.forget_page();
        self.events.forget_guest();
    }

    /// The adapter was reset by its driver: no frames, no arrival table, no
    /// FIFO (its header says Idle).
    pub(crate) fn reset_adapter(&mut self) {
        self.frames.clear();
        self.arrival = None;
        self.forget_tx_fifo();
    }

    /// The guest's new memory table, checked: returns the pages whose frames
    /// it no longer holds, and whether it left out the arrival table (which
    /// is then unregistered).
    pub(crate) fn memory_table_changed(&mut self, mem: GuestMemoryAtomic<Mem>) -> (Vec<u32>, bool) {
        let now = vm_memory::GuestAddressSpace::memory(&mem);
        let lost = self.frames.uncovered(&now);
        let table_lost = self.arrival.is_some_and(|t| !t.lies_in(&now));
        drop(now);
        self.guest.set_memory(mem);
        if table_lost {
            self.arrival = None;
        }
        (lost, table_lost)
    }

    /// Log a line this node's guest caused, within its allowance
    /// (guest_log.rs): a guest can cause them as fast as it can post buffers.
    pub(crate) fn log(&mut self, level: Level, what: fmt::Arguments<'_>) {
        self.log.log(level, what);
    }

    /// Tell the driver of used buffers on `q` (if it asked to be told); a
    /// failure is logged on this node's account.
    pub(crate) fn signal(&mut self, q: &ServedQueue) {
        if let Err(e) = q.signal() {
            self.log(Level::Warn, format_args!("{e}"));
        }
    }

    pub(crate) fn guest_log(&self) -> &GuestLog {
        &self.log
    }

    /// Report guest-caused lines left out in an interval that has ended.
    pub(crate) fn report_ended_log_interval(&mut self, now: Instant) {
        self.log.report_ended_interval(now);
    }

    /// The receive frames bound to `page`.
    pub(crate) fn frames(&self, page: u32) -> Option<&[Piece]> {
        self.frames.get(page)
    }

    pub(crate) fn bind_frames(&mut self, page: u32, frames: &[u64]) {
        self.frames.bind(page, frames);
    }

    pub(crate) fn unbind_frames(&mut self, page: u32) {
        self.frames.unbind(page);
    }

    /// The adapter's PCT is gone (crash, rejoin): so is its DMA map.
    pub(crate) fn clear_frames(&mut self) {
        self.frames.clear();
    }

    pub(crate) fn arrival(&self) -> Option<ArrivalTable> {
        self.arrival
    }

    /// Register (or with `gpa == 0` forget) the arrival table in `mem`
    /// (arrival.rs).
    pub(crate) fn register_arrival_table(
        &mut self,
        mem: &Mem,
        gpa: u64,
        shift: u32,
        config: &ClusterConfig,
    ) -> Result<(), (Status, u32)> {
        if gpa == 0 {
            self.arrival = None;
            return Ok(());
        }
        self.arrival = Some(ArrivalTable::new(
            mem,
            gpa,
            shift,
            config.address_space,
            config.page_size,
        )?);
        Ok(())
    }

    /// The transmit side.
    pub(crate) fn tx(&self) -> &TxSide {
        &self.tx
    }

    pub(crate) fn tx_mut(&mut self) -> &mut TxSide {
        &mut self.tx
    }

    /// Forget the transmit FIFO; its header in the guest's memory says so.
    pub(crate) fn forget_tx_fifo(&mut self) {
        let mem = self.guest.memory();
        self.tx.forget(mem.as_ref());
    }

    /// Register (or with `gpa == 0` forget) the transmit FIFO in `mem`.
    pub(crate) fn register_tx_fifo(
        &mut self,
        mem: &MemGuard,
        gpa: u64,
        slots: u32,
    ) -> firmware_model::abi::CtrlResponse {
        let current = self.guest.memory();
        self.tx.register(mem, current.as_ref(), gpa, slots)
    }

    /// Arm the FIFO's doorbell before the hub sleeps; true if a record was
    /// committed meanwhile.
    pub(crate) fn arm_doorbell(&mut self) -> bool {
        let Some(mem) = self.guest.memory() else {
            return false;
        };
        self.tx.arm_doorbell(&mem)
    }

    pub(crate) fn disarm_doorbell(&mut self) {
        if let Some(mem) = self.guest.memory() {
            self.tx.disarm_doorbell(&mem);
        }
    }

    /// Queue an event for the driver, if a guest is there to read it.
    pub(crate) fn push_event(&mut self, rec: EventRecord) -> bool {
        if !self.guest.attached() {
            return false;
        }
        self.events.push(rec);
        true
    }

    /// Events lost to a full queue.
    pub(crate) fn events_lost(&self) -> u64 {
        self.events.lost()
    }

    /// A test's fresh driver: no events waiting, none lost.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn reset_events(&mut self) {
        self.events = EventQueue::default();
    }

    /// The status page's registration and the error count it shows.
    pub(crate) fn status(&self) -> &StatusView {
        &self.status
    }

    pub(crate) fn status_mut(&mut self) -> &mut StatusView {
        &mut self.status
    }
}

pub(crate) use crate::node_name::Node;
