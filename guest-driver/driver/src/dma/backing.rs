//! What a DMA backing is ([`DmaBacking`]), and the raw operations backings
//! share: a fresh memfd, and filling memory with volatile writes.

use std::ffi::CStr;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::FromRawFd;
use std::sync::Arc;

use vm_memory::{MmapRegion, VolatileMemoryError, VolatileSlice};

/// Memory the device can reach: `len()` bytes of a host mapping from byte
/// `start()`, contiguous in guest-physical space from `gpa()`.
///
/// A safe trait: every access goes through the mapping's own bounds checks,
/// so a backing that misstates its range gets errors, never memory outside
/// the mapping.
pub trait DmaBacking: Send + Sync + fmt::Debug {
    /// The host mapping that holds the memory (regions share it, so it stays
    /// mapped while any of them lives).
    fn mapping(&self) -> &Arc<MmapRegion>;
    /// Offset of the memory's first byte in [`DmaBacking::mapping`]; at least
    /// 8-byte aligned so that naturally aligned offsets are aligned in host
    /// memory too.
    fn start(&self) -> usize {
        0
    }
    /// Bytes of memory from `start()`.
    fn len(&self) -> usize {
        self.mapping().size().saturating_sub(self.start())
    }
    /// Guest-physical address of the first byte.
    fn gpa(&self) -> u64;
    /// True if there is no memory.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A fresh memfd named `name` (what `/proc/PID/maps` shows), with `flags`
/// added to `MFD_CLOEXEC`.
pub(crate) fn memfd(name: &CStr, flags: libc::c_uint) -> io::Result<File> {
    // SAFETY: memfd_create reads only the NUL-terminated `name`, which
    // outlives the call; the result is checked before use.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it,
    // so the File becomes its only owner.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Set every byte of `slice` to `byte` (volatile writes, a chunk at a time).
pub(crate) fn fill_slice(slice: &VolatileSlice<'_>, byte: u8) -> Result<(), VolatileMemoryError> {
    const CHUNK: usize = 4096;
    let pattern = [byte; CHUNK];
    let mut done = 0;
    while done < slice.len() {
        let n = CHUNK.min(slice.len() - done);
        slice.subslice(done, n)?.copy_from(&pattern[..n]);
        done += n;
    }
    Ok(())
}
