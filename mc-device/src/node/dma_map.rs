//! The adapter's DMA map: the receive frames bound to each global page.

use std::collections::BTreeSet;

use firmware_model::abi::FRAME_SIZE;

use crate::memory::{Mem, Piece};

/// Receive frames bound per global page.
#[derive(Debug, Default)]
pub(crate) struct DmaMap {
    pages: Vec<Option<Box<[Piece]>>>,
    /// The pages bound, so a check of all of them does not walk the table.
    bound: BTreeSet<u32>,
}

impl DmaMap {
    pub(crate) fn new(pages: u32) -> Self {
        let mut v = Vec::new();
        v.resize_with(pages as usize, || None);
        DmaMap {
            pages: v,
            bound: BTreeSet::new(),
        }
    }

    pub(crate) fn get(&self, page: u32) -> Option<&[Piece]> {
        self.pages.get(page as usize).and_then(|p| p.as_deref())
    }

    pub(crate) fn bind(&mut self, page: u32, frames: &[u64]) {
        if let Some(slot) = self.pages.get_mut(page as usize) {
            *slot = Some(frames.iter().map(|f| (*f, FRAME_SIZE)).collect());
            self.bound.insert(page);
        }
    }

    pub(crate) fn unbind(&mut self, page: u32) {
        if let Some(slot) = self.pages.get_mut(page as usize) {
            *slot = None;
            self.bound.remove(&page);
        }
    }

    pub(crate) fn clear(&mut self) {
        for page in std::mem::take(&mut self.bound) {
            if let Some(slot) = self.pages.get_mut(page as usize) {
                *slot = None;
            }
        }
    }

    /// Pages with a frame that `mem` does not wholly hold (a new memory table
    /// left it out): they can no longer receive.
    pub(crate) fn uncovered(&self, mem: &Mem) -> Vec<u32> {
        self.bound
            .iter()
            .copied()
            .filter(|&page| {
                self.get(page).is_some_and(|frames| {
                    frames
                        .iter()
                        .any(|(gpa, len)| !crate::memory::range_ok(mem, *gpa, *len as usize))
                })
            })
            .collect()
    }
}
