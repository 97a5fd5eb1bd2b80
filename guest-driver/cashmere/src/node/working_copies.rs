//! A node's working copies (seed 002 s.3.1): the heap, each page's
//! protection in the application view as the fault handler reads it, and
//! the pages' twins. Protection changes go through here, so the recorded
//! protection and the mapping's never disagree for long.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use crate::twin::TwinSpace;
use crate::vm::{HeapMemory, Prot};
use crate::CsmError;

pub(super) struct WorkingCopies {
    heap: Arc<HeapMemory>,
    /// Current protection of each page of the application view (a `Prot`).
    prot: Box<[AtomicU8]>,
    twins: TwinSpace,
    page_size: usize,
}

impl WorkingCopies {
    pub(super) fn new(
        heap: Arc<HeapMemory>,
        twins: TwinSpace,
        pages: u32,
        page_size: usize,
    ) -> WorkingCopies {
        WorkingCopies {
            heap,
            prot: (0..pages).map(|_| AtomicU8::new(0)).collect(),
            twins,
            page_size,
        }
    }

    pub(super) fn heap(&self) -> &Arc<HeapMemory> {
        &self.heap
    }

    pub(super) fn twins(&self) -> &TwinSpace {
        &self.twins
    }

    /// Page `p`'s protection as last set (a `Prot` as `u8`).
    pub(super) fn protection(&self, p: u32) -> u8 {
        self.prot[p as usize].load(Ordering::Acquire)
    }

    pub(super) fn set_prot(&self, p: u32, prot: Prot) -> Result<(), CsmError> {
        let ps = self.page_size;
        self.heap.protect(p as usize * ps, ps, prot)?;
        self.prot[p as usize].store(prot as u8, Ordering::Release);
        Ok(())
    }

    /// Map the master copy at `src` as page `p`'s working copy (at its
    /// home); the application view of it is left inaccessible.
    pub(super) fn alias_master(&self, p: u32, src: *const u8) -> std::io::Result<()> {
        let ps = self.page_size;
        self.heap.alias(p as usize * ps, ps, src)?;
        self.prot[p as usize].store(Prot::None as u8, Ordering::Release);
        Ok(())
    }
}
