//! A guest's memory table (VHOST_USER_SET_MEM_TABLE), checked before the
//! backend touches any of it.
//!
//! The backend maps each region of the table `MAP_SHARED` from the file the
//! frontend passed. A page of such a mapping that lies past the end of its file
//! raises SIGBUS when touched, and SIGBUS kills the whole backend process, every
//! node's adapter with it. So a region is accepted only when
//!
//! - its file cannot shrink: it carries the `F_SEAL_SHRINK` seal, which the
//!   backend adds itself where the file allows it (a memfd created with
//!   `MFD_ALLOW_SEALING`; QEMU's `memory-backend-memfd` seals its memfds this way
//!   by default), and
//! - with that seal in place, its mapped range (`mmap_offset`, `memory_size`)
//!   lies wholly inside the file.
//!
//! The order matters: sealing first means the size read afterwards is final.
//! A file that cannot be sealed (a plain file, a memfd created without
//! `MFD_ALLOW_SEALING`) could be truncated under the backend at any time, so it
//! is refused.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use vm_memory::{GuestMemoryBackend, GuestMemoryRegion};

use crate::memory::Mem;

/// Why a memory table was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MemTableError {
    #[error("region {index} (guest-physical {gpa:#x}) has no file behind it")]
    NoFile { index: usize, gpa: u64 },
    #[error(
        "region {index} (guest-physical {gpa:#x}): its file cannot be sealed against shrinking; \
         share guest RAM as a sealable memfd (QEMU: memory-backend-memfd, which seals by default)"
    )]
    Unsealable {
        index: usize,
        gpa: u64,
        #[source]
        source: io::Error,
    },
    #[error("region {index} (guest-physical {gpa:#x}): cannot read its file's size")]
    Stat {
        index: usize,
        gpa: u64,
        #[source]
        source: io::Error,
    },
    #[error(
        "region {index} (guest-physical {gpa:#x}): file offset {offset:#x} + {size:#x} bytes \
         reaches past the end of its file ({file_size:#x} bytes)"
    )]
    PastEnd {
        index: usize,
        gpa: u64,
        offset: u64,
        size: u64,
        file_size: u64,
    },
}

/// Check every region of `mem` (sealing its file against shrinking where the
/// file allows it). `Ok` means no access inside `mem` can raise SIGBUS.
pub(crate) fn check_mem_table(mem: &Mem) -> Result<(), MemTableError> {
    for (index, region) in mem.iter().enumerate() {
        let gpa = region.start_addr().0;
        let Some(fo) = region.file_offset() else {
            return Err(MemTableError::NoFile { index, gpa });
        };
        seal_against_shrinking(fo.file()).map_err(|source| MemTableError::Unsealable {
            index,
            gpa,
            source,
        })?;
        let file_size = fo
            .file()
            .metadata()
            .map_err(|source| MemTableError::Stat { index, gpa, source })?
            .len();
        let (offset, size) = (fo.start(), region.len());
        if offset.checked_add(size).is_none_or(|end| end > file_size) {
            return Err(MemTableError::PastEnd {
                index,
                gpa,
                offset,
                size,
                file_size,
            });
        }
    }
    Ok(())
}

/// Make sure `file` carries `F_SEAL_SHRINK`, adding it if need be. Fails with
/// EINVAL for a file that is not a memfd (no seals at all) and EPERM for a memfd
/// created without `MFD_ALLOW_SEALING` (it is born with `F_SEAL_SEAL`).
fn seal_against_shrinking(file: &File) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: F_GET_SEALS only reads the seals of a descriptor `file` keeps open.
    let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
    if seals < 0 {
        return Err(io::Error::last_os_error());
    }
    if seals & libc::F_SEAL_SHRINK != 0 {
        return Ok(());
    }
    // SAFETY: as above; F_ADD_SEALS only adds a seal to that same file.
    if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::fd::FromRawFd;

    use vm_memory::{FileOffset, GuestAddress, GuestRegionMmap, MmapRegion};

    use super::*;

    const PAGE: u64 = 4096;

    fn memfd(len: u64, flags: libc::c_uint) -> File {
        // SAFETY: a plain syscall with a valid NUL-terminated name.
        let fd =
            unsafe { libc::memfd_create(c"mem-table-test".as_ptr(), libc::MFD_CLOEXEC | flags) };
        assert!(fd >= 0, "{}", io::Error::last_os_error());
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let f = unsafe { File::from_raw_fd(fd) };
        f.set_len(len).unwrap();
        f
    }

    /// One region of `size` bytes of `file` from `offset`, mapped as the
    /// vhost-user daemon maps it (nothing is touched).
    fn table(file: &File, offset: u64, size: u64) -> Mem {
        let fo = FileOffset::new(file.try_clone().unwrap(), offset);
        let region = MmapRegion::from_file(fo, usize::try_from(size).unwrap()).unwrap();
        Mem::from_regions(vec![GuestRegionMmap::new(
            region,
            GuestAddress(0x4000_0000),
        )
        .unwrap()])
        .unwrap()
    }

    #[test]
    fn a_sealable_memfd_is_sealed_and_then_cannot_shrink() {
        let f = memfd(16 * PAGE, libc::MFD_ALLOW_SEALING);
        check_mem_table(&table(&f, 0, 16 * PAGE)).unwrap();
        check_mem_table(&table(&f, 4 * PAGE, 12 * PAGE)).unwrap();
        // The frontend can no longer take pages away from under the backend.
        let e = f.set_len(8 * PAGE).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
        // Growing is still allowed (QEMU seals that too; the backend need not).
        f.set_len(32 * PAGE).unwrap();
    }

    #[test]
    fn a_memfd_sealed_by_its_creator_is_accepted() {
        // What QEMU's memory-backend-memfd does (seal=on, the default).
        let f = memfd(4 * PAGE, libc::MFD_ALLOW_SEALING);
        let seals = libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
        // SAFETY: adds seals to a memfd this test owns.
        let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_ADD_SEALS, seals) };
        assert_eq!(r, 0);
        check_mem_table(&table(&f, 0, 4 * PAGE)).unwrap();
    }

    #[test]
    fn regions_past_the_end_of_their_file_are_refused() {
        let f = memfd(4 * PAGE, libc::MFD_ALLOW_SEALING);
        for (offset, size) in [
            (0, 5 * PAGE),
            (4 * PAGE, PAGE),
            (2 * PAGE, 4 * PAGE),
            (64 * PAGE, PAGE),
        ] {
            let e = check_mem_table(&table(&f, offset, size)).unwrap_err();
            assert!(
                matches!(e, MemTableError::PastEnd { .. }),
                "{offset:#x}+{size:#x}: {e}"
            );
        }
    }

    #[test]
    fn files_that_could_still_shrink_are_refused() {
        // A memfd born without MFD_ALLOW_SEALING carries F_SEAL_SEAL.
        let f = memfd(4 * PAGE, 0);
        let e = check_mem_table(&table(&f, 0, 4 * PAGE)).unwrap_err();
        assert!(matches!(e, MemTableError::Unsealable { .. }), "{e}");
        // A plain file has no seals at all.
        let t = tempfile::tempfile().unwrap();
        t.set_len(4 * PAGE).unwrap();
        let e = check_mem_table(&table(&t, 0, 4 * PAGE)).unwrap_err();
        assert!(matches!(e, MemTableError::Unsealable { .. }), "{e}");
        assert!(e.to_string().contains("memory-backend-memfd"), "{e}");
    }
}
