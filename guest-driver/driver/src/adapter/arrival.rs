//! The arrival table, driver side (virtual time, issue 29;
//! docs/virtual-time.md, docs/device.md s.14 "Arrival table"): a table in
//! DMA memory, one u64 per granule of Memory Channel address space, where
//! the device writes the virtual arrival of each stamped packet it delivers
//! here, before the packet's data. A thread that saw data it waited for
//! reads the entry after (acquire) and resumes at that time
//! (`vclock::wait_end`).

use std::sync::atomic::Ordering;

use firmware_model::abi::{arrival_table_entries, CtrlRequest, MIN_ARRIVAL_GRANULE_SHIFT};

use super::Adapter;
use crate::dma::DmaRegion;
use crate::error::{Error, Result};
use crate::transport::Transport;

/// The granule the driver asks for first: 256 bytes, a few cache lines, so
/// that unrelated words rarely share an entry.
pub const DEFAULT_GRANULE_SHIFT: u32 = 8;

/// A registered arrival table: cheap to clone, read from any thread.
#[derive(Clone, Debug)]
pub struct ArrivalTable {
    region: DmaRegion,
    shift: u32,
    entries: u64,
}

impl ArrivalTable {
    /// Bytes of Memory Channel address space per entry.
    pub fn granule(&self) -> u64 {
        1 << self.shift
    }

    /// The virtual arrival of the last stamped packet that wrote the granule
    /// of `global_addr` here; `None` if none has (or outside the space).
    pub fn arrival(&self, global_addr: u64) -> Option<u64> {
        let g = global_addr >> self.shift;
        if g >= self.entries {
            return None;
        }
        let off = usize::try_from(g * 8).ok()?;
        let v = self
            .region
            .atomic_u64(off)
            .ok()
            .map(|a| u64::from_le(a.load(Ordering::Acquire)))?;
        (v != 0).then_some(v)
    }

    /// The latest arrival over `[global_addr, global_addr + len)`.
    pub fn arrival_range(&self, global_addr: u64, len: u64) -> Option<u64> {
        if len == 0 {
            return None;
        }
        let first = global_addr >> self.shift;
        let last = global_addr.saturating_add(len - 1) >> self.shift;
        (first..=last.min(self.entries.saturating_sub(1)))
            .filter_map(|g| self.arrival(g << self.shift))
            .max()
    }
}

impl<T: Transport> Adapter<T> {
    /// Allocate an arrival table in DMA memory and register it. The granule
    /// is 256 bytes, or larger (up to a page) so that the table takes at
    /// most half the DMA memory left.
    pub fn register_arrival_table(&mut self) -> Result<ArrivalTable> {
        let space = self.regs.address_space;
        let max_shift = self.regs.page_size.trailing_zeros();
        let budget = self.alloc.remaining() as u64 / 2;
        let shift = (DEFAULT_GRANULE_SHIFT.max(MIN_ARRIVAL_GRANULE_SHIFT)..=max_shift)
            .find(|&s| arrival_table_entries(space, s) * 8 <= budget)
            .ok_or(Error::ArrivalTableTooLarge {
                bytes: arrival_table_entries(space, max_shift) * 8,
                budget,
            })?;
        let entries = arrival_table_entries(space, shift);
        let bytes = usize::try_from(entries * 8).map_err(|_| Error::ArrivalTableTooLarge {
            bytes: entries * 8,
            budget,
        })?;
        let region = self.alloc.alloc(bytes, 4096)?;
        self.ctrl_ok(
            "SET_ARRIVAL_TABLE",
            &CtrlRequest::SetArrivalTable {
                gpa: region.gpa(),
                granule_shift: shift,
            },
        )?;
        let table = ArrivalTable {
            region,
            shift,
            entries,
        };
        self.arrivals = Some(table.clone());
        Ok(table)
    }

    /// The registered arrival table (virtual time on), if any.
    pub fn arrival_table(&self) -> Option<&ArrivalTable> {
        self.arrivals.as_ref()
    }
}
