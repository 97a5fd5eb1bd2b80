//! CSM-ADB's broadcast buffers (seed 000 s.2.3.3): "a new set of buffers,
//! each of which is mapped for transmit by any node and for receive by all
//! nodes". A home that sees several consumers of a page places a copy in
//! the page's buffer slot with one broadcast; a node about to update its
//! copy looks there before asking the home. A copy is killed (its header
//! made invalid) when the page is modified.
//!
//! One ordinary region of slots (page `p` in slot `p % slots`), received by
//! every node. Unlike the paper's, the sender receives its own broadcasts
//! too (loopback): a node that placed or killed a copy as a page's home may
//! later read the slot as a consumer (homes migrate), and its receive copy
//! must not keep an older copy it killed itself.
//!
//! A slot is the page's data, then a 16-byte header (page, version,
//! checksum) written last: a reader that sees the header has the data
//! before it (per-source FIFO, packet by packet), reads the data, and
//! takes it only if the header is unchanged and the checksum agrees, so a
//! copy overwritten while it was read is refused.

use std::sync::{Arc, Mutex};

use mc_api::{MemoryChannel, RxRegion, TxRegion};

use crate::messages::checksum;
use crate::site::Site;
use crate::space::{CsmSpace, KEY_ADB};
use crate::CsmError;

/// A header's page word when the slot holds no valid copy.
const EMPTY: u32 = u32::MAX;

pub struct BroadcastBuffers {
    tx: Arc<TxRegion>,
    rx: Arc<RxRegion>,
    slots: u32,
    page_size: usize,
    stride: usize,
    /// The last version this node placed (versions tell placements apart in
    /// the checksum).
    version: Mutex<u32>,
}

impl BroadcastBuffers {
    /// Allocate (or find) the buffers and attach them for receive and for
    /// broadcast transmit with loopback. Before the start barrier: a
    /// placement into a region a node does not receive yet is lost to it.
    pub fn new(
        mc: &MemoryChannel,
        space: CsmSpace,
        site: &Site,
    ) -> Result<BroadcastBuffers, CsmError> {
        let id = mc.region_alloc(KEY_ADB, space.adb_bytes(), false)?;
        Ok(BroadcastBuffers {
            rx: site.receive(mc, id, false)?,
            tx: site.transmit_all(mc, id)?,
            slots: space.adb_slots(),
            page_size: space.page_size as usize,
            stride: space.adb_stride(),
            version: Mutex::new(0),
        })
    }

    fn slot(&self, page: u32) -> usize {
        (page % self.slots) as usize * self.stride
    }

    fn header_at(&self, page: u32) -> usize {
        self.slot(page) + self.page_size
    }

    fn header(&self, page: u32) -> Result<(u32, u32, u64), CsmError> {
        let mut h = [0u8; 16];
        self.rx.read(self.header_at(page), &mut h)?;
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        Ok((
            u32_at(0),
            u32_at(4),
            u64::from(u32_at(8)) | u64::from(u32_at(12)) << 32,
        ))
    }

    /// Broadcast `data` as page `page`'s copy.
    pub fn place(&self, page: u32, data: &[u8]) -> Result<(), CsmError> {
        let mut v = self.version.lock().unwrap_or_else(|p| p.into_inner());
        *v = v.wrapping_add(1);
        let mut h = [0u8; 16];
        h[..4].copy_from_slice(&page.to_le_bytes());
        h[4..8].copy_from_slice(&v.to_le_bytes());
        h[8..].copy_from_slice(&checksum(*v, page, data).to_le_bytes());
        self.tx.post(self.slot(page), data)?;
        self.tx.post(self.header_at(page), &h)?;
        Ok(())
    }

    /// Kill whatever copy page `page`'s slot holds.
    pub fn invalidate(&self, page: u32) -> Result<(), CsmError> {
        let mut h = [0u8; 16];
        h[..4].copy_from_slice(&EMPTY.to_le_bytes());
        self.tx.post(self.header_at(page), &h)?;
        Ok(())
    }

    /// Whether this node's copy of the slot holds a copy of `page`.
    pub fn holds(&self, page: u32) -> Result<bool, CsmError> {
        Ok(self.header(page)?.0 == page)
    }

    /// Copy out a valid copy of `page` if the slot holds one, whole.
    pub fn read(&self, page: u32, out: &mut [u8]) -> Result<bool, CsmError> {
        let first = self.header(page)?;
        if first.0 != page {
            return Ok(false);
        }
        self.rx.read(self.slot(page), out)?;
        let again = self.header(page)?;
        Ok(again == first && checksum(first.1, page, out) == first.2)
    }
}
