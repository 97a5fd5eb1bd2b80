//! The adapter's DMA map: the receive frames bound to each global page.

use firmware_model::abi::FRAME_SIZE;

use crate::memory::{Mem, Piece};

/// Receive frames bound per global page.
#[derive(Debug, Default)]
pub(crate) struct DmaMap {
    pages: Vec<Option<Box<[Piece]>>>,
}

impl DmaMap {
    pub(crate) fn new(pages: u32) -> Self {
        let mut v = Vec::new();
        v.resize_with(pages as usize, || None);
        DmaMap { pages: v }
    }

    pub(crate) fn get(&self, page: u32) -> Option<&[Piece]> {
        self.pages.get(page as usize).and_then(|p| p.as_deref())
    }

    pub(crate) fn bind(&mut self, page: u32, frames: &[u64]) {
        if let Some(slot) = self.pages.get_mut(page as usize) {
            *slot = Some(frames.iter().map(|f| (*f, FRAME_SIZE)).collect());
        }
    }

    pub(crate) fn unbind(&mut self, page: u32) {
        if let Some(slot) = self.pages.get_mut(page as usize) {
            *slot = None;
        }
    }

    pub(crate) fn clear(&mut self) {
        self.pages.iter_mut().for_each(|p| *p = None);
    }

    /// Pages with a frame that `mem` does not wholly hold (a new memory table
    /// left it out): they can no longer receive.
    pub(crate) fn uncovered(&self, mem: &Mem) -> Vec<u32> {
        self.pages
            .iter()
            .zip(0u32..)
            .filter_map(|(p, page)| {
                let frames = p.as_deref()?;
                let lost = frames
                    .iter()
                    .any(|(gpa, len)| !crate::memory::range_ok(mem, *gpa, *len as usize));
                lost.then_some(page)
            })
            .collect()
    }
}
