//! The transmit FIFO, device side: committed records are taken in slot order,
//! sent through the hub (the model decides who receives what, in which order
//! and when) and delivered (delivery.rs, due.rs). docs/device.md section 14,
//! "Transmit FIFO".
//!
//! Everything in the FIFO is guest memory, so nothing in it is trusted: the
//! device reads a slot's tag first and its record only when the tag commits
//! it, keeps its own head position, computes every address from that position
//! (a record names no guest address but its global one), and stops taking a
//! FIFO whose records do not parse (state Broken) until the driver registers
//! it again. A refused store (a page not enabled for transmit, ...) is counted
//! in the FIFO header and as a protection error; the stores after it go on, as
//! posted writes do.
//!
//! Consecutive records that continue one another within one transmit page are
//! sent as one store, as the Alpha's write buffer merged stores into one
//! packet: receivers see the same bytes in the same order, in fewer packets.

use std::sync::atomic::Ordering;

use firmware_model::abi::{
    fifo, status_of, Status, TxRecordHeader, MAX_RECORD_DATA, TX_RECORD_HEADER_SIZE,
};
use firmware_model::{GlobalAddr, NodeId, PageNumber};
use log::{debug, Level};
use vm_memory::{Bytes, GuestAddress, GuestAddressSpace};

use crate::delivery::{DmaDelivery, PendingCopy};
use crate::memory::{MemGuard, Piece};
use crate::node::RegisteredFifo;
use crate::state::DeviceState;

/// Bytes of records taken from one FIFO in one pass, so one busy guest cannot
/// hold the hub away from the others.
pub(crate) const PASS_BYTES: u64 = 256 << 10;
/// A sender whose deliveries not yet due hold this many bytes is not taken
/// from until they drain: its FIFO fills and its stores wait, as a full write
/// buffer stalls the processor.
pub(crate) const MAX_QUEUED_BYTES: usize = 16 << 20;

/// One store to send: where, how long (its bytes are in the FIFO at the
/// pieces `next_run` left in its buffer).
struct Run {
    addr: u64,
    len: u32,
    /// Position after its last record.
    end: u64,
    records: u32,
    /// Padding to skip, not a store.
    pad: bool,
}

/// Why a record could not be taken.
enum Take {
    /// Not committed yet.
    Empty,
    /// A record to send, or padding to skip.
    Record(TxRecordHeader, u64),
    /// The record does not parse: the FIFO is broken.
    Broken(Status, u32),
}

fn take(mem: &MemGuard, f: &RegisteredFifo, at: u64) -> Take {
    let tag: u32 = match mem.load(GuestAddress(f.tag_gpa(at)), Ordering::Acquire) {
        Ok(t) => t,
        Err(_) => return Take::Broken(Status::BadAddress, 0),
    };
    if tag != fifo::tag(at, f.slots) {
        return Take::Empty;
    }
    let mut h = [0u8; TX_RECORD_HEADER_SIZE];
    if mem
        .read_slice(&mut h, GuestAddress(f.slot_gpa(at)))
        .is_err()
    {
        return Take::Broken(Status::BadAddress, 0);
    }
    let Some(hdr) = TxRecordHeader::from_bytes(&h) else {
        return Take::Broken(Status::Malformed, 0);
    };
    if hdr.flags & !fifo::FLAG_PAD != 0 {
        return Take::Broken(Status::Malformed, hdr.flags);
    }
    if hdr.flags == 0 && hdr.len > MAX_RECORD_DATA {
        return Take::Broken(Status::TooLarge, hdr.len);
    }
    let slots = TxRecordHeader::slots(hdr.len);
    if slots > f.slots_to_end(at) {
        // A record never wraps past the last slot.
        return Take::Broken(Status::Malformed, hdr.len);
    }
    Take::Record(hdr, slots)
}

impl DeviceState {
    /// Take committed records from node `i`'s FIFO (up to [`PASS_BYTES`]) and
    /// send them. `mems` holds every node's memory for this pass. Returns the
    /// records taken.
    pub(crate) fn process_fifo(&mut self, i: usize, mems: &[Option<MemGuard>]) -> usize {
        let Some(f) = self.nodes[i]
            .fifo
            .filter(|f| f.state == fifo::State::Running)
        else {
            return 0;
        };
        let Some(Some(mem)) = mems.get(i) else {
            return 0;
        };
        if self.queued_bytes.get(i).copied().unwrap_or(0) >= MAX_QUEUED_BYTES {
            return 0;
        }
        let mut head = f.head;
        let mut budget = PASS_BYTES;
        let mut taken = 0usize;
        let mut events = Vec::new();
        // Buffers reused from store to store: nothing is allocated per store.
        let mut copies = std::mem::take(&mut self.copies_scratch);
        let mut pieces = std::mem::take(&mut self.pieces_scratch);
        while budget > 0 {
            let run = match self.next_run(i, mem, &f, head, &mut pieces) {
                Ok(Some(run)) => run,
                Ok(None) => break,
                Err((status, detail)) => {
                    self.break_fifo(i, mem, head, status, detail);
                    break;
                }
            };
            budget = budget.saturating_sub(u64::from(run.len).max(1));
            taken += run.records as usize;
            if !run.pad {
                self.send(i, mems, &run, &pieces, head, &mut events, &mut copies);
            }
            head = run.end;
        }
        self.copies_scratch = copies;
        self.pieces_scratch = pieces;
        if let Some(f) = self.nodes[i].fifo.as_mut() {
            f.head = head;
        }
        // Every slot before `head` is taken (delivered, or copied into a
        // queue): the driver may reuse them.
        if head != f.head
            && mem
                .store(
                    head,
                    GuestAddress(f.gpa + fifo::header::CONSUMED as u64),
                    Ordering::Release,
                )
                .is_err()
        {
            self.break_fifo(i, mem, head, Status::BadAddress, 0);
        }
        self.dispatch(events);
        taken
    }

    /// The next store to send from position `at`: one record, or several that
    /// continue one another within one page the sender may transmit on (the
    /// write buffer's merging). Padding is skipped (a run of length 0).
    fn next_run(
        &self,
        i: usize,
        mem: &MemGuard,
        f: &RegisteredFifo,
        at: u64,
        data: &mut Vec<Piece>,
    ) -> Result<Option<Run>, (Status, u32)> {
        data.clear();
        let (hdr, slots) = match take(mem, f, at) {
            Take::Empty => return Ok(None),
            Take::Broken(s, d) => return Err((s, d)),
            Take::Record(h, s) => (h, s),
        };
        let data_gpa = f.slot_gpa(at) + TX_RECORD_HEADER_SIZE as u64;
        if hdr.flags == fifo::FLAG_PAD {
            return Ok(Some(Run {
                addr: 0,
                len: 0,
                end: at + slots,
                records: 1,
                pad: true,
            }));
        }
        data.push((data_gpa, hdr.len));
        let mut run = Run {
            addr: hdr.addr,
            len: hdr.len,
            end: at + slots,
            records: 1,
            pad: false,
        };
        if !self.mergeable(i, hdr.addr, hdr.len) {
            return Ok(Some(run));
        }
        let page_size = u64::from(self.hub.config().page_size);
        let page = hdr.addr / page_size;
        while let Take::Record(next, s) = take(mem, f, run.end) {
            let end = next.addr.checked_add(u64::from(next.len));
            if next.flags != 0
                || next.len == 0
                || next.addr != run.addr + u64::from(run.len)
                || end.is_none_or(|e| (e - 1) / page_size != page)
                || run.len + next.len > MAX_RECORD_DATA
            {
                break;
            }
            data.push((f.slot_gpa(run.end) + TX_RECORD_HEADER_SIZE as u64, next.len));
            run.len += next.len;
            run.end += s;
            run.records += 1;
        }
        Ok(Some(run))
    }

    /// A store at `addr` may be merged with the next: it lies in one page that
    /// `i` transmits on (not an ACK page, where each store is a query).
    fn mergeable(&self, i: usize, addr: u64, len: u32) -> bool {
        let page_size = u64::from(self.hub.config().page_size);
        let Some(last) = addr
            .checked_add(u64::from(len))
            .and_then(|e| e.checked_sub(1))
        else {
            return false;
        };
        if len == 0 || addr / page_size != last / page_size {
            return false;
        }
        let page = PageNumber((addr / page_size) as u32);
        self.hub
            .pct_entry(NodeId(i as u8), page)
            .is_ok_and(|e| e.transmit.is_some() && !e.ack)
    }

    /// Send one store (its bytes at `data`) through the hub and deliver
    /// what it decides.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        i: usize,
        mems: &[Option<MemGuard>],
        run: &Run,
        data: &[Piece],
        position: u64,
        events: &mut Vec<firmware_model::Event>,
        copies: &mut Vec<Option<PendingCopy>>,
    ) {
        let now = self.now();
        let packet = self.hub.config().max_payload;
        let DeviceState {
            hub,
            nodes,
            pending,
            queued_bytes,
            ..
        } = self;
        let mut sink = DmaDelivery {
            now,
            mems,
            nodes,
            queues: pending,
            queued_bytes,
            src: i,
            src_data: data,
            events,
            packet,
            failed: 0,
            runs: copies,
            seq: hub.last_seq(),
        };
        let sent = hub.transmit(
            now,
            NodeId(i as u8),
            GlobalAddr(run.addr),
            run.len,
            &mut sink,
        );
        sink.finish();
        if let Err(e) = sent {
            // The model has counted the protection error and raised the event.
            let (status, detail) = status_of(&e);
            self.refuse(i, mems, position, status, detail);
            self.guest_log(
                i,
                Level::Warn,
                format_args!("store of {} bytes at {:#x} refused: {e}", run.len, run.addr),
            );
        }
    }

    /// Count a refused store in the FIFO header (the model has counted the
    /// protection error and raised the event).
    fn refuse(&mut self, i: usize, mems: &[Option<MemGuard>], position: u64, s: Status, d: u32) {
        let Some(f) = self.nodes[i].fifo.as_mut() else {
            return;
        };
        f.refused += 1;
        let f = *f;
        if let Some(Some(mem)) = mems.get(i) {
            write_last(mem, &f, position, s, d);
            let _ = mem.store(
                f.refused,
                GuestAddress(f.gpa + fifo::header::REFUSED as u64),
                Ordering::Release,
            );
        }
    }

    /// A record that does not parse: stop taking this FIFO until the driver
    /// registers it again, and say why in its header.
    fn break_fifo(&mut self, i: usize, mem: &MemGuard, position: u64, s: Status, d: u32) {
        let Some(f) = self.nodes[i].fifo.as_mut() else {
            return;
        };
        f.state = fifo::State::Broken;
        let f = *f;
        write_last(mem, &f, position, s, d);
        let _ = mem.store(
            fifo::State::Broken as u32,
            GuestAddress(f.gpa + fifo::header::STATE as u64),
            Ordering::Release,
        );
        debug!("node{i}: transmit FIFO broken at position {position}: {s} (detail {d})");
        self.guest_error(
            i,
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
            let (Some(f), Some(atomic)) = (n.fifo.as_mut(), n.mem.as_ref()) else {
                continue;
            };
            if f.state != fifo::State::Running {
                continue;
            }
            let mem = atomic.memory();
            let bell = GuestAddress(f.gpa + fifo::header::DOORBELL as u64);
            if mem.store(1u32, bell, Ordering::SeqCst).is_err() {
                continue;
            }
            f.armed = true;
            // Dekker with the driver (commit, fence, read the doorbell): after
            // this fence either the driver sees the doorbell or we see its tag.
            std::sync::atomic::fence(Ordering::SeqCst);
            let tag: u32 = mem
                .load(GuestAddress(f.tag_gpa(f.head)), Ordering::Acquire)
                .unwrap_or(0);
            ready |= tag == fifo::tag(f.head, f.slots);
        }
        ready
    }

    /// The hub polls again: no kicks needed.
    pub(crate) fn disarm_doorbells(&mut self) {
        for n in &mut self.nodes {
            let (Some(f), Some(atomic)) = (n.fifo.as_mut(), n.mem.as_ref()) else {
                continue;
            };
            if f.armed {
                let bell = GuestAddress(f.gpa + fifo::header::DOORBELL as u64);
                let _ = atomic.memory().store(0u32, bell, Ordering::Release);
                f.armed = false;
            }
        }
    }
}

fn write_last(mem: &MemGuard, f: &RegisteredFifo, position: u64, s: Status, d: u32) {
    let h = |off: usize| GuestAddress(f.gpa + off as u64);
    let _ = mem.store(s as u32, h(fifo::header::LAST_STATUS), Ordering::Relaxed);
    let _ = mem.store(d, h(fifo::header::LAST_DETAIL), Ordering::Relaxed);
    let _ = mem.store(position, h(fifo::header::LAST_POSITION), Ordering::Release);
}
