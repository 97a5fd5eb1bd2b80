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
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, VolatileSlice};

use crate::memory::{MemGuard, Piece};

/// Where a driver's transmit FIFO is and how far the hub has taken it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegisteredFifo {
    gpa: u64,
    layout: fifo::Layout,
    /// Next position to take.
    head: u64,
    state: fifo::State,
    /// Records refused so far.
    refused: u64,
    /// The doorbell is armed: the hub asked for a kick before it sleeps.
    armed: bool,
}

/// What is at one position.
pub(crate) enum Take {
    /// Not committed yet.
    Empty,
    /// A record to send, or padding to skip, the slots it takes, and the
    /// sender's virtual time if it carries one (`fifo::FLAG_VTIME`).
    Record(TxRecordHeader, u64, Option<u64>),
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
    /// The sender's virtual time, if its records carry one (every record
    /// of a run carries the same).
    pub(crate) vt: Option<u64>,
}

impl RegisteredFifo {
    pub(super) fn new(gpa: u64, layout: fifo::Layout) -> RegisteredFifo {
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
    pub(super) fn header(&self, offset: usize) -> GuestAddress {
        GuestAddress(self.gpa + offset as u64)
    }

    fn tag_gpa(&self, position: u64) -> GuestAddress {
        GuestAddress(self.gpa + self.layout.tag_offset(position) as u64)
    }

    /// The whole ring as one slice of host memory: found once per batch of
    /// records, so reading each tag and header is an offset, not a search
    /// of the guest's memory map. `None` if it no longer lies in one piece
    /// of guest RAM (checked when it was registered).
    fn view<'m>(&self, mem: &'m MemGuard) -> Option<VolatileSlice<'m, ()>> {
        mem.get_slice(GuestAddress(self.gpa), self.layout.bytes())
            .ok()
            .filter(|v| v.len() == self.layout.bytes())
    }

    fn data_gpa(&self, position: u64, vtime: bool) -> u64 {
        self.gpa + self.layout.data_offset_with(position, vtime) as u64
    }

    /// The record at `at` of the ring `ring` ([`RegisteredFifo::view`]),
    /// if committed.
    fn take(&self, ring: &VolatileSlice<'_, ()>, at: u64) -> Take {
        let tag: u32 = match ring.load(self.layout.tag_offset(at), Ordering::Acquire) {
            Ok(t) => t,
            Err(_) => return Take::Broken(Status::BadAddress, 0),
        };
        if tag != self.layout.tag(at) {
            return Take::Empty;
        }
        let mut h = [0u8; TX_RECORD_HEADER_SIZE];
        if ring
            .read_slice(&mut h, self.layout.slot_offset(at))
            .is_err()
        {
            return Take::Broken(Status::BadAddress, 0);
        }
        let Some(hdr) = TxRecordHeader::from_bytes(&h) else {
            return Take::Broken(Status::Malformed, 0);
        };
        // Padding carries no time; a store may (virtual time, ABI 3).
        if hdr.flags & !fifo::KNOWN_FLAGS != 0 || hdr.flags == fifo::KNOWN_FLAGS {
            return Take::Broken(Status::Malformed, hdr.flags);
        }
        if hdr.flags != fifo::FLAG_PAD && hdr.len > MAX_RECORD_DATA {
            return Take::Broken(Status::TooLarge, hdr.len);
        }
        let slots = TxRecordHeader::slots_with(hdr.len, hdr.has_vtime());
        if slots > self.layout.slots_to_end(at) {
            // A record never wraps past the last slot.
            return Take::Broken(Status::Malformed, hdr.len);
        }
        let vt = if hdr.has_vtime() {
            let mut b = [0u8; 8];
            if ring
                .read_slice(&mut b, self.layout.vtime_offset(at))
                .is_err()
            {
                return Take::Broken(Status::BadAddress, 0);
            }
            Some(u64::from_le_bytes(b))
        } else {
            None
        };
        Take::Record(hdr, slots, vt)
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
        let Some(ring) = self.view(mem) else {
            return Err((Status::BadAddress, 0));
        };
        let (hdr, slots, vt) = match self.take(&ring, at) {
            Take::Empty => return Ok(None),
            Take::Broken(s, d) => return Err((s, d)),
            Take::Record(h, s, vt) => (h, s, vt),
        };
        if hdr.flags == fifo::FLAG_PAD {
            return Ok(Some(Run {
                addr: 0,
                len: 0,
                end: at + slots,
                records: 1,
                pad: true,
                vt: None,
            }));
        }
        data.push((self.data_gpa(at, vt.is_some()), hdr.len));
        let mut run = Run {
            addr: hdr.addr,
            len: hdr.len,
            end: at + slots,
            records: 1,
            pad: false,
            vt,
        };
        if !mergeable(hdr.addr, hdr.len) {
            return Ok(Some(run));
        }
        let page = hdr.addr / page_size;
        while let Take::Record(next, s, next_vt) = self.take(&ring, run.end) {
            let end = next.addr.checked_add(u64::from(next.len));
            // Stores of different virtual times are not merged: each packet
            // arrives at its own sender's time.
            if run.records >= max_records
                || next.flags != hdr.flags
                || next_vt != run.vt
                || next.len == 0
                || next.addr != run.addr + u64::from(run.len)
                || end.is_none_or(|e| (e - 1) / page_size != page)
                || run.len + next.len > MAX_RECORD_DATA
            {
                break;
            }
            data.push((self.data_gpa(run.end, next_vt.is_some()), next.len));
            run.len += next.len;
            run.end += s;
            run.records += 1;
        }
        Ok(Some(run))
    }

    /// Next position to take.
    pub(crate) fn head(&self) -> u64 {
        self.head
    }

    /// Records are taken from it (not broken).
    pub(super) fn is_running(&self) -> bool {
        self.state == fifo::State::Running
    }

    /// Both are the same registration's ring.
    pub(super) fn same_ring(&self, other: &RegisteredFifo) -> bool {
        self.gpa == other.gpa
    }

    /// Everything before `head` is taken.
    pub(super) fn advance_to(&mut self, head: u64) {
        self.head = head;
    }

    /// One more record refused: the count now.
    pub(super) fn count_refused(&mut self) -> u64 {
        self.refused += 1;
        self.refused
    }

    /// A record did not parse: nothing more is taken.
    pub(super) fn set_broken(&mut self) {
        self.state = fifo::State::Broken;
    }

    /// The doorbell is armed (the hub asked for a kick), or no longer.
    pub(super) fn set_armed(&mut self, armed: bool) {
        self.armed = armed;
    }

    pub(super) fn armed(&self) -> bool {
        self.armed
    }

    /// Tell the driver that every slot before `head` is taken (delivered, or
    /// copied into a queue), so it may reuse them. False if the header is
    /// not in `mem`.
    pub(crate) fn publish_consumed(&self, mem: &MemGuard, head: u64) -> bool {
        mem.store(head, self.header(fifo::header::CONSUMED), Ordering::Release)
            .is_ok()
    }

    /// The position after the last record committed from the head on, at
    /// most one lap ahead: where the hub will have taken everything committed
    /// now. Reads only tags and headers; takes nothing.
    pub(crate) fn committed_end(&self, mem: &MemGuard) -> u64 {
        let mut at = self.head;
        let Some(ring) = self.view(mem) else {
            return at;
        };
        let lap = self.head + u64::from(self.layout.slots());
        while at < lap {
            match self.take(&ring, at) {
                Take::Record(_, slots, _) => at += slots,
                Take::Empty | Take::Broken(..) => break,
            }
        }
        at
    }

    /// Say in the header why the record at `position` was refused or broke
    /// the FIFO.
    pub(super) fn write_last(&self, mem: &MemGuard, position: u64, s: Status, d: u32) {
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
    pub(super) fn head_committed(&self, mem: &MemGuard) -> bool {
        let tag: u32 = mem
            .load(self.tag_gpa(self.head), Ordering::Acquire)
            .unwrap_or(0);
        tag == self.layout.tag(self.head)
    }
}
