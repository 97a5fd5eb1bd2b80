//! The shared heap's local memory: one memfd mapped twice. The application
//! view is what programs touch; its protection (none / read / read-write) is
//! how accesses are detected (seed 002 s.3.1). The protocol view is always
//! read-write and is what the protocol copies pages into and diffs from, so
//! protocol code never faults on the heap.

use std::io;

/// Page protection of the application view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Prot {
    None = 0,
    Read = 1,
    ReadWrite = 2,
}

pub struct HeapMemory {
    fd: libc::c_int,
    len: usize,
    app: *mut u8,
    proto: *mut u8,
}

// SAFETY: the value owns its descriptor and both mappings (nothing else
// unmaps them), so moving it to another thread moves ownership whole.
unsafe impl Send for HeapMemory {}
// SAFETY: `&self` methods only read or write bytes of the shared mappings
// through raw pointers (and `mprotect` them); which thread may touch which
// page when is the protocol's synchronisation (the node's state mutex and
// the page protections), as for memory shared with other processes.
unsafe impl Sync for HeapMemory {}

fn os_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl HeapMemory {
    /// `len` must be a multiple of the OS page size. With `base`, the
    /// application view is placed at exactly that address (so that every
    /// node's heap addresses agree, as C programs storing pointers into
    /// shared data need), and an address range already in use is an error
    /// naming it rather than a mapping elsewhere.
    pub fn new(len: usize, base: Option<usize>) -> io::Result<HeapMemory> {
        // SAFETY: plain system calls on values we own; results checked.
        unsafe {
            let fd = libc::memfd_create(c"csm-heap".as_ptr(), libc::MFD_CLOEXEC);
            if fd < 0 {
                return Err(os_err("memfd_create"));
            }
            let Ok(size) = libc::off_t::try_from(len) else {
                libc::close(fd);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "heap too large",
                ));
            };
            if libc::ftruncate(fd, size) != 0 {
                libc::close(fd);
                return Err(os_err("ftruncate"));
            }
            let map = |prot| libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0);
            let app = match base {
                None => map(libc::PROT_NONE),
                Some(at) => libc::mmap(
                    at as *mut libc::c_void,
                    len,
                    libc::PROT_NONE,
                    libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE,
                    fd,
                    0,
                ),
            };
            if app == libc::MAP_FAILED {
                let e = io::Error::last_os_error();
                libc::close(fd);
                return Err(match base {
                    Some(at) => io::Error::new(
                        e.kind(),
                        format!(
                            "cannot map the shared heap at its fixed base {at:#x} ({len} bytes): {e} \
                             (something else is mapped there)"
                        ),
                    ),
                    None => io::Error::new(e.kind(), format!("mmap (application view): {e}")),
                });
            }
            if let Some(at) = base {
                // Kernels before 4.17 ignore MAP_FIXED_NOREPLACE and treat
                // the address as a hint.
                if app as usize != at {
                    libc::munmap(app, len);
                    libc::close(fd);
                    return Err(io::Error::other(format!(
                        "cannot map the shared heap at its fixed base {at:#x}: the kernel placed \
                         it at {:#x} (MAP_FIXED_NOREPLACE needs Linux 4.17 or later)",
                        app as usize
                    )));
                }
            }
            let proto = map(libc::PROT_READ | libc::PROT_WRITE);
            if proto == libc::MAP_FAILED {
                libc::munmap(app, len);
                libc::close(fd);
                return Err(os_err("mmap (protocol view)"));
            }
            Ok(HeapMemory {
                fd,
                len,
                app: app.cast::<u8>(),
                proto: proto.cast::<u8>(),
            })
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn app_base(&self) -> *mut u8 {
        self.app
    }

    /// Set the application view's protection of `[offset, offset + len)`.
    pub fn protect(&self, offset: usize, len: usize, prot: Prot) -> io::Result<()> {
        assert!(offset + len <= self.len);
        let p = match prot {
            Prot::None => libc::PROT_NONE,
            Prot::Read => libc::PROT_READ,
            Prot::ReadWrite => libc::PROT_READ | libc::PROT_WRITE,
        };
        // Counted work does not see the system call: the model charges it.
        mc_api::vclock::charge_unseen(mc_api::vclock::Unseen::Mprotect);
        // SAFETY: the range lies inside our mapping.
        if unsafe { libc::mprotect(self.app.add(offset).cast::<libc::c_void>(), len, p) } != 0 {
            return Err(os_err("mprotect"));
        }
        Ok(())
    }

    /// Put shared memory that this process already maps at `src` (the
    /// home's receive mapping of its master copy) in place of the heap's
    /// `[offset, offset + len)` in both views, so that the application
    /// threads of the home write the master copy directly and see remote
    /// diffs land in it (seed 000 s.2.3.2). The application view of the
    /// range is left inaccessible. `mremap` with an old size of 0 makes a
    /// second mapping of the same pages of a shared mapping (mremap(2)); a
    /// private or huge-page source is refused, and the heap is then as it
    /// was.
    pub fn alias(&self, offset: usize, len: usize, src: *const u8) -> io::Result<()> {
        assert!(offset + len <= self.len);
        let move_to = |dst: *mut u8| -> io::Result<()> {
            // SAFETY: `dst..dst + len` lies in our own mapping (asserted
            // above), which MREMAP_FIXED replaces; `src` is the caller's
            // shared mapping, which stays mapped (old size 0 moves nothing).
            let r = unsafe {
                libc::mremap(
                    src as *mut libc::c_void,
                    0,
                    len,
                    libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                    dst.cast::<libc::c_void>(),
                )
            };
            if r == libc::MAP_FAILED {
                return Err(os_err("mremap (alias of the master copy)"));
            }
            Ok(())
        };
        if (src as usize) % 4096 != 0 || offset % 4096 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "master copy not page-aligned",
            ));
        }
        // SAFETY: in bounds (asserted above).
        let (app, proto) = unsafe { (self.app.add(offset), self.proto.add(offset)) };
        move_to(app)?;
        self.protect(offset, len, Prot::None)?;
        if let Err(e) = move_to(proto) {
            // Put the heap's own pages back under the application view.
            // SAFETY: our own range and descriptor, mapped as at `new`.
            let back = unsafe {
                libc::mmap(
                    app.cast::<libc::c_void>(),
                    len,
                    libc::PROT_NONE,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    self.fd,
                    libc::off_t::try_from(offset).expect("a heap offset fits off_t"),
                )
            };
            if back == libc::MAP_FAILED {
                return Err(os_err("mmap (restoring the heap after a failed alias)"));
            }
            return Err(e);
        }
        Ok(())
    }

    /// The protocol view of one page as 32-bit words (volatile copies).
    pub fn read_words(&self, offset: usize, out: &mut [u32]) {
        assert!(offset % 4 == 0 && offset + 4 * out.len() <= self.len);
        // SAFETY: `offset` is within the protocol view (asserted above), so
        // the pointer stays inside the mapping.
        let src = unsafe { self.proto.add(offset) } as *const u32;
        for (i, w) in out.iter_mut().enumerate() {
            // SAFETY: in bounds and aligned (checked above).
            *w = unsafe { std::ptr::read_volatile(src.add(i)) };
        }
    }

    /// Store one aligned 32-bit word through the protocol view. A single
    /// aligned store, so application threads writing other words of the same
    /// page through their view at the same moment lose nothing.
    pub fn write_word(&self, offset: usize, w: u32) {
        assert!(offset % 4 == 0 && offset + 4 <= self.len);
        // SAFETY: in bounds and aligned (checked above).
        unsafe { std::ptr::write_volatile(self.proto.add(offset).cast::<u32>(), w) }
    }

    /// Store the bytes of `w` that `mask` names (bit k: byte k as the word
    /// lies in memory) at the aligned word `offset`: one word store when
    /// all four are named, else one byte store each, so application threads
    /// writing the word's other bytes at the same moment lose nothing.
    pub fn write_masked(&self, offset: usize, w: u32, mask: u8) {
        if mask == crate::twin::WHOLE_WORD {
            return self.write_word(offset, w);
        }
        assert!(offset % 4 == 0 && offset + 4 <= self.len);
        for (k, b) in w.to_le_bytes().into_iter().enumerate() {
            if mask & (1 << k) != 0 {
                // SAFETY: in bounds (checked above); a byte needs no alignment.
                unsafe { std::ptr::write_volatile(self.proto.add(offset + k), b) }
            }
        }
    }

    /// Copy bytes into the protocol view.
    pub fn write_bytes(&self, offset: usize, data: &[u8]) {
        assert!(offset + data.len() <= self.len);
        charge_copy(data.len());
        // SAFETY: in bounds; the page is protected against the application
        // or the application is not allowed to race with this update.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.proto.add(offset), data.len()) }
    }

    /// The protocol view of `[offset, offset + len)`, to fill in place (a
    /// page arriving from its home).
    ///
    /// # Safety
    ///
    /// Nobody else reads or writes those bytes while the slice lives: the
    /// caller holds the node's state, and the application view of the range
    /// is inaccessible.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset + len <= self.len);
        // SAFETY: in bounds (asserted); exclusive use is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.proto.add(offset), len) }
    }

    pub fn read_bytes(&self, offset: usize, out: &mut [u8]) {
        assert!(offset + out.len() <= self.len);
        charge_copy(out.len());
        // SAFETY: in bounds.
        unsafe {
            std::ptr::copy_nonoverlapping(self.proto.add(offset), out.as_mut_ptr(), out.len())
        }
    }
}

impl Drop for HeapMemory {
    fn drop(&mut self) {
        // SAFETY: our own mappings and descriptor.
        unsafe {
            libc::munmap(self.app.cast::<libc::c_void>(), self.len);
            libc::munmap(self.proto.cast::<libc::c_void>(), self.len);
            libc::close(self.fd);
        }
    }
}

/// A copy by libc's `memcpy` (uncounted under counted work): the model
/// charges it (`mc_api::vclock::unseen`).
fn charge_copy(bytes: usize) {
    mc_api::vclock::charge_unseen(mc_api::vclock::Unseen::Copy {
        bytes: bytes as u64,
    });
}
