//! Allocation in the shared heap: a bump pointer every thread of a node
//! shares. The same allocations in the same order on every node give the
//! same offsets, which is how nodes agree where shared data is.

use std::sync::Mutex;

use crate::shared::SharedArray;
use crate::vm::HeapMemory;

/// The heap has no room for an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the shared heap ({heap} bytes) has no room for {wanted} more bytes at offset {at}")]
pub struct AllocError {
    pub heap: usize,
    pub wanted: usize,
    pub at: usize,
}

/// A node's allocator in its heap (the next free offset).
#[derive(Debug, Default)]
pub struct Allocator {
    next: Mutex<usize>,
}

impl Allocator {
    /// `len` elements of `T` in `heap`, at a page boundary (`page_size`) if
    /// `page_aligned`, else at `T`'s alignment (at least 8).
    pub fn alloc<T: Copy>(
        &self,
        heap: &HeapMemory,
        page_size: usize,
        len: usize,
        page_aligned: bool,
    ) -> Result<SharedArray<T>, AllocError> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let align = if page_aligned {
            page_size
        } else {
            std::mem::align_of::<T>().max(8)
        };
        let off = next.div_ceil(align) * align;
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        if off.saturating_add(bytes) > heap.len() {
            return Err(AllocError {
                heap: heap.len(),
                wanted: bytes,
                at: off,
            });
        }
        *next = off + bytes;
        // SAFETY: `off + bytes` is within the heap's application view
        // (checked above), and `off` is a multiple of `T`'s alignment (or
        // of the page size, which is one).
        let ptr = unsafe { heap.app_base().add(off) }.cast::<T>();
        // SAFETY: `ptr` points at `len` aligned `T`s inside the application
        // view, which outlives the arrays (the heap is unmapped when the
        // node's last handle goes).
        Ok(unsafe { SharedArray::new(ptr, len, off) })
    }

    /// Bytes allocated so far (the high-water offset).
    pub fn used(&self) -> usize {
        *self.next.lock().unwrap_or_else(|p| p.into_inner())
    }
}
