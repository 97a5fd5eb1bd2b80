//! A node's arrival table (virtual time, issue 29; docs/virtual-time.md and
//! docs/device.md s.14, "Arrival table"): one u64 per granule of Memory
//! Channel address space in the node's guest RAM, where the device writes
//! the virtual arrival of every stamped packet it delivers to this node,
//! before the packet's data, so a reader that sees the data and then reads
//! the entry gets that packet's arrival or a later one's.
//!
//! The table is guest memory and the guest names it: it is checked to lie
//! wholly in guest RAM when registered and again at every new memory table,
//! and a write that fails (never expected) is simply not made.

use std::sync::atomic::{fence, Ordering};

use firmware_model::abi::{
    arrival_table_entries, Status, MAX_ARRIVAL_GRANULE_SHIFT, MIN_ARRIVAL_GRANULE_SHIFT,
};
use vm_memory::{Bytes, GuestAddress};

use crate::memory::{range_ok, Mem};

/// Where a node's arrival table is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArrivalTable {
    gpa: u64,
    shift: u32,
    entries: u64,
}

impl ArrivalTable {
    /// A table at `gpa` with granules of `1 << shift` bytes over
    /// `address_space` bytes, if it is well formed and lies in `mem`; the
    /// refusal status and detail otherwise.
    pub(crate) fn new(
        mem: &Mem,
        gpa: u64,
        shift: u32,
        address_space: u64,
        page_size: u32,
    ) -> Result<ArrivalTable, (Status, u32)> {
        let max_shift = MAX_ARRIVAL_GRANULE_SHIFT.min(page_size.trailing_zeros());
        if !(MIN_ARRIVAL_GRANULE_SHIFT..=max_shift).contains(&shift) {
            return Err((Status::Malformed, shift));
        }
        let entries = arrival_table_entries(address_space, shift);
        let table = ArrivalTable {
            gpa,
            shift,
            entries,
        };
        if gpa % 8 != 0 || !table.lies_in(mem) {
            return Err((Status::BadAddress, 0));
        }
        Ok(table)
    }

    /// Bytes of the table.
    fn bytes(&self) -> Option<usize> {
        usize::try_from(self.entries.checked_mul(8)?).ok()
    }

    /// The whole table lies in `mem`.
    pub(crate) fn lies_in(&self, mem: &Mem) -> bool {
        self.bytes().is_some_and(|b| range_ok(mem, self.gpa, b))
    }

    /// Write `vt` into the entry of every granule `[addr, addr + len)`
    /// touches, then a release fence: the caller writes the data after.
    pub(crate) fn stamp(&self, mem: &Mem, addr: u64, len: u32, vt: u64) {
        if len == 0 {
            return;
        }
        let first = addr >> self.shift;
        let last = (addr + u64::from(len) - 1) >> self.shift;
        for g in first..=last.min(self.entries.saturating_sub(1)) {
            let _ = mem.store(
                vt.to_le(),
                GuestAddress(self.gpa + 8 * g),
                Ordering::Relaxed,
            );
        }
        fence(Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ram(bytes: usize) -> Mem {
        Mem::from_ranges(&[(GuestAddress(0), bytes)]).unwrap()
    }

    fn entry(mem: &Mem, gpa: u64, g: u64) -> u64 {
        mem.read_obj::<u64>(GuestAddress(gpa + 8 * g)).unwrap()
    }

    #[test]
    fn stamps_every_granule_a_packet_touches_and_nothing_else() {
        let mem = ram(1 << 20);
        let t = ArrivalTable::new(&mem, 0x1000, 8, 64 << 10, 8192).unwrap();
        t.stamp(&mem, 250, 10, 77); // granules 0 and 1
        assert_eq!(entry(&mem, 0x1000, 0), 77);
        assert_eq!(entry(&mem, 0x1000, 1), 77);
        assert_eq!(entry(&mem, 0x1000, 2), 0);
        t.stamp(&mem, 256, 1, 99); // the last packet wins
        assert_eq!(entry(&mem, 0x1000, 1), 99);
    }

    #[test]
    fn a_bad_table_is_refused() {
        let mem = ram(64 << 10);
        // Granule too small, too large, larger than a page.
        for shift in [0, 5, 17, 14] {
            assert_eq!(
                ArrivalTable::new(&mem, 0x1000, shift, 1 << 20, 8192),
                Err((Status::Malformed, shift))
            );
        }
        // Misaligned, past the end of RAM (1 MiB at 64 B granules is 128 KiB).
        assert_eq!(
            ArrivalTable::new(&mem, 0x1004, 8, 1 << 20, 8192),
            Err((Status::BadAddress, 0))
        );
        assert_eq!(
            ArrivalTable::new(&mem, 0x1000, 6, 1 << 20, 8192),
            Err((Status::BadAddress, 0))
        );
        assert_eq!(
            ArrivalTable::new(&mem, u64::MAX - 7, 8, 1 << 20, 8192),
            Err((Status::BadAddress, 0))
        );
        let ok = ArrivalTable::new(&mem, 0x1000, 12, 1 << 20, 8192).unwrap();
        assert!(ok.lies_in(&mem));
        assert!(!ok.lies_in(&ram(0x1000)));
    }
}
