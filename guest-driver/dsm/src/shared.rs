//! Shared data as programs see it: typed arrays in the DSM heap whose
//! accesses fault into the protocol when the page is not accessible.

use std::marker::PhantomData;

/// A shared array of `T` in the DSM heap. Accesses are volatile so the
/// compiler neither caches nor invents them; they fault into the protocol
/// when the page is not accessible. An array is valid while the node's
/// [`Dsm`](crate::Dsm) handles live (the heap is unmapped after the last is
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
    pub unsafe fn new(ptr: *mut T, len: usize, offset: usize) -> Self {
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

    /// Elements `range` as a slice, for a loop the compiler may optimise as
    /// it does over local memory (`get` and `set` are volatile and checked
    /// one by one, which keeps a kernel from being vectorised: SOR's ran
    /// 1.5 times as long as over a `Vec`). Faults work as for `get`: a
    /// page the protocol has not made readable is filled when first
    /// touched, which the program cannot tell from its having been there.
    ///
    /// # Safety
    ///
    /// While the slice lives, no thread or node writes `range` (what
    /// release consistency promises a data-race-free program between its
    /// synchronisations for data it only reads), and the caller makes no
    /// synchronisation call (a barrier, a lock, a flag) that may change
    /// what the range holds. [`Dsm::poll`](crate::Dsm::poll) is none: it
    /// answers other nodes' requests (a page sent, a home moved) and
    /// leaves the values the node's copy holds as they were, so a slice
    /// may live across the polls at a kernel's loop back edges.
    pub unsafe fn as_slice(&self, range: std::ops::Range<usize>) -> &[T] {
        assert!(range.start <= range.end && range.end <= self.len);
        // SAFETY: in bounds of a live mapping (asserted); the caller
        // promises nobody writes the range meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr.add(range.start), range.len()) }
    }

    /// Elements `range` as a mutable slice (see [`SharedArray::as_slice`]).
    ///
    /// # Safety
    ///
    /// While the slice lives, no other thread or node reads or writes
    /// `range` (the calling thread owns it between two synchronisations),
    /// and the caller makes no synchronisation call. Each such slice of one
    /// array must not overlap another live slice.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self, range: std::ops::Range<usize>) -> &mut [T] {
        assert!(range.start <= range.end && range.end <= self.len);
        // SAFETY: in bounds of a live mapping (asserted); the caller
        // promises this thread alone touches the range meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.len()) }
    }

    /// Elements `start..start + N` as an array reference (see
    /// [`SharedArray::as_slice`]): one bounds check, and a length the
    /// compiler knows, for a record read field by field in a kernel's
    /// inner loop.
    ///
    /// # Safety
    ///
    /// As for [`SharedArray::as_slice`] over the same elements.
    pub unsafe fn as_array<const N: usize>(&self, start: usize) -> &[T; N] {
        assert!(start <= self.len && N <= self.len - start);
        // SAFETY: in bounds of a live mapping (asserted), `T`-aligned, and
        // `[T; N]` has `T`'s alignment; the caller promises nobody writes
        // the elements meanwhile.
        unsafe { &*self.ptr.add(start).cast::<[T; N]>() }
    }

    /// Elements `start..start + N` as a mutable array reference (see
    /// [`SharedArray::as_mut_slice`]).
    ///
    /// # Safety
    ///
    /// As for [`SharedArray::as_mut_slice`] over the same elements.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_array<const N: usize>(&self, start: usize) -> &mut [T; N] {
        assert!(start <= self.len && N <= self.len - start);
        // SAFETY: as for `as_array`; the caller promises this thread alone
        // touches the elements meanwhile.
        unsafe { &mut *self.ptr.add(start).cast::<[T; N]>() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn over(v: &mut [f64]) -> SharedArray<f64> {
        // SAFETY: `v` outlives the array in each test, and nothing else
        // touches it meanwhile.
        unsafe { SharedArray::new(v.as_mut_ptr(), v.len(), 0) }
    }

    #[test]
    fn an_array_reference_sees_and_changes_its_elements() {
        let mut v: Vec<f64> = (0..8).map(f64::from).collect();
        let a = over(&mut v);
        // SAFETY: this thread alone touches `v` here.
        unsafe {
            assert_eq!(*a.as_array::<3>(5), [5.0, 6.0, 7.0]);
            a.as_mut_array::<2>(1)[1] = 20.0;
        }
        assert_eq!(a.get(2), 20.0);
    }

    #[test]
    #[should_panic]
    fn an_array_reference_past_the_end_panics() {
        let mut v = vec![0.0; 8];
        let a = over(&mut v);
        // SAFETY: as above; the call panics before any access.
        let _ = unsafe { a.as_array::<3>(6) };
    }
}
