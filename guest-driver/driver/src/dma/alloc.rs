//! [`DmaAllocator`]: carves DMA memory into rings, buffers, frames and the
//! status page. A bump allocator: aligned in guest-physical space (what the
//! device sees), zeroed, never freed: the driver allocates once at bring-up
//! and when a program maps receive memory.

use super::error::DmaError;
use super::region::DmaRegion;

/// Bump allocator over a region: aligned (in guest-physical space), zeroed,
/// never freed.
#[derive(Debug)]
pub struct DmaAllocator {
    region: DmaRegion,
    next: usize,
    /// Everything from `next` on reads zero: nothing to zero at `alloc`.
    zeroed: bool,
}

impl DmaAllocator {
    pub fn new(region: DmaRegion) -> DmaAllocator {
        DmaAllocator {
            region,
            next: 0,
            zeroed: false,
        }
    }

    /// Over a region that reads zero until written (fresh memory only the
    /// driver hands out): what it hands out is zero without being written,
    /// since a bump allocator never hands out the same bytes twice, so pages
    /// no one uses are never touched.
    pub fn new_zeroed(region: DmaRegion) -> DmaAllocator {
        DmaAllocator {
            region,
            next: 0,
            zeroed: true,
        }
    }

    /// `size` zeroed bytes whose GPA is a multiple of `align` (a power of two).
    pub fn alloc(&mut self, size: usize, align: usize) -> Result<DmaRegion, DmaError> {
        if !align.is_power_of_two() {
            return Err(DmaError::BadAlignment(align));
        }
        let oom = || DmaError::OutOfMemory {
            requested: size,
            align,
            available: self.remaining(),
        };
        let gpa = self.region.gpa() + self.next as u64;
        // Less than `align`, a usize.
        let pad = usize::try_from(gpa.wrapping_neg() & (align as u64 - 1))
            .expect("the padding is below the alignment, a usize");
        let start = self.next.checked_add(pad).ok_or_else(oom)?;
        let end = start.checked_add(size).ok_or_else(oom)?;
        if end > self.region.len() {
            return Err(oom());
        }
        let r = self.region.sub(start, size)?;
        if !self.zeroed {
            r.fill(0, size, 0)?;
        }
        self.next = end;
        Ok(r)
    }

    /// Bytes not yet handed out.
    pub fn remaining(&self) -> usize {
        self.region.len() - self.next
    }

    /// The whole region this allocator carves.
    pub fn region(&self) -> &DmaRegion {
        &self.region
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::MemfdMemory;
    use std::sync::Arc;

    #[test]
    fn allocator_aligns_in_gpa_and_runs_out_cleanly() {
        let r = DmaRegion::new(Arc::new(
            MemfdMemory::new(64 * 1024, 0x1_0000_0000).expect("memfd"),
        ));
        let mut a = DmaAllocator::new(r.clone());
        let x = a.alloc(3, 1).unwrap();
        assert_eq!(x.gpa(), 0x1_0000_0000);
        let y = a.alloc(16, 16).unwrap();
        assert_eq!(y.gpa() % 16, 0);
        assert!(y.gpa() >= x.gpa() + 3);
        let p = a.alloc(4096, 4096).unwrap();
        assert_eq!(p.gpa() % 4096, 0);
        assert_eq!(p.host_addr() % 4096, 0);
        assert!(matches!(a.alloc(8, 3), Err(DmaError::BadAlignment(3))));
        assert!(matches!(
            a.alloc(1 << 20, 8),
            Err(DmaError::OutOfMemory { .. })
        ));
        assert!(a.alloc(usize::MAX, 8).is_err());
        // Allocations are zeroed even if the memory was dirty.
        r.fill(0, r.len(), 0xee).unwrap();
        let z = a.alloc(100, 8).unwrap();
        assert_eq!(z.read_vec(0, 100).unwrap(), vec![0; 100]);
        let rest = a.remaining();
        assert!(a.alloc(rest, 1).is_ok());
        assert_eq!(a.remaining(), 0);
    }

    /// Resident pages of `r` (mincore: pages a write or a fill touched).
    fn resident_pages(r: &DmaRegion) -> usize {
        let page = 4096;
        let mut v = vec![0u8; r.len().div_ceil(page)];
        // SAFETY: the range is `r`'s own mapping, page aligned (a memfd
        // mapping), and `v` has a byte per page of it.
        let rc = unsafe {
            libc::mincore(
                usize::try_from(r.host_addr()).unwrap() as *mut libc::c_void,
                r.len(),
                v.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        v.iter().filter(|&&b| b & 1 != 0).count()
    }

    #[test]
    fn over_fresh_memory_the_allocator_touches_nothing_it_hands_out() {
        let fresh = || DmaRegion::new(Arc::new(MemfdMemory::new(1 << 20, 0).expect("memfd")));
        let r = fresh();
        let mut a = DmaAllocator::new_zeroed(r.clone());
        let x = a.alloc(512 << 10, 4096).unwrap();
        assert_eq!(resident_pages(&r), 0);
        assert_eq!(x.read_vec(0, 64).unwrap(), vec![0; 64]);
        // The ordinary allocator writes every byte it hands out.
        let r = fresh();
        let mut a = DmaAllocator::new(r.clone());
        a.alloc(512 << 10, 4096).unwrap();
        assert_eq!(resident_pages(&r), 128);
    }
}
