//! Guest RAM as a frontend shares it with the backend.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};

use vhost::VhostUserMemoryRegionInfo;
use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryAtomic, GuestMemoryBackend, GuestMemoryMmap,
    GuestRegionMmap,
};

/// How guest RAM is backed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A memfd created with MFD_ALLOW_SEALING, left unsealed (the backend may
    /// seal it).
    Sealable,
    /// A memfd sealed against resizing and further sealing (QEMU's default).
    Sealed,
    /// A memfd created without MFD_ALLOW_SEALING: it can always shrink.
    Unsealable,
    /// A plain temporary file.
    PlainFile,
}

/// `len` bytes of guest RAM at guest-physical `gpa`, in a file the backend
/// can be handed.
pub struct GuestRam {
    file: File,
    mem: GuestMemoryMmap<()>,
    len: usize,
    gpa: u64,
    /// Bytes of the file still there (a shrink makes the tail untouchable:
    /// touching it would raise SIGBUS here).
    file_len: AtomicUsize,
}

fn memfd(backing: Backing) -> io::Result<File> {
    let flags = match backing {
        Backing::Unsealable => libc::MFD_CLOEXEC,
        _ => libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
    };
    // SAFETY: a plain syscall with a valid NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"mc-test-ram".as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

impl GuestRam {
    pub fn new(len: usize, gpa: u64, backing: Backing) -> io::Result<GuestRam> {
        let file = match backing {
            Backing::PlainFile => tempfile::tempfile()?,
            _ => memfd(backing)?,
        };
        file.set_len(len as u64)?;
        if backing == Backing::Sealed {
            let seals = libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
            // SAFETY: adds seals to the memfd `file` owns.
            if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let region = GuestRegionMmap::from_range(
            GuestAddress(gpa),
            len,
            Some(FileOffset::new(file.try_clone()?, 0)),
        )
        .map_err(io::Error::other)?;
        let mem = GuestMemoryMmap::from_regions(vec![region]).map_err(io::Error::other)?;
        Ok(GuestRam {
            file,
            mem,
            len,
            gpa,
            file_len: AtomicUsize::new(len),
        })
    }

    /// The first `len` bytes of this RAM as a memory table of their own
    /// (what a frontend that shrinks its table hands the backend).
    pub fn prefix(&self, len: usize) -> io::Result<GuestMemoryMmap<()>> {
        let region = GuestRegionMmap::from_range(
            GuestAddress(self.gpa),
            len.min(self.len),
            Some(FileOffset::new(self.file.try_clone()?, 0)),
        )
        .map_err(io::Error::other)?;
        GuestMemoryMmap::from_regions(vec![region]).map_err(io::Error::other)
    }

    /// The memory as the guest sees it.
    pub fn mem(&self) -> &GuestMemoryMmap<()> {
        &self.mem
    }

    /// The same memory as a backend holds it.
    pub fn atomic(&self) -> GuestMemoryAtomic<GuestMemoryMmap<()>> {
        GuestMemoryAtomic::new(self.mem.clone())
    }

    pub fn gpa(&self) -> u64 {
        self.gpa
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// The address the frontend names for `gpa` in vring messages (vhost-user
    /// speaks frontend virtual addresses; the backend translates them through
    /// the memory table).
    pub fn host_addr(&self, gpa: u64) -> u64 {
        let base = self
            .mem
            .get_host_address(GuestAddress(self.gpa))
            .expect("mapped") as u64;
        base.wrapping_add(gpa.wrapping_sub(self.gpa))
    }

    /// The honest table entry for this RAM.
    pub fn region(&self) -> VhostUserMemoryRegionInfo {
        self.region_claiming(self.len as u64, 0)
    }

    /// A table entry claiming `size` bytes of the file from `offset`, whatever
    /// the file holds.
    pub fn region_claiming(&self, size: u64, offset: u64) -> VhostUserMemoryRegionInfo {
        VhostUserMemoryRegionInfo {
            guest_phys_addr: self.gpa,
            memory_size: size,
            userspace_addr: self.host_addr(self.gpa),
            mmap_offset: offset,
            mmap_handle: self.fd(),
        }
    }

    /// Try to resize the file under the backend (what a sealed file refuses).
    pub fn set_file_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.file_len
            .fetch_min(usize::try_from(len).unwrap_or(usize::MAX), Ordering::AcqRel);
        Ok(())
    }

    /// Whether the file can still shrink (no F_SEAL_SHRINK).
    pub fn can_shrink(&self) -> bool {
        // SAFETY: F_GET_SEALS only reads the seals of a file this value owns.
        let seals = unsafe { libc::fcntl(self.fd(), libc::F_GET_SEALS) };
        seals < 0 || seals & libc::F_SEAL_SHRINK == 0
    }

    /// `len` bytes at `gpa` lie in this RAM and in what its file still holds.
    pub fn holds(&self, gpa: u64, len: usize) -> bool {
        gpa.checked_sub(self.gpa)
            .and_then(|o| o.checked_add(len as u64))
            .is_some_and(|end| end <= self.file_len.load(Ordering::Acquire) as u64)
    }

    fn check(&self, gpa: u64, len: usize) {
        assert!(
            self.holds(gpa, len),
            "{gpa:#x}+{len:#x} is outside this RAM"
        );
    }

    pub fn write(&self, gpa: u64, data: &[u8]) {
        self.check(gpa, data.len());
        self.mem
            .write_slice(data, GuestAddress(gpa))
            .expect("in RAM");
    }

    pub fn read(&self, gpa: u64, len: usize) -> Vec<u8> {
        self.check(gpa, len);
        let mut v = vec![0u8; len];
        self.mem
            .read_slice(&mut v, GuestAddress(gpa))
            .expect("in RAM");
        v
    }

    pub fn fill(&self, byte: u8) {
        self.write(self.gpa, &vec![byte; self.len]);
    }

    /// All of it.
    pub fn snapshot(&self) -> Vec<u8> {
        self.read(self.gpa, self.len)
    }

    pub fn write_u16(&self, gpa: u64, v: u16) {
        self.write(gpa, &v.to_le_bytes());
    }

    pub fn read_u16(&self, gpa: u64) -> u16 {
        let b = self.read(gpa, 2);
        u16::from_le_bytes([b[0], b[1]])
    }
}
