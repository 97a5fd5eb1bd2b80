//! Receive memory: page-aligned runs of 4 KiB frames in DMA memory that the
//! adapter fills by DMA when stores to the global pages they are bound to
//! (through the PCT) arrive.

use std::time::Duration;

use firmware_model::abi::FRAME_SIZE;

use super::{wait, Adapter};
use crate::backoff::BackoffPolicy;
use crate::dma::DmaRegion;
use crate::error::{Error, Result};
use crate::transport::Transport;

/// Receive memory for a run of global pages: page-aligned, contiguous 4 KiB
/// frames in DMA memory, which the adapter fills by DMA. Cheap to clone; may
/// be read from any thread.
#[derive(Clone, Debug)]
pub struct ReceiveFrames {
    region: DmaRegion,
    page_size: u32,
}

impl ReceiveFrames {
    /// Number of global pages this region receives.
    pub fn pages(&self) -> u32 {
        // The region was sized from a u32 page count (`Adapter::receive`).
        u32::try_from(self.region.len() / self.page_size as usize)
            .expect("a receive region holds at most u32::MAX pages")
    }

    /// Guest-physical addresses of every frame, page by page: what SET_PCT
    /// wants for these pages.
    pub fn frames(&self) -> Vec<u64> {
        let base = self.region.gpa();
        (0..(self.region.len() / FRAME_SIZE as usize) as u64)
            .map(|i| base + i * u64::from(FRAME_SIZE))
            .collect()
    }

    /// The memory itself.
    pub fn region(&self) -> &DmaRegion {
        &self.region
    }

    /// Copy bytes at `offset` from the start of the first page.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        Ok(self.region.read(offset, buf)?)
    }

    pub fn read_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        Ok(self.region.read_vec(offset, len)?)
    }

    /// One aligned 64-bit load (a flag or counter the sender writes whole).
    pub fn load_u64(&self, offset: usize) -> Result<u64> {
        Ok(u64::from_le(
            self.region
                .atomic_u64(offset)?
                .load(std::sync::atomic::Ordering::Acquire),
        ))
    }

    /// Poll until the bytes at `offset` equal `expected`, for at most `timeout`.
    pub fn wait_for(&self, offset: usize, expected: &[u8], timeout: Duration) -> Result<()> {
        let mut buf = vec![0u8; expected.len()];
        wait(BackoffPolicy::DEFAULT.spins, timeout, "receive", || {
            self.region.read(offset, &mut buf)?;
            Ok((buf == expected).then_some(()))
        })
    }

    /// Zero the whole region (the adapter never does: it only writes data).
    pub fn clear(&self) -> Result<()> {
        Ok(self.region.fill(0, self.region.len(), 0)?)
    }
}

impl<T: Transport> Adapter<T> {
    /// Allocate receive memory for `pages` global pages: contiguous,
    /// page-aligned frames. Bind it with [`Adapter::set_pct`] and
    /// [`ReceiveFrames::frames`], or use [`Adapter::map_receive`].
    pub fn alloc_receive(&mut self, pages: u32) -> Result<ReceiveFrames> {
        let page_size = self.regs.page_size;
        let bytes = usize::try_from(u64::from(pages) * u64::from(page_size))
            .map_err(|_| Error::ReceiveTooLarge { pages, page_size })?;
        if pages == 0 {
            return Err(Error::NoPages);
        }
        let region = self.alloc.alloc(bytes, page_size as usize)?;
        Ok(ReceiveFrames { region, page_size })
    }

    /// Allocate receive memory for `count` pages from `first_page` and program
    /// them with `entry` (which should enable receive).
    pub fn map_receive(
        &mut self,
        first_page: u32,
        count: u32,
        entry: u32,
    ) -> Result<ReceiveFrames> {
        let rx = self.alloc_receive(count)?;
        self.set_pct(first_page, count, entry, &rx.frames())?;
        Ok(rx)
    }
}
