//! Shared data as programs see it: typed arrays in the Cashmere heap whose
//! accesses fault into the protocol when the page is not accessible.

use std::marker::PhantomData;

/// A shared array of `T` in the Cashmere heap. Accesses are volatile so the
/// compiler neither caches nor invents them; they fault into the protocol
/// when the page is not accessible. An array is valid while the node's
/// [`Csm`](crate::Csm) handles live (the heap is unmapped after the last is
/// dropped).
pub struct SharedArray<T> {
    ptr: *mut T,
    len: usize,
    offset: usize,
    _t: PhantomData<T>,
}

impl<T> Clone for SharedArray<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SharedArray<T> {}
// SAFETY: the array is a view of heap memory that outlives the program's
// uses of it (see the type's doc), not tied to a thread; values of `T` it
// hands out cross threads, hence `T: Send`.
unsafe impl<T: Send> Send for SharedArray<T> {}
// SAFETY: threads sharing the array read and write copies of `T` through
// volatile accesses, which is `Send` for the values; ordering between those
// accesses is the program's locks, barriers and flags (release
// consistency), as on the real shared memory.
unsafe impl<T: Send> Sync for SharedArray<T> {}

impl<T> SharedArray<T> {
    /// # Safety
    ///
    /// `ptr` points at `len` elements of `T`, properly aligned, inside the
    /// application view of a heap that outlives the array and every copy.
    pub(crate) unsafe fn new(ptr: *mut T, len: usize, offset: usize) -> Self {
        SharedArray {
            ptr,
            len,
            offset,
            _t: PhantomData,
        }
    }
}

impl<T: Copy> SharedArray<T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Byte offset of element 0 in the heap.
    pub fn offset(&self) -> usize {
        self.offset
    }
    pub fn get(&self, i: usize) -> T {
        assert!(i < self.len, "index {i} out of {}", self.len);
        // SAFETY: in bounds of a live mapping; faults are resolved by the
        // protocol before the access is retried.
        unsafe { std::ptr::read_volatile(self.ptr.add(i)) }
    }
    pub fn set(&self, i: usize, v: T) {
        assert!(i < self.len, "index {i} out of {}", self.len);
        // SAFETY: as for get.
        unsafe { std::ptr::write_volatile(self.ptr.add(i), v) }
    }
}
