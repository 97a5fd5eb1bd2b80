//! [`DmaRegion`]: a bounds-checked window on DMA memory, read and written
//! through vm-memory's volatile and atomic accessors.
//!
//! Integers are little-endian in memory (virtio 1.x, and the device ABI in
//! docs/device.md). Integer and atomic accesses must be naturally aligned:
//! an aligned access of the field's width is one load or store, which is what
//! the device on the other side relies on for ring indices and status words.

use std::fmt;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64};
use std::sync::Arc;

use vm_memory::{
    AtomicInteger, ByteValued, MmapRegion, VolatileMemory, VolatileRef, VolatileSlice,
};

use super::backing::{fill_slice, DmaBacking};
use super::error::DmaError;

/// A bounds-checked window on DMA memory. Cloning is cheap and shares the memory.
#[derive(Clone)]
pub struct DmaRegion {
    /// The backing's mapping, held directly (not through the backing) so that
    /// an access is one bounds check away from the memory, and kept mapped
    /// for as long as any region of it lives.
    mapping: Arc<MmapRegion>,
    /// Offset of the region's first byte in the mapping.
    offset: usize,
    len: usize,
    /// Guest-physical address of the region's first byte.
    gpa: u64,
}

impl fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DmaRegion(gpa {:#x}, {:#x} bytes)", self.gpa(), self.len)
    }
}

impl DmaRegion {
    /// The whole of `backing`.
    pub fn new(backing: Arc<dyn DmaBacking>) -> DmaRegion {
        DmaRegion {
            mapping: backing.mapping().clone(),
            offset: backing.start(),
            len: backing.len(),
            gpa: backing.gpa(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Guest-physical address of the region's first byte.
    pub fn gpa(&self) -> u64 {
        self.gpa
    }

    /// Host (driver virtual) address of the region's first byte.
    pub fn host_addr(&self) -> u64 {
        self.mapping.as_ptr() as u64 + self.offset as u64
    }

    /// Guest-physical address of `offset` (which may be the end of the region).
    pub fn gpa_at(&self, offset: usize) -> Result<u64, DmaError> {
        self.check(offset, 0)?;
        Ok(self.gpa() + offset as u64)
    }

    /// Offset of guest-physical `gpa` in this region, if `len` bytes there fit.
    pub fn offset_of_gpa(&self, gpa: u64, len: usize) -> Result<usize, DmaError> {
        let outside = || DmaError::GpaOutOfRange { gpa, len };
        let off = gpa.checked_sub(self.gpa()).ok_or_else(outside)?;
        let off = usize::try_from(off).map_err(|_| outside())?;
        self.check(off, len).map_err(|_| outside())?;
        Ok(off)
    }

    /// The `len` bytes at `offset`, as a region of their own.
    pub fn sub(&self, offset: usize, len: usize) -> Result<DmaRegion, DmaError> {
        self.check(offset, len)?;
        Ok(DmaRegion {
            mapping: self.mapping.clone(),
            offset: self.offset + offset,
            len,
            gpa: self.gpa + offset as u64,
        })
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), DmaError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(DmaError::OutOfBounds {
                offset,
                len,
                region_len: self.len,
            }),
        }
    }

    /// Check that `size` bytes at `offset` fit and are `size`-aligned in host
    /// memory; returns the offset in the mapping.
    fn check_aligned(&self, offset: usize, size: usize) -> Result<usize, DmaError> {
        self.check(offset, size)?;
        let at = self.offset + offset;
        if (self.mapping.as_ptr() as usize).wrapping_add(at) % size != 0 {
            return Err(DmaError::Misaligned {
                offset,
                align: size,
            });
        }
        Ok(at)
    }

    /// The `len` bytes at `offset` for volatile access (vm-memory's
    /// `Bytes`, `copy_to`, `copy_from`, ...), borrowed from this region.
    pub fn volatile_slice(&self, offset: usize, len: usize) -> Result<VolatileSlice<'_>, DmaError> {
        self.check(offset, len)?;
        self.mapping
            .get_slice(self.offset + offset, len)
            .map_err(DmaError::Volatile)
    }

    /// Copy `buf.len()` bytes from `offset` (a `VolatileSlice` copy).
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<(), DmaError> {
        self.volatile_slice(offset, buf.len())?.copy_to(buf);
        Ok(())
    }

    /// Copy `data` to `offset` (a `VolatileSlice` copy).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), DmaError> {
        self.volatile_slice(offset, data.len())?.copy_from(data);
        Ok(())
    }

    /// Set `len` bytes at `offset` to `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<(), DmaError> {
        fill_slice(&self.volatile_slice(offset, len)?, byte).map_err(DmaError::Volatile)
    }

    /// Read `len` bytes at `offset` into a new vector.
    pub fn read_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>, DmaError> {
        let mut v = vec![0u8; len];
        self.read(offset, &mut v)?;
        Ok(v)
    }

    /// A naturally aligned `T` at `offset`, for one volatile load or store.
    fn int_ref<T: ByteValued>(&self, offset: usize) -> Result<VolatileRef<'_, T>, DmaError> {
        let at = self.check_aligned(offset, size_of::<T>())?;
        self.mapping.get_ref::<T>(at).map_err(DmaError::Volatile)
    }

    /// A naturally aligned atomic at `offset`.
    fn atomic<A: AtomicInteger>(&self, offset: usize) -> Result<&A, DmaError> {
        let at = self.check_aligned(offset, size_of::<A>())?;
        self.mapping
            .get_atomic_ref::<A>(at)
            .map_err(DmaError::Volatile)
    }

    /// Little-endian u16 at `offset` (naturally aligned, volatile).
    pub fn read_u16(&self, offset: usize) -> Result<u16, DmaError> {
        Ok(u16::from_le(self.int_ref::<u16>(offset)?.load()))
    }

    /// Little-endian u32 at `offset` (naturally aligned, volatile).
    pub fn read_u32(&self, offset: usize) -> Result<u32, DmaError> {
        Ok(u32::from_le(self.int_ref::<u32>(offset)?.load()))
    }

    /// Little-endian u64 at `offset` (naturally aligned, volatile).
    pub fn read_u64(&self, offset: usize) -> Result<u64, DmaError> {
        Ok(u64::from_le(self.int_ref::<u64>(offset)?.load()))
    }

    pub fn write_u16(&self, offset: usize, v: u16) -> Result<(), DmaError> {
        self.int_ref::<u16>(offset)?.store(v.to_le());
        Ok(())
    }

    pub fn write_u32(&self, offset: usize, v: u32) -> Result<(), DmaError> {
        self.int_ref::<u32>(offset)?.store(v.to_le());
        Ok(())
    }

    pub fn write_u64(&self, offset: usize, v: u64) -> Result<(), DmaError> {
        self.int_ref::<u64>(offset)?.store(v.to_le());
        Ok(())
    }

    /// The u16 at `offset` as an atomic (ring indices). Values are little-endian
    /// in memory: convert with `u16::from_le`/`to_le`.
    pub fn atomic_u16(&self, offset: usize) -> Result<&AtomicU16, DmaError> {
        self.atomic(offset)
    }

    /// The u32 at `offset` as an atomic.
    pub fn atomic_u32(&self, offset: usize) -> Result<&AtomicU32, DmaError> {
        self.atomic(offset)
    }

    /// The u64 at `offset` as an atomic (status-page words: one 64-bit load).
    pub fn atomic_u64(&self, offset: usize) -> Result<&AtomicU64, DmaError> {
        self.atomic(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::MemfdMemory;
    use std::sync::atomic::Ordering;

    fn region(len: usize, gpa: u64) -> DmaRegion {
        DmaRegion::new(Arc::new(MemfdMemory::new(len, gpa).expect("memfd")))
    }

    #[test]
    fn bounds_are_checked() {
        let r = region(4096, 0x10_0000);
        assert!(r.write(4090, &[1; 6]).is_ok());
        assert!(matches!(
            r.write(4090, &[1; 7]),
            Err(DmaError::OutOfBounds { .. })
        ));
        assert!(r.read(usize::MAX, &mut [0; 2]).is_err());
        assert!(r.read_u64(4096).is_err());
        assert!(r.read_u64(4088).is_ok());
        assert!(matches!(r.read_u32(2), Err(DmaError::Misaligned { .. })));
        assert!(matches!(
            r.write_u16(1, 0),
            Err(DmaError::Misaligned { .. })
        ));
        assert!(r.atomic_u64(4).is_err());
        assert!(r.atomic_u16(4095).is_err());
        assert!(r.fill(4000, 97, 0).is_err());
        assert!(r.volatile_slice(4095, 2).is_err());
        let s = r.sub(1024, 1024).unwrap();
        assert_eq!(s.gpa(), 0x10_0400);
        assert!(s.write(1000, &[0; 100]).is_err());
        assert!(r.sub(4000, 200).is_err());
        assert!(r.sub(usize::MAX, 2).is_err());
        assert_eq!(s.gpa_at(1024).unwrap(), 0x10_0800);
        assert!(s.gpa_at(1025).is_err());
        // A sub-region cannot reach past its own end even where the backing
        // has memory.
        assert!(matches!(
            s.read_u64(1024),
            Err(DmaError::OutOfBounds { .. })
        ));
        assert!(s.atomic_u32(1022).is_err());
    }

    #[test]
    fn reads_see_writes_at_any_alignment() {
        let r = region(8192, 0);
        let data: Vec<u8> = (0..200u8).collect();
        for off in 0..17 {
            r.write(off, &data).unwrap();
            assert_eq!(r.read_vec(off, 200).unwrap(), data);
        }
        r.write_u64(16, 0x0102_0304_0506_0708).unwrap();
        assert_eq!(r.read_vec(16, 8).unwrap(), [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(
            u64::from_le(r.atomic_u64(16).unwrap().load(Ordering::Acquire)),
            0x0102_0304_0506_0708
        );
        r.atomic_u16(2)
            .unwrap()
            .store(0xabcdu16.to_le(), Ordering::Release);
        assert_eq!(r.read_u16(2).unwrap(), 0xabcd);
        r.write_u32(4, 7).unwrap();
        assert_eq!(r.read_u32(4).unwrap(), 7);
        // fill crosses its internal chunks and stops where told.
        r.fill(0, 8192, 0x11).unwrap();
        r.fill(3, 5000, 0x5a).unwrap();
        let all = r.read_vec(0, 8192).unwrap();
        assert!(all[..3].iter().all(|&b| b == 0x11));
        assert!(all[3..5003].iter().all(|&b| b == 0x5a));
        assert!(all[5003..].iter().all(|&b| b == 0x11));
    }

    #[test]
    fn gpa_lookup() {
        let r = region(8192, 0x4000_0000);
        assert_eq!(r.offset_of_gpa(0x4000_1000, 0x1000).unwrap(), 0x1000);
        assert!(r.offset_of_gpa(0x4000_1001, 0x1000).is_err());
        assert!(r.offset_of_gpa(0x3fff_ffff, 1).is_err());
        assert!(r.offset_of_gpa(u64::MAX, 1).is_err());
        let s = r.sub(0x1000, 0x800).unwrap();
        assert_eq!(s.offset_of_gpa(0x4000_1100, 0x10).unwrap(), 0x100);
        assert_eq!(s.host_addr(), r.host_addr() + 0x1000);
    }
}
