//! The transmit side, device half: a driver's FIFO registered, its committed
//! records taken in slot order, sent through the hub (the model decides who
//! receives what, in which order and when) and delivered (delivery/), and
//! the records the model refuses counted. docs/device.md section 14,
//! "Transmit FIFO".
//!
//! Records are taken in one place only, [`DeviceState::take_from_fifo`],
//! which the hub's pass calls for each node in turn with a budget; the
//! control path waits for it (progress.rs) instead of taking itself.
//!
//! A refused store (a page not enabled for transmit, ...) is counted in the
//! FIFO header and as a protection error; the stores after it go on, as
//! posted writes do. A record that does not parse stops the FIFO (state
//! Broken) until the driver registers it again.
//!
//! Consecutive records that continue one another within one transmit page are
//! sent as one store, as the Alpha's write buffer merged stores into one
//! packet: receivers see the same bytes in the same order, in fewer packets.

mod fifo;
mod progress;

use std::sync::atomic::Ordering;

use firmware_model::abi::{self, status_of, CtrlResponse, Status};
use firmware_model::{GlobalAddr, Hub, Nanos, NodeId, PageNumber, Turn};
use log::Level;
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend};

pub(crate) use fifo::RegisteredFifo;
pub(crate) use progress::TxProgress;

use crate::delivery::{DmaDelivery, DmaFailure, PendingCopy};
use crate::memory::{MemGuard, Mems, Piece};
use crate::state::DeviceState;
use fifo::Run;

/// A sender whose deliveries not yet due hold this many bytes is not taken
/// from until they drain: its FIFO fills and its stores wait, as a full write
/// buffer stalls the processor.
pub(crate) const MAX_QUEUED_BYTES: usize = 16 << 20;

/// A store at `addr` may be merged with the next: it lies in one page that
/// `node` transmits on (not an ACK page, where each store is a query).
fn mergeable(hub: &Hub, node: NodeId, addr: u64, len: u32) -> bool {
    let page_size = u64::from(hub.config().page_size);
    let Some(last) = addr
        .checked_add(u64::from(len))
        .and_then(|e| e.checked_sub(1))
    else {
        return false;
    };
    if len == 0 || addr / page_size != last / page_size {
        return false;
    }
    let Ok(page) = u32::try_from(addr / page_size) else {
        return false;
    };
    hub.pct_entry(node, PageNumber(page))
        .is_ok_and(|e| e.transmit.is_some() && !e.ack)
}

impl DeviceState {
    /// Take committed records from the FIFO of `turn`'s node, as many as
    /// the turn allows (firmware_model::arbiter: the model's arbitration),
    /// and send them; `mems` is this pass's memory snapshot. Returns the
    /// records taken. The only place anything is taken from a FIFO.
    pub(crate) fn take_from_fifo(&mut self, mut turn: Turn, mems: &Mems) -> usize {
        let id = turn.node();
        let Some(f) = self.nodes[id.index()]
            .fifo
            .filter(|f| f.state == abi::fifo::State::Running)
        else {
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
        let mut head = f.head;
        let mut taken = 0usize;
        let mut events = Vec::new();
        let mut failures = Vec::new();
        // Buffers reused from store to store: nothing is allocated per store.
        let mut copies = std::mem::take(&mut self.copies_scratch);
        let mut pieces = std::mem::take(&mut self.pieces_scratch);
        while turn.open() {
            let hub = &self.hub;
            let run = match f.next_run(
                mem,
                head,
                page_size,
                turn.records_left(),
                |a, l| mergeable(hub, id, a, l),
                &mut pieces,
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
                    data: &pieces,
                    position: head,
                };
                let at = match now {
                    Some(t) => t,
                    None => *now.insert(self.now()),
                };
                self.send(at, id, mems, &sent, &mut events, &mut copies, &mut failures);
            }
            head = run.end;
        }
        self.copies_scratch = copies;
        self.pieces_scratch = pieces;
        let node = &mut self.nodes[id.index()];
        if let Some(cur) = node.fifo.as_mut().filter(|c| c.gpa == f.gpa) {
            cur.head = head;
            node.tx_progress.taken(head);
        }
        // Every slot before `head` is taken (delivered, or copied into a
        // queue): the driver may reuse them.
        if head != f.head
            && mem
                .store(
                    head,
                    f.header(abi::fifo::header::CONSUMED),
                    Ordering::Release,
                )
                .is_err()
        {
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
            self.refuse(id, mems, s.position, status, detail);
            self.nodes[id.index()].log(
                Level::Warn,
                format_args!(
                    "store of {} bytes at {:#x} refused: {e}",
                    s.run.len, s.run.addr
                ),
            );
        }
    }

    /// Count a refused store in the FIFO header (the model has counted the
    /// protection error and raised the event).
    fn refuse(&mut self, id: NodeId, mems: &Mems, position: u64, s: Status, d: u32) {
        let Some(f) = self.nodes[id.index()].fifo.as_mut() else {
            return;
        };
        f.refused += 1;
        let f = *f;
        if let Some(mem) = mems.get(id) {
            f.write_last(mem, position, s, d);
            let _ = mem.store(
                f.refused,
                f.header(abi::fifo::header::REFUSED),
                Ordering::Release,
            );
        }
    }

    /// A record that does not parse: stop taking this FIFO until the driver
    /// registers it again, and say why in its header.
    fn break_fifo(&mut self, id: NodeId, mem: &MemGuard, position: u64, s: Status, d: u32) {
        let node = &mut self.nodes[id.index()];
        let Some(f) = node.fifo.as_mut() else {
            return;
        };
        f.state = abi::fifo::State::Broken;
        let f = *f;
        node.tx_progress.replaced();
        f.write_last(mem, position, s, d);
        let _ = mem.store(
            abi::fifo::State::Broken as u32,
            f.header(abi::fifo::header::STATE),
            Ordering::Release,
        );
        self.guest_error(
            id,
            format_args!(
                "transmit FIFO record at position {position} is malformed ({s}, detail {d}); \
                 nothing more is taken until the driver registers the FIFO again"
            ),
        );
    }

    /// Register (or with `gpa == 0` forget) `id`'s transmit FIFO. It must
    /// be 4096-aligned and lie in one piece of guest RAM. The device clears
    /// the tag array and the header, so a ring used before commits nothing.
    pub(crate) fn register_tx_fifo(
        &mut self,
        id: NodeId,
        mem: &MemGuard,
        gpa: u64,
        slots: u32,
    ) -> CtrlResponse {
        if gpa == 0 {
            self.forget_tx_fifo(id);
            return CtrlResponse::ok(0, 0);
        }
        let Some(layout) = abi::fifo::Layout::new(slots) else {
            return CtrlResponse::error(Status::Malformed, slots);
        };
        if gpa % 4096 != 0 || mem.get_slice(GuestAddress(gpa), layout.bytes()).is_err() {
            return CtrlResponse::error(Status::BadAddress, 0);
        }
        let clear = vec![0u8; abi::fifo::slots_offset(slots)];
        if mem.write_slice(&clear, GuestAddress(gpa)).is_err() {
            return CtrlResponse::error(Status::BadAddress, 0);
        }
        self.forget_tx_fifo(id);
        let f = RegisteredFifo::new(gpa, layout);
        let _ = mem.store(
            abi::fifo::State::Running as u32,
            f.header(abi::fifo::header::STATE),
            Ordering::Release,
        );
        let node = &mut self.nodes[id.index()];
        node.fifo = Some(f);
        node.tx_progress.replaced();
        CtrlResponse::ok(0, 0)
    }

    /// Forget `id`'s FIFO (unregistered, replaced, or its adapter reset).
    /// Everything committed before the request that does this has been
    /// taken (the control path waits for it: progress.rs); nothing more is
    /// taken from it, and its header's state word says so (Idle).
    pub(crate) fn forget_tx_fifo(&mut self, id: NodeId) {
        let node = &mut self.nodes[id.index()];
        if let (Some(f), Some(mem)) = (node.fifo.take(), node.memory()) {
            let _ = mem.store(
                abi::fifo::State::Idle as u32,
                f.header(abi::fifo::header::STATE),
                Ordering::Release,
            );
        }
        node.tx_progress.replaced();
    }

    /// Arm the doorbells before the hub sleeps: every running FIFO asks for a
    /// kick. Returns true if a record was committed meanwhile (then do not
    /// sleep).
    pub(crate) fn arm_doorbells(&mut self) -> bool {
        let mut ready = false;
        for n in &mut self.nodes {
            let Some(mem) = n.memory() else {
                continue;
            };
            let Some(f) = n.fifo.as_mut() else {
                continue;
            };
            if f.state != abi::fifo::State::Running {
                continue;
            }
            let bell = f.header(abi::fifo::header::DOORBELL);
            if mem.store(1u32, bell, Ordering::SeqCst).is_err() {
                continue;
            }
            f.armed = true;
            // Dekker with the driver (commit, fence, read the doorbell): after
            // this fence either the driver sees the doorbell or we see its tag.
            std::sync::atomic::fence(Ordering::SeqCst);
            ready |= f.head_committed(&mem);
        }
        ready
    }

    /// The hub polls again: no kicks needed.
    pub(crate) fn disarm_doorbells(&mut self) {
        for n in &mut self.nodes {
            let Some(mem) = n.memory() else {
                continue;
            };
            let Some(f) = n.fifo.as_mut() else {
                continue;
            };
            if f.armed {
                let _ = mem.store(
                    0u32,
                    f.header(abi::fifo::header::DOORBELL),
                    Ordering::Release,
                );
                f.armed = false;
            }
        }
    }
}

/// One store taken from a FIFO: the run, its data's pieces, its position.
struct Sent<'a> {
    run: &'a Run,
    data: &'a [Piece],
    position: u64,
}
