//! Attached regions: RAII handles for transmit and receive mappings. A
//! handle checks every access against the region's size; dropping it detaches
//! (imc_asdetach).

use std::sync::Arc;

use log::warn;

use super::host::RegionHost;
use crate::error::McError;
use crate::port::ReceiveMemory;
use crate::table::RegionEntry;

fn check(offset: usize, len: usize, size: u64) -> Result<(), McError> {
    if offset.checked_add(len).is_none_or(|end| end as u64 > size) {
        return Err(McError::OutOfBounds {
            offset,
            len,
            size: firmware_model::to_usize(size),
        });
    }
    Ok(())
}

/// A region attached for transmit: stores become remote writes. Detached when
/// dropped (imc_asdetach).
pub struct TxRegion {
    host: Arc<dyn RegionHost>,
    entry: RegionEntry,
}

impl TxRegion {
    pub(crate) fn new(host: Arc<dyn RegionHost>, entry: RegionEntry) -> Self {
        TxRegion { host, entry }
    }

    pub fn id(&self) -> u32 {
        self.entry.id
    }

    pub fn len(&self) -> usize {
        firmware_model::to_usize(self.entry.size)
    }

    pub fn is_empty(&self) -> bool {
        self.entry.size == 0
    }

    /// Global address of byte 0.
    pub fn global_addr(&self) -> u64 {
        self.host.node().layout.page_addr(self.entry.first_page)
    }

    /// Write `data` at `offset`: a posted store, which returns once it is
    /// queued for the adapter, before it reaches anyone (seed 000 s.2.2: "All
    /// I/O operations are fully pipelined"). Receivers see its packets in
    /// address order, after this node's earlier stores; only
    /// [`MemoryChannel::check_errors`](crate::MemoryChannel::check_errors)
    /// proves it arrived. A refused store is reported by the next `flush` or
    /// `check_errors`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), McError> {
        check(offset, data.len(), self.entry.size)?;
        if data.is_empty() {
            return Ok(());
        }
        self.host
            .node()
            .store(self.global_addr() + offset as u64, data)
    }

    /// Write `data` at `offset` as one posted store, without allocating
    /// (code in a signal handler may use it; see [`TxRegion::write`] for what
    /// returning means). In reliable mode it is checked as `write` is, which
    /// allocates.
    pub fn post(&self, offset: usize, data: &[u8]) -> Result<(), McError> {
        check(offset, data.len(), self.entry.size)?;
        if data.is_empty() {
            return Ok(());
        }
        self.host
            .node()
            .store_one(self.global_addr() + offset as u64, data)
    }

    /// Several writes, queued together and in order (posted, as
    /// [`TxRegion::write`]). Writes that continue one another within a
    /// [`COMBINE_BLOCK`] are combined into one store first, as the Alpha's
    /// write buffer merged adjacent stores into larger packets (seed 000
    /// s.2.2): the receivers see the same bytes in the same order, and a
    /// stream of small writes costs one FIFO record per block instead of one
    /// per write.
    pub fn write_many(&self, writes: &[(usize, &[u8])]) -> Result<(), McError> {
        let base = self.global_addr();
        let mut combined = Vec::new();
        let mut runs: Vec<(u64, StoreData<'_>)> = Vec::with_capacity(writes.len());
        for &(off, d) in writes {
            check(off, d.len(), self.entry.size)?;
            if d.is_empty() {
                continue;
            }
            let addr = base + off as u64;
            if let Some((at, run)) = runs.last_mut() {
                let len = run.len() as u64;
                let block = |a: u64| a / COMBINE_BLOCK;
                if *at + len == addr && block(*at) == block(addr + d.len() as u64 - 1) {
                    if combined.capacity() == 0 {
                        // Once, for everything that may be combined: a run
                        // grown write by write reallocated (and copied)
                        // itself about log2(writes) times.
                        combined.reserve(writes.iter().map(|w| w.1.len()).sum());
                    }
                    run.extend(d, &mut combined);
                    continue;
                }
            }
            runs.push((addr, StoreData::One(d)));
        }
        let recs: Vec<(u64, &[u8])> = runs.iter().map(|(a, r)| (*a, r.bytes(&combined))).collect();
        self.host.node().store_batch(&recs)
    }

    pub fn write_u32(&self, offset: usize, v: u32) -> Result<(), McError> {
        self.write(offset, &v.to_le_bytes())
    }

    pub fn write_u64(&self, offset: usize, v: u64) -> Result<(), McError> {
        self.write(offset, &v.to_le_bytes())
    }
}

/// Writes within one block of this many bytes (inside one page whatever the
/// adapter's page size, 4 or 8 KiB) may be combined by
/// [`TxRegion::write_many`].
pub const COMBINE_BLOCK: u64 = 4096;

/// The data of one store of [`TxRegion::write_many`]: one write's bytes, or
/// several combined (a range of the call's buffer; only what is combined is
/// copied).
enum StoreData<'a> {
    One(&'a [u8]),
    Combined(std::ops::Range<usize>),
}

impl StoreData<'_> {
    fn len(&self) -> usize {
        match self {
            StoreData::One(d) => d.len(),
            StoreData::Combined(r) => r.len(),
        }
    }

    /// Append `d`: copies this run into `buf` first if it was one write.
    /// Runs are extended only while last, so a combined run ends `buf`.
    fn extend(&mut self, d: &[u8], buf: &mut Vec<u8>) {
        if let StoreData::One(first) = *self {
            let start = buf.len();
            buf.extend_from_slice(first);
            *self = StoreData::Combined(start..buf.len());
        }
        buf.extend_from_slice(d);
        if let StoreData::Combined(r) = self {
            r.end = buf.len();
        }
    }

    fn bytes<'b>(&'b self, buf: &'b [u8]) -> &'b [u8] {
        match self {
            StoreData::One(d) => d,
            StoreData::Combined(r) => &buf[r.clone()],
        }
    }
}

impl Drop for TxRegion {
    fn drop(&mut self) {
        if let Err(e) = self.host.detach(&self.entry, true) {
            warn!(
                "detaching region {} (transmit): {}",
                self.entry.id,
                crate::ErrorChain(&e)
            );
        }
    }
}

/// A region attached for receive: remote writes land here by DMA. Detached when
/// dropped.
pub struct RxRegion {
    host: Arc<dyn RegionHost>,
    entry: RegionEntry,
    mem: Arc<dyn ReceiveMemory>,
    offset: usize,
}

impl RxRegion {
    pub(crate) fn new(
        host: Arc<dyn RegionHost>,
        entry: RegionEntry,
        mem: Arc<dyn ReceiveMemory>,
        offset: usize,
    ) -> Self {
        RxRegion {
            host,
            entry,
            mem,
            offset,
        }
    }

    pub fn id(&self) -> u32 {
        self.entry.id
    }

    pub fn len(&self) -> usize {
        firmware_model::to_usize(self.entry.size)
    }

    pub fn is_empty(&self) -> bool {
        self.entry.size == 0
    }

    /// Address of the region's byte 0 in this process: receive memory the
    /// adapter DMAs into, for programs that read it with plain loads (the C
    /// library's `imc_asattach(.., IMC_RECEIVE, ..)`). Valid while this
    /// handle lives; reads must be volatile (the device writes behind the
    /// program's back).
    pub fn as_ptr(&self) -> *const u8 {
        (self.mem.host_addr() + self.offset) as *const u8
    }

    /// (first global page, page count).
    pub fn pages(&self) -> (u32, u32) {
        (self.entry.first_page, self.entry.pages)
    }

    /// Receive (`on`) or ignore the stores into `count` Memory Channel pages
    /// of this region from its page `first`: their page control table
    /// entries with or without the receive bit, the transmit half as
    /// attached. A region's receiver may take only some of its pages, as
    /// Cashmere's homes take only the pages they are home of (seed 000
    /// s.2.3.1.1: "The home node creates a receive mapping for the page").
    /// Stores into a page not received are not kept here; the memory keeps
    /// what it had.
    pub fn set_receiving(&self, first: u32, count: u32, on: bool) -> Result<(), McError> {
        if self.entry.coherent {
            // The coherent arena is received whole, by every node.
            return Err(McError::CoherentReceivedWhole(self.entry.id));
        }
        self.host.set_receiving(&self.entry, first, count, on)
    }

    /// Global address of the region's byte 0.
    pub fn global_addr(&self) -> u64 {
        self.host.node().layout.page_addr(self.entry.first_page)
    }

    /// The virtual arrival of the last stamped store that landed in the
    /// granule of byte `offset` (virtual time on, docs/virtual-time.md):
    /// read it after seeing the data. `None` without virtual time, outside
    /// the region, or before any stamped store landed there.
    pub fn arrival(&self, offset: usize) -> Option<u64> {
        self.arrival_range(offset, 1)
    }

    /// The latest such arrival over `[offset, offset + len)`.
    pub fn arrival_range(&self, offset: usize, len: usize) -> Option<u64> {
        check(offset, len, self.entry.size).ok()?;
        self.host
            .node()
            .arrival(self.global_addr() + offset as u64, len as u64)
    }

    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<(), McError> {
        check(offset, buf.len(), self.entry.size)?;
        self.mem.read(self.offset + offset, buf);
        Ok(())
    }

    pub fn to_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>, McError> {
        let mut v = vec![0u8; len];
        self.read(offset, &mut v)?;
        Ok(v)
    }

    /// Atomic load of an aligned 32-bit word.
    pub fn load_u32(&self, offset: usize) -> Result<u32, McError> {
        check(offset, 4, self.entry.size)?;
        if offset % 4 != 0 {
            return Err(McError::OutOfBounds {
                offset,
                len: 4,
                size: self.len(),
            });
        }
        Ok(self.mem.load_u32(self.offset + offset))
    }

    /// Atomic load of an aligned 64-bit word.
    pub fn load_u64(&self, offset: usize) -> Result<u64, McError> {
        check(offset, 8, self.entry.size)?;
        if offset % 8 != 0 {
            return Err(McError::OutOfBounds {
                offset,
                len: 8,
                size: self.len(),
            });
        }
        Ok(self.mem.load_u64(self.offset + offset))
    }
}

impl Drop for RxRegion {
    fn drop(&mut self) {
        if let Err(e) = self.host.detach(&self.entry, false) {
            warn!(
                "detaching region {} (receive): {}",
                self.entry.id,
                crate::ErrorChain(&e)
            );
        }
    }
}
