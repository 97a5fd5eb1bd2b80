//! Records taken from a node's transmit FIFO in its turn and sent through
//! the hub, which decides who receives what, in which order and when; what
//! is due now is delivered at once, the rest queued (delivery/). The FIFO
//! itself, its header and its doorbell are the node's (transmit/).

use firmware_model::abi::status_of;
use firmware_model::{GlobalAddr, Nanos, NodeId, Turn};
use log::Level;

use super::DeviceState;
use crate::delivery::{DmaDelivery, DmaFailure, PendingCopy};
use crate::memory::{MemGuard, Mems, Piece};
use crate::transmit::{mergeable, Run, MAX_QUEUED_BYTES};
use firmware_model::abi::Status;

impl DeviceState {
    /// Take committed records from the FIFO of `turn`'s node, as many as
    /// the turn allows (firmware_model::arbiter: the model's arbitration),
    /// and send them; `mems` is this pass's memory snapshot. Returns the
    /// records taken. The only place anything is taken from a FIFO.
    pub(crate) fn take_from_fifo(&mut self, mut turn: Turn, mems: &Mems) -> usize {
        let id = turn.node();
        let Some(f) = self.nodes[id.index()].tx().running() else {
            return 0;
        };
        let Some(mem) = mems.get(id) else {
            return 0;
        };
        if self.deliveries.queued_by(id) >= MAX_QUEUED_BYTES {
            return 0;
        }
        let page_size = u64::from(self.hub.config().page_size);
        // One reading of the clock for the turn, when its first store is
        // found: the stores of one turn reach the hub together (a clock
        // read per store cost the hub as much as a small store's model
        // work), and a turn that finds nothing reads no clock.
        let mut now = None;
        let mut head = f.head();
        let mut taken = 0usize;
        let mut events = Vec::new();
        let mut failures = Vec::new();
        // Buffers reused from store to store: nothing is allocated per store.
        let mut buffers = std::mem::take(&mut self.tx_buffers);
        let TxBuffers { copies, pieces } = &mut buffers;
        while turn.open() {
            let hub = &self.hub;
            let run = match f.next_run(
                mem,
                head,
                page_size,
                turn.records_left(),
                |a, l| mergeable(hub, id, a, l),
                pieces,
            ) {
                Ok(Some(run)) => run,
                Ok(None) => break,
                Err((status, detail)) => {
                    self.break_fifo(id, mem, head, status, detail);
                    break;
                }
            };
            turn.charge(run.records, u64::from(run.len));
            taken += run.records as usize;
            if !run.pad {
                let sent = Sent {
                    run: &run,
                    data: pieces,
                    position: head,
                };
                let at = match now {
                    Some(t) => t,
                    None => *now.insert(self.now()),
                };
                self.send(at, id, mems, &sent, &mut events, copies, &mut failures);
            }
            head = run.end;
        }
        self.tx_buffers = buffers;
        self.nodes[id.index()].tx_mut().taken(&f, head);
        // Every slot before `head` is taken (delivered, or copied into a
        // queue): the driver may reuse them.
        if head != f.head() && !f.publish_consumed(mem, head) {
            self.break_fifo(id, mem, head, Status::BadAddress, 0);
        }
        self.dispatch(events);
        self.report_dma_failures(&failures);
        taken
    }

    /// Send one store through the hub and deliver what it decides.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        now: Nanos,
        id: NodeId,
        mems: &Mems,
        s: &Sent<'_>,
        events: &mut Vec<firmware_model::Event>,
        copies: &mut Vec<Option<PendingCopy>>,
        failures: &mut Vec<DmaFailure>,
    ) {
        let packet = self.hub.config().max_payload;
        let DeviceState {
            hub,
            nodes,
            deliveries,
            ..
        } = self;
        let mut sink = DmaDelivery {
            now,
            mems,
            nodes,
            queues: deliveries,
            src: id,
            src_data: s.data,
            events,
            packet,
            failures,
            runs: copies,
            seq: hub.last_seq(),
        };
        let addr = GlobalAddr(s.run.addr);
        let send_vt = s.run.vt.map(Nanos);
        let sent = hub.transmit_stamped(now, id, addr, s.run.len, send_vt, &mut sink);
        sink.finish();
        // A copy lost on the way moved a node's drop count, which nothing
        // else shows (docs/device.md, faults): its status page says so at
        // once, as it does for every other value that changes.
        if sent.as_ref().is_ok_and(|s| s.lost > 0) {
            self.refresh_status_pages();
        }
        if let Err(e) = sent {
            // The model has counted the protection error and raised the event.
            let (status, detail) = status_of(&e);
            let node = &mut self.nodes[id.index()];
            node.tx_mut()
                .refuse(mems.get(id), s.position, status, detail);
            node.log(
                Level::Warn,
                format_args!(
                    "store of {} bytes at {:#x} refused: {e}",
                    s.run.len, s.run.addr
                ),
            );
        }
    }

    /// A record that does not parse: the FIFO stops (transmit/side.rs) and
    /// the driver is told.
    fn break_fifo(&mut self, id: NodeId, mem: &MemGuard, position: u64, s: Status, d: u32) {
        if !self.nodes[id.index()]
            .tx_mut()
            .break_fifo(mem, position, s, d)
        {
            return;
        }
        self.guest_error(
            id,
            format_args!(
                "transmit FIFO record at position {position} is malformed ({s}, detail {d}); \
                 nothing more is taken until the driver registers the FIFO again"
            ),
        );
    }

    /// Arm the doorbells before the hub sleeps: every running FIFO asks for a
    /// kick. Returns true if a record was committed meanwhile (then do not
    /// sleep).
    pub(crate) fn arm_doorbells(&mut self) -> bool {
        let mut ready = false;
        for n in &mut self.nodes {
            ready |= n.arm_doorbell();
        }
        ready
    }

    /// The hub polls again: no kicks needed.
    pub(crate) fn disarm_doorbells(&mut self) {
        for n in &mut self.nodes {
            n.disarm_doorbell();
        }
    }
}

/// Buffers the transmit path reuses from store to store, so that nothing is
/// allocated per store: the pieces of guest memory holding a store's data,
/// and each receiver's copy not yet made.
#[derive(Debug, Default)]
pub(super) struct TxBuffers {
    copies: Vec<Option<PendingCopy>>,
    pieces: Vec<Piece>,
}

/// One store taken from a FIFO: the run, its data's pieces, its position.
struct Sent<'a> {
    run: &'a Run,
    data: &'a [Piece],
    position: u64,
}
