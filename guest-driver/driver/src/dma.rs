//! DMA memory: memory the driver shares with the device.
//!
//! A [`DmaRegion`] is a window on a [`DmaBacking`]: a host mapping that is
//! contiguous in guest-physical space, so every byte has a host address (what
//! the driver uses) and a guest-physical address (what it hands the device).
//! Every access is bounds-checked and volatile or atomic: the device is another
//! thread or process that reads and writes the same memory at any time.
//!
//! Backings: [`MemfdMemory`] is the RAM of a virtual guest (a memfd shared with
//! the vhost-user backend, GPA = base + offset). A PCI transport inside a real
//! guest would implement [`DmaBacking`] over a hugepage whose GPA comes from
//! `/proc/self/pagemap`.
//!
//! [`DmaAllocator`] carves a region into rings, buffers and frames (bump, aligned,
//! never freed).

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64};
use std::sync::Arc;

use log::debug;

/// Map `len` bytes of `file` read-write and shared (guest RAM, a BAR), at an
/// address the kernel picks.
pub(crate) fn map_shared(file: &File, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh mapping of a file the caller holds open; nothing else
    // is at the address the kernel picks, and the result is checked.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(ptr.cast())
}

/// Errors of DMA memory access and allocation.
#[derive(Debug, thiserror::Error)]
pub enum DmaError {
    #[error("DMA access of {len} bytes at offset {offset:#x} is outside a region of {region_len:#x} bytes")]
    OutOfBounds {
        offset: usize,
        len: usize,
        region_len: usize,
    },
    #[error("DMA access at offset {offset:#x} is not {align}-byte aligned")]
    Misaligned { offset: usize, align: usize },
    #[error("guest-physical range {gpa:#x}+{len:#x} is outside the region")]
    GpaOutOfRange { gpa: u64, len: usize },
    #[error("alignment {0} is not a power of two")]
    BadAlignment(usize),
    #[error(
        "out of DMA memory: {requested:#x} bytes aligned to {align} requested, {available:#x} left"
    )]
    OutOfMemory {
        requested: usize,
        align: usize,
        available: usize,
    },
    #[error("cannot create DMA memory: {0}")]
    Os(#[source] io::Error),
}

/// Memory the device can reach: a host mapping of `len()` bytes, contiguous in
/// guest-physical space from `gpa()`.
///
/// # Safety
///
/// Implementors guarantee that `host_ptr()` is valid for reads and writes of
/// `len()` bytes for as long as the value lives, that the mapping never moves,
/// and that it is aligned to at least 8 bytes.
pub unsafe trait DmaBacking: Send + Sync + fmt::Debug {
    /// Host address of byte 0.
    fn host_ptr(&self) -> *mut u8;
    /// Bytes in the mapping.
    fn len(&self) -> usize;
    /// Guest-physical address of byte 0.
    fn gpa(&self) -> u64;
    /// True if the mapping is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A virtual guest's RAM: a memfd mapped `MAP_SHARED`, so that the backend that
/// maps the same fd (SET_MEM_TABLE) sees every store. GPA = `gpa_base + offset`.
#[derive(Debug)]
pub struct MemfdMemory {
    file: File,
    ptr: *mut u8,
    len: usize,
    gpa_base: u64,
}

// SAFETY: the mapping is plain shared memory owned by this value; all access
// through DmaRegion is volatile or atomic, so sharing it between threads is sound.
unsafe impl Send for MemfdMemory {}
// SAFETY: as above.
unsafe impl Sync for MemfdMemory {}

impl MemfdMemory {
    /// Create `len` bytes of zeroed shared memory at guest-physical `gpa_base`.
    pub fn new(len: usize, gpa_base: u64) -> Result<MemfdMemory, DmaError> {
        if len == 0 || gpa_base.checked_add(len as u64).is_none() {
            return Err(DmaError::OutOfMemory {
                requested: len,
                align: 1,
                available: 0,
            });
        }
        // Sealable, and sealed against resizing once sized, as QEMU's
        // memory-backend-memfd does: the backend refuses guest RAM that could
        // shrink under it (a mapping past the end of its file raises SIGBUS).
        // SAFETY: a plain syscall with a valid NUL-terminated name.
        let fd = unsafe {
            libc::memfd_create(
                c"mc-guest-ram".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if fd < 0 {
            return Err(DmaError::Os(io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(len as u64).map_err(DmaError::Os)?;
        // SAFETY: adds seals to the memfd `file` owns; no memory involved.
        if unsafe {
            libc::fcntl(
                file.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW,
            )
        } < 0
        {
            return Err(DmaError::Os(io::Error::last_os_error()));
        }
        let ptr = map_shared(&file, len).map_err(DmaError::Os)?;
        debug!(
            "guest RAM: {} MiB memfd at gpa {gpa_base:#x}, host {ptr:p}",
            len >> 20
        );
        Ok(MemfdMemory {
            file,
            ptr,
            len,
            gpa_base,
        })
    }

    /// The memfd, for sharing with the device.
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

impl Drop for MemfdMemory {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` is exactly the mapping made in `new`; every
        // DmaRegion holds an Arc to this value, so none outlives the mapping.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

// SAFETY: `ptr` is a live MAP_SHARED mapping of `len` bytes (page-aligned) until drop.
unsafe impl DmaBacking for MemfdMemory {
    fn host_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn gpa(&self) -> u64 {
        self.gpa_base
    }
}

/// A bounds-checked window on DMA memory. Cloning is cheap and shares the memory.
#[derive(Clone)]
pub struct DmaRegion {
    backing: Arc<dyn DmaBacking>,
    offset: usize,
    len: usize,
}

impl fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DmaRegion(gpa {:#x}, {:#x} bytes)", self.gpa(), self.len)
    }
}

impl DmaRegion {
    /// The whole of `backing`.
    pub fn new(backing: Arc<dyn DmaBacking>) -> DmaRegion {
        let len = backing.len();
        DmaRegion {
            backing,
            offset: 0,
            len,
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
        self.backing.gpa() + self.offset as u64
    }

    /// Host (driver virtual) address of the region's first byte.
    pub fn host_addr(&self) -> u64 {
        self.backing.host_ptr() as u64 + self.offset as u64
    }

    /// Guest-physical address of `offset` (which may be the end of the region).
    pub fn gpa_at(&self, offset: usize) -> Result<u64, DmaError> {
        self.check(offset, 0)?;
        Ok(self.gpa() + offset as u64)
    }

    /// Offset of guest-physical `gpa` in this region, if `len` bytes there fit.
    pub fn offset_of_gpa(&self, gpa: u64, len: usize) -> Result<usize, DmaError> {
        let err = DmaError::GpaOutOfRange { gpa, len };
        let off = gpa.checked_sub(self.gpa()).ok_or(err)?;
        let off = usize::try_from(off).map_err(|_| DmaError::GpaOutOfRange { gpa, len })?;
        self.check(off, len)
            .map_err(|_| DmaError::GpaOutOfRange { gpa, len })?;
        Ok(off)
    }

    /// The `len` bytes at `offset`, as a region of their own.
    pub fn sub(&self, offset: usize, len: usize) -> Result<DmaRegion, DmaError> {
        self.check(offset, len)?;
        Ok(DmaRegion {
            backing: self.backing.clone(),
            offset: self.offset + offset,
            len,
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

    /// Host pointer to `offset`, after checking `len` bytes fit.
    fn ptr(&self, offset: usize, len: usize) -> Result<*mut u8, DmaError> {
        self.check(offset, len)?;
        // SAFETY: offset + len <= self.len, and the region lies inside the
        // backing's mapping (checked in `sub`), so the result stays inside it.
        Ok(unsafe { self.backing.host_ptr().add(self.offset + offset) })
    }

    fn aligned_ptr(&self, offset: usize, size: usize) -> Result<*mut u8, DmaError> {
        let p = self.ptr(offset, size)?;
        if (p as usize) % size != 0 {
            return Err(DmaError::Misaligned {
                offset,
                align: size,
            });
        }
        Ok(p)
    }

    /// Copy `buf.len()` bytes from `offset` (volatile reads).
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<(), DmaError> {
        let src = self.ptr(offset, buf.len())?;
        // SAFETY: `src` is valid for buf.len() bytes (checked above), and `buf`
        // is a distinct Rust buffer, so the ranges cannot overlap.
        unsafe { volatile_copy_from(src, buf) };
        Ok(())
    }

    /// Copy `data` to `offset` (volatile writes).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), DmaError> {
        let dst = self.ptr(offset, data.len())?;
        // SAFETY: `dst` is valid for data.len() bytes (checked above), and
        // `data` is a distinct Rust buffer.
        unsafe { volatile_copy_to(dst, data) };
        Ok(())
    }

    /// Set `len` bytes at `offset` to `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<(), DmaError> {
        let dst = self.ptr(offset, len)?;
        for i in 0..len {
            // SAFETY: i < len, and `dst` is valid for len bytes.
            unsafe { dst.add(i).write_volatile(byte) };
        }
        Ok(())
    }

    /// Read `len` bytes at `offset` into a new vector.
    pub fn read_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>, DmaError> {
        let mut v = vec![0u8; len];
        self.read(offset, &mut v)?;
        Ok(v)
    }

    /// Little-endian u16 at `offset` (naturally aligned, volatile).
    pub fn read_u16(&self, offset: usize) -> Result<u16, DmaError> {
        let p = self.aligned_ptr(offset, 2)?;
        // SAFETY: `p` is in bounds and 2-byte aligned.
        Ok(u16::from_le(unsafe { p.cast::<u16>().read_volatile() }))
    }

    /// Little-endian u32 at `offset` (naturally aligned, volatile).
    pub fn read_u32(&self, offset: usize) -> Result<u32, DmaError> {
        let p = self.aligned_ptr(offset, 4)?;
        // SAFETY: `p` is in bounds and 4-byte aligned.
        Ok(u32::from_le(unsafe { p.cast::<u32>().read_volatile() }))
    }

    /// Little-endian u64 at `offset` (naturally aligned, volatile).
    pub fn read_u64(&self, offset: usize) -> Result<u64, DmaError> {
        let p = self.aligned_ptr(offset, 8)?;
        // SAFETY: `p` is in bounds and 8-byte aligned.
        Ok(u64::from_le(unsafe { p.cast::<u64>().read_volatile() }))
    }

    pub fn write_u16(&self, offset: usize, v: u16) -> Result<(), DmaError> {
        let p = self.aligned_ptr(offset, 2)?;
        // SAFETY: `p` is in bounds and 2-byte aligned.
        unsafe { p.cast::<u16>().write_volatile(v.to_le()) };
        Ok(())
    }

    pub fn write_u32(&self, offset: usize, v: u32) -> Result<(), DmaError> {
        let p = self.aligned_ptr(offset, 4)?;
        // SAFETY: `p` is in bounds and 4-byte aligned.
        unsafe { p.cast::<u32>().write_volatile(v.to_le()) };
        Ok(())
    }

    pub fn write_u64(&self, offset: usize, v: u64) -> Result<(), DmaError> {
        let p = self.aligned_ptr(offset, 8)?;
        // SAFETY: `p` is in bounds and 8-byte aligned.
        unsafe { p.cast::<u64>().write_volatile(v.to_le()) };
        Ok(())
    }

    /// The u16 at `offset` as an atomic (ring indices). Values are little-endian
    /// in memory: convert with `u16::from_le`/`to_le`.
    pub fn atomic_u16(&self, offset: usize) -> Result<&AtomicU16, DmaError> {
        let p = self.aligned_ptr(offset, 2)?;
        // SAFETY: in bounds, aligned, and the backing (held by `self`) outlives
        // the returned reference; the memory is only ever accessed atomically
        // or volatilely from this side.
        Ok(unsafe { AtomicU16::from_ptr(p.cast()) })
    }

    /// The u32 at `offset` as an atomic.
    pub fn atomic_u32(&self, offset: usize) -> Result<&AtomicU32, DmaError> {
        let p = self.aligned_ptr(offset, 4)?;
        // SAFETY: as in `atomic_u16`.
        Ok(unsafe { AtomicU32::from_ptr(p.cast()) })
    }

    /// The u64 at `offset` as an atomic (status-page words: one 64-bit load).
    pub fn atomic_u64(&self, offset: usize) -> Result<&AtomicU64, DmaError> {
        let p = self.aligned_ptr(offset, 8)?;
        // SAFETY: as in `atomic_u16`.
        Ok(unsafe { AtomicU64::from_ptr(p.cast()) })
    }
}

/// Volatile copy out of DMA memory, 8 bytes at a time where aligned.
///
/// # Safety
/// `src` must be valid for `dst.len()` bytes and not overlap `dst`.
unsafe fn volatile_copy_from(src: *const u8, dst: &mut [u8]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY (whole body): every access is at src + i with i < n.
    unsafe {
        while i < n && (src.add(i) as usize) % 8 != 0 {
            dst[i] = src.add(i).read_volatile();
            i += 1;
        }
        while i + 8 <= n {
            let w = src.add(i).cast::<u64>().read_volatile();
            dst[i..i + 8].copy_from_slice(&w.to_ne_bytes());
            i += 8;
        }
        while i < n {
            dst[i] = src.add(i).read_volatile();
            i += 1;
        }
    }
}

/// Volatile copy into DMA memory, 8 bytes at a time where aligned.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes and not overlap `src`.
unsafe fn volatile_copy_to(dst: *mut u8, src: &[u8]) {
    let n = src.len();
    let mut i = 0;
    // SAFETY (whole body): every access is at dst + i with i < n.
    unsafe {
        while i < n && (dst.add(i) as usize) % 8 != 0 {
            dst.add(i).write_volatile(src[i]);
            i += 1;
        }
        while i + 8 <= n {
            let mut w = [0u8; 8];
            w.copy_from_slice(&src[i..i + 8]);
            dst.add(i)
                .cast::<u64>()
                .write_volatile(u64::from_ne_bytes(w));
            i += 8;
        }
        while i < n {
            dst.add(i).write_volatile(src[i]);
            i += 1;
        }
    }
}

/// Bump allocator over a region: aligned (in guest-physical space), zeroed,
/// never freed.
#[derive(Debug)]
pub struct DmaAllocator {
    region: DmaRegion,
    next: usize,
}

impl DmaAllocator {
    pub fn new(region: DmaRegion) -> DmaAllocator {
        DmaAllocator { region, next: 0 }
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
        let pad = (gpa.wrapping_neg() & (align as u64 - 1)) as usize;
        let start = self.next.checked_add(pad).ok_or_else(oom)?;
        let end = start.checked_add(size).ok_or_else(oom)?;
        if end > self.region.len() {
            return Err(oom());
        }
        let r = self.region.sub(start, size)?;
        r.fill(0, size, 0)?;
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
        assert!(r.atomic_u64(4).is_err());
        let s = r.sub(1024, 1024).unwrap();
        assert_eq!(s.gpa(), 0x10_0400);
        assert!(s.write(1000, &[0; 100]).is_err());
        assert!(r.sub(4000, 200).is_err());
        assert!(r.sub(usize::MAX, 2).is_err());
        assert_eq!(s.gpa_at(1024).unwrap(), 0x10_0800);
        assert!(s.gpa_at(1025).is_err());
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
    }

    #[test]
    fn gpa_lookup() {
        let r = region(8192, 0x4000_0000);
        assert_eq!(r.offset_of_gpa(0x4000_1000, 0x1000).unwrap(), 0x1000);
        assert!(r.offset_of_gpa(0x4000_1001, 0x1000).is_err());
        assert!(r.offset_of_gpa(0x3fff_ffff, 1).is_err());
        assert!(r.offset_of_gpa(u64::MAX, 1).is_err());
    }

    #[test]
    fn allocator_aligns_in_gpa_and_runs_out_cleanly() {
        let r = region(64 * 1024, 0x1_0000_0000);
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
}
