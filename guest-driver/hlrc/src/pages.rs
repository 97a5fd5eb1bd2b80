//! The engine's pages on the DSM core: protection of the application view
//! (`vm::HeapMemory`), twins (`twin::TwinSpace`) and the core's byte-exact
//! diffs (`twin::Diff`), which seed 001 s.4.3 computes over "modified
//! words": a word two nodes write a byte each of keeps both bytes here.
//!
//! A diff travels as runs of changed bytes: `[offset u32][length u32][bytes]`
//! per run, little-endian. The home stores them a word at a time with the
//! core's masked stores, so its own application thread, writing other bytes
//! of the same words meanwhile, loses nothing.

use std::ops::Range;
use std::sync::Arc;

use dsm_core::twin::{Diff, TwinSpace};
use dsm_core::vm::{HeapMemory, Prot};

use crate::engine::{Access, PageMemory};
use crate::Page;

/// A diff that does not fit its page.
#[derive(Debug, thiserror::Error)]
#[error(
    "a diff's run {at}..{end} does not fit a page of {page_size} bytes, or its encoding ends early"
)]
pub struct BadDiff {
    at: usize,
    end: usize,
    page_size: usize,
}

/// One node's pages, as the engine acts on them.
pub struct NodePages {
    heap: Arc<HeapMemory>,
    twins: TwinSpace,
    page_size: usize,
    diff: Diff,
    words: Vec<u32>,
    runs: Vec<Range<usize>>,
    /// Twins taken (statistics).
    pub(crate) twins_taken: u64,
    /// Bytes of diffs made (statistics).
    pub(crate) diff_bytes: u64,
}

impl NodePages {
    pub fn new(heap: Arc<HeapMemory>, page_size: usize) -> std::io::Result<NodePages> {
        let pages = heap.len() / page_size;
        Ok(NodePages {
            twins: TwinSpace::new(pages, page_size / 4)?,
            heap,
            page_size,
            diff: Diff::new(page_size / 4),
            words: vec![0; page_size / 4],
            runs: Vec::new(),
            twins_taken: 0,
            diff_bytes: 0,
        })
    }

    fn u32_of(n: usize) -> u32 {
        u32::try_from(n).expect("a page offset fits u32")
    }
}

impl PageMemory for NodePages {
    type Diff = Vec<u8>;

    fn protect(&mut self, page: Page, access: Access) {
        let prot = match access {
            Access::None => Prot::None,
            Access::Read => Prot::Read,
            Access::Write => Prot::ReadWrite,
        };
        if let Err(e) = self
            .heap
            .protect(page * self.page_size, self.page_size, prot)
        {
            // mprotect on our own mapping fails only if the kernel is out
            // of memory for the split: nothing the protocol can go on from.
            panic!("hlrc: mprotect of page {page} failed: {e}");
        }
    }

    fn twin(&mut self, page: Page) {
        // SAFETY: the engine is behind the node's mutex, held by the caller,
        // which serialises every use of the page's twin.
        let twin = unsafe { self.twins.twin(page) };
        self.heap.read_words(page * self.page_size, twin);
        self.twins_taken += 1;
    }

    fn diff(&mut self, page: Page) -> Option<Vec<u8>> {
        self.heap.read_words(page * self.page_size, &mut self.words);
        // SAFETY: as in `twin`.
        let twin = unsafe { self.twins.twin(page) };
        let changed = self.diff.compute(&self.words, twin);
        if self.diff.is_empty() {
            return None;
        }
        self.diff_bytes += u64::try_from(changed).unwrap_or(u64::MAX);
        self.runs.clear();
        self.diff.byte_runs(&mut self.runs);
        let mut out = Vec::new();
        for r in &self.runs {
            out.extend_from_slice(&Self::u32_of(r.start).to_le_bytes());
            out.extend_from_slice(&Self::u32_of(r.len()).to_le_bytes());
            for i in r.clone() {
                let w = self.words[i / 4].to_ne_bytes();
                out.push(w[i % 4]);
            }
        }
        Some(out)
    }

    fn apply(
        &mut self,
        page: Page,
        diff: &Vec<u8>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let base = page * self.page_size;
        let mut at = 0usize;
        while at < diff.len() {
            let head = diff.get(at..at + 8).ok_or(BadDiff {
                at,
                end: diff.len(),
                page_size: self.page_size,
            })?;
            let off = usize::try_from(u32::from_le_bytes([head[0], head[1], head[2], head[3]]))?;
            let len = usize::try_from(u32::from_le_bytes([head[4], head[5], head[6], head[7]]))?;
            let end = off.checked_add(len).filter(|&e| e <= self.page_size);
            let bytes = diff.get(at + 8..at + 8 + len);
            let (Some(end), Some(bytes)) = (end, bytes) else {
                return Err(Box::new(BadDiff {
                    at: off,
                    end: off.saturating_add(len),
                    page_size: self.page_size,
                }));
            };
            // Word by word, only the bytes the run names.
            let mut i = off;
            while i < end {
                let word = i & !3;
                let mut w = [0u8; 4];
                let mut mask = 0u8;
                for (k, slot) in w.iter_mut().enumerate() {
                    let b = word + k;
                    if b >= i && b < end {
                        *slot = bytes[b - off];
                        mask |= 1 << k;
                    }
                }
                self.heap
                    .write_masked(base + word, u32::from_ne_bytes(w), mask);
                i = word + 4;
            }
            at += 8 + len;
        }
        Ok(())
    }

    fn read_page(&self, page: Page) -> Vec<u8> {
        let mut v = vec![0; self.page_size];
        self.heap.read_bytes(page * self.page_size, &mut v);
        v
    }

    fn page_size(&self) -> usize {
        self.page_size
    }

    fn install(&mut self, page: Page, data: &[u8]) {
        self.heap.write_bytes(page * self.page_size, data);
    }
}
