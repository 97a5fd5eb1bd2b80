//! One registered transmit FIFO as the device reads it: where it is, how far
//! it has been taken, and its records parsed from guest memory. The address
//! arithmetic is `firmware_model::abi::fifo::Layout`'s, shared with the
//! driver.
//!
//! Everything in the FIFO is guest memory, so nothing in it is trusted: a
//! slot's tag is read first and its record only when the tag commits it,
//! every address is computed from the device's own position, and a record
//! that does not parse breaks the FIFO.

use std::sync::atomic::Ordering;

use firmware_model::abi::{fifo, Status, TxRecordHeader, MAX_RECORD_DATA, TX_RECORD_HEADER_SIZE};
use vm_memory::{Bytes, GuestAddress};

use crate::memory::{MemGuard, Piece};

/// Where a driver's transmit FIFO is and how far the hub has taken it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegisteredFifo {
    pub(crate) gpa: u64,
    pub(crate) layout: fifo::Layout,
    /// Next position to take.
    pub(crate) head: u64,
    pub(crate) state: fifo::State,
    /// Records refused so far.
    pub(crate) refused: u64,
    /// The doorbell is armed: the hub asked for a kick before it sleeps.
    pub(crate) armed: bool,
}

/// What is at one position.
pub(crate) enum Take {
    /// Not committed yet.
    Empty,
    /// A record to send, or padding to skip, and the slots it takes.
    Record(TxRecordHeader, u64),
    /// The record does not parse: the FIFO is broken.
    Broken(Status, u32),
}

/// One store to send: where, how long (its bytes are in the FIFO at the
/// pieces [`RegisteredFifo::next_run`] left in its buffer).
pub(crate) struct Run {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    /// Position after its last record.
    pub(crate) end: u64,
    pub(crate) records: u32,
    /// Padding to skip, not a store.
    pub(crate) pad: bool,
}

impl RegisteredFifo {
    pub(crate) fn new(gpa: u64, layout: fifo::Layout) -> RegisteredFifo {
        RegisteredFifo {
            gpa,
            layout,
            head: 0,
            state: fifo::State::Running,
            refused: 0,
            armed: false,
        }
    }

    /// Guest address of header word `offset` (`fifo::header`).
    pub(crate) fn header(&self, offset: usize) -> GuestAddress {
        GuestAddress(self.gpa + offset as u64)
    }

    fn tag_gpa(&self, position: u64) -> GuestAddress {
        GuestAddress(self.gpa + self.layout.tag_offset(position) as u64)
    }

    fn slot_gpa(&self, position: u64) -> GuestAddress {
        GuestAddress(self.gpa + self.layout.slot_offset(position) as u64)
    }

    fn data_gpa(&self, position: u64) -> u64 {
        self.gpa + self.layout.data_offset(position) as u64
    }

    /// The record at `at`, if committed.
    pub(crate) fn take(&self, mem: &MemGuard, at: u64) -> Take {
        let tag: u32 = match mem.load(self.tag_gpa(at), Ordering::Acquire) {
            Ok(t) => t,
            Err(_) => return Take::Broken(Status::BadAddress, 0),
        };
        if tag != self.layout.tag(at) {
            return Take::Empty;
        }
        let mut h = [0u8; TX_RECORD_HEADER_SIZE];
        if mem.read_slice(&mut h, self.slot_gpa(at)).is_err() {
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
        if slots > self.layout.slots_to_end(at) {
            // A record never wraps past the last slot.
            return Take::Broken(Status::Malformed, hdr.len);
        }
        Take::Record(hdr, slots)
    }

    /// The next store to send from position `at`: one record, or several that
    /// continue one another within one page (the write buffer's merging),
    /// when `mergeable` says the first one's page allows it. Padding is
    /// skipped (a run of length 0). At most `max_records` records merge.
    /// Its data's pieces are left in `data`.
    pub(crate) fn next_run(
        &self,
        mem: &MemGuard,
        at: u64,
        page_size: u64,
        max_records: u32,
        mergeable: impl Fn(u64, u32) -> bool,
        data: &mut Vec<Piece>,
    ) -> Result<Option<Run>, (Status, u32)> {
        data.clear();
        let (hdr, slots) = match self.take(mem, at) {
            Take::Empty => return Ok(None),
            Take::Broken(s, d) => return Err((s, d)),
            Take::Record(h, s) => (h, s),
        };
        if hdr.flags == fifo::FLAG_PAD {
            return Ok(Some(Run {
                addr: 0,
                len: 0,
                end: at + slots,
                records: 1,
                pad: true,
            }));
        }
        data.push((self.data_gpa(at), hdr.len));
        let mut run = Run {
            addr: hdr.addr,
            len: hdr.len,
            end: at + slots,
            records: 1,
            pad: false,
        };
        if !mergeable(hdr.addr, hdr.len) {
            return Ok(Some(run));
        }
        let page = hdr.addr / page_size;
        while let Take::Record(next, s) = self.take(mem, run.end) {
            let end = next.addr.checked_add(u64::from(next.len));
            if run.records >= max_records
                || next.flags != 0
                || next.len == 0
                || next.addr != run.addr + u64::from(run.len)
                || end.is_none_or(|e| (e - 1) / page_size != page)
                || run.len + next.len > MAX_RECORD_DATA
            {
                break;
            }
            data.push((self.data_gpa(run.end), next.len));
            run.len += next.len;
            run.end += s;
            run.records += 1;
        }
        Ok(Some(run))
    }

    /// The position after the last record committed from the head on, at
    /// most one lap ahead: where the hub will have taken everything committed
    /// now. Reads only tags and headers; takes nothing.
    pub(crate) fn committed_end(&self, mem: &MemGuard) -> u64 {
        let mut at = self.head;
        let lap = self.head + u64::from(self.layout.slots());
        while at < lap {
            match self.take(mem, at) {
                Take::Record(_, slots) => at += slots,
                Take::Empty | Take::Broken(..) => break,
            }
        }
        at
    }

    /// Say in the header why the record at `position` was refused or broke
    /// the FIFO.
    pub(crate) fn write_last(&self, mem: &MemGuard, position: u64, s: Status, d: u32) {
        let _ = mem.store(
            s as u32,
            self.header(fifo::header::LAST_STATUS),
            Ordering::Relaxed,
        );
        let _ = mem.store(d, self.header(fifo::header::LAST_DETAIL), Ordering::Relaxed);
        let _ = mem.store(
            position,
            self.header(fifo::header::LAST_POSITION),
            Ordering::Release,
        );
    }

    /// Whether the record at the head is committed (the doorbell's check).
    pub(crate) fn head_committed(&self, mem: &MemGuard) -> bool {
        let tag: u32 = mem
            .load(self.tag_gpa(self.head), Ordering::Acquire)
            .unwrap_or(0);
        tag == self.layout.tag(self.head)
    }
}
