//! A raw vhost-user frontend for the fuzz entry points: any message, with any
//! descriptors attached, no checks; replies counted and read back so a
//! sequence runs in step with the backend. And guest RAM as a frontend shares
//! it (a memfd, sealable or not, or a plain file), with tables that may lie.

// Fuzz builds (feature "fuzzing") and tests use the same parts.
#![cfg_attr(not(test), allow(dead_code))]

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use vmm_sys_util::sock_ctrl_msg::ScmSocket;

/// vhost-user request codes used here.
pub(crate) mod req {
    pub(crate) const GET_FEATURES: u32 = 1;
    pub(crate) const SET_FEATURES: u32 = 2;
    pub(crate) const SET_OWNER: u32 = 3;
    pub(crate) const SET_MEM_TABLE: u32 = 5;
    pub(crate) const SET_VRING_NUM: u32 = 8;
    pub(crate) const SET_VRING_ADDR: u32 = 9;
    pub(crate) const SET_VRING_BASE: u32 = 10;
    pub(crate) const GET_VRING_BASE: u32 = 11;
    pub(crate) const SET_VRING_KICK: u32 = 12;
    pub(crate) const SET_VRING_CALL: u32 = 13;
    pub(crate) const GET_PROTOCOL_FEATURES: u32 = 15;
    pub(crate) const SET_PROTOCOL_FEATURES: u32 = 16;
    pub(crate) const SET_VRING_ENABLE: u32 = 18;
    pub(crate) const GET_CONFIG: u32 = 24;
    pub(crate) const SET_CONFIG: u32 = 25;
}

/// Requests the backend answers (without REPLY_ACK, which is never asked for).
fn has_reply(code: u32) -> bool {
    matches!(
        code,
        req::GET_FEATURES | req::GET_PROTOCOL_FEATURES | req::GET_VRING_BASE | req::GET_CONFIG
    )
}

/// One connection to an adapter's socket.
pub(crate) struct RawFrontend {
    sock: UnixStream,
    /// Replies the backend owes.
    owed: usize,
    open: bool,
}

impl RawFrontend {
    pub(crate) fn connect(path: &Path) -> io::Result<RawFrontend> {
        let sock = UnixStream::connect(path)?;
        sock.set_read_timeout(Some(Duration::from_secs(5)))?;
        sock.set_write_timeout(Some(Duration::from_secs(5)))?;
        Ok(RawFrontend {
            sock,
            owed: 0,
            open: true,
        })
    }

    /// Whether the backend still serves this connection (it ends one on any
    /// request it refuses).
    pub(crate) fn is_open(&self) -> bool {
        self.open
    }

    /// Send request `code` with `body` and `fds`, then wait until the backend
    /// has handled it (a GET_FEATURES behind it is answered). Returns whether
    /// the connection is still open.
    pub(crate) fn request(&mut self, code: u32, body: &[u8], fds: &[RawFd]) -> bool {
        if !self.open {
            return false;
        }
        self.open = self.send(code, body, fds) && self.send(req::GET_FEATURES, &[], &[]);
        self.open = self.open && self.drain();
        self.open
    }

    fn send(&mut self, code: u32, body: &[u8], fds: &[RawFd]) -> bool {
        let mut msg = Vec::with_capacity(12 + body.len());
        msg.extend_from_slice(&code.to_le_bytes());
        // Version 1, no flags.
        msg.extend_from_slice(&1u32.to_le_bytes());
        msg.extend_from_slice(&(body.len() as u32).to_le_bytes());
        msg.extend_from_slice(body);
        let sent = if fds.is_empty() {
            self.sock.write_all(&msg).is_ok()
        } else {
            self.sock.send_with_fds(&[&msg[..]], fds) == Ok(msg.len())
        };
        if sent && has_reply(code) {
            self.owed += 1;
        }
        sent
    }

    /// Read every reply owed.
    fn drain(&mut self) -> bool {
        while self.owed > 0 {
            let mut hdr = [0u8; 12];
            if self.sock.read_exact(&mut hdr).is_err() {
                return false;
            }
            let size = u32::from_le_bytes([hdr[8], hdr[9], hdr[10], hdr[11]]) as usize;
            let mut body = vec![0u8; size.min(4096)];
            if size > 4096 || self.sock.read_exact(&mut body).is_err() {
                return false;
            }
            self.owed -= 1;
        }
        true
    }
}

/// How a frontend's guest RAM is backed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RamKind {
    /// A memfd with MFD_ALLOW_SEALING, unsealed: the backend seals it.
    Sealable,
    /// A memfd sealed against resizing by its creator, as QEMU does.
    Sealed,
    /// A memfd without MFD_ALLOW_SEALING: it can always shrink.
    Unsealable,
    /// A plain file.
    PlainFile,
}

/// A file of guest RAM, mapped here too so rings can be written into it.
pub(crate) struct RawRam {
    file: File,
    ptr: *mut u8,
    len: usize,
    /// Bytes of the file still there (a shrink makes the tail unwritable).
    file_len: usize,
}

impl RawRam {
    pub(crate) fn new(len: usize, kind: RamKind) -> io::Result<RawRam> {
        let file = if kind == RamKind::PlainFile {
            tempfile_in_tmp()?
        } else {
            let flags = if kind == RamKind::Unsealable {
                libc::MFD_CLOEXEC
            } else {
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING
            };
            // SAFETY: a plain syscall with a valid NUL-terminated name.
            let fd = unsafe { libc::memfd_create(c"fuzz-ram".as_ptr(), flags) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is fresh and owned by nothing else.
            unsafe { File::from_raw_fd(fd) }
        };
        file.set_len(len as u64)?;
        if kind == RamKind::Sealed {
            let seals = libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
            // SAFETY: adds seals to the memfd `file` owns.
            if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: a fresh shared mapping of a file this value owns; checked.
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
        Ok(RawRam {
            file,
            ptr: ptr.cast(),
            len,
            file_len: len,
        })
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The frontend address of byte `off` (what vring messages name).
    pub(crate) fn host_addr(&self, off: u64) -> u64 {
        self.ptr as u64 + off
    }

    /// Write `v` at `off` if the file still holds it.
    pub(crate) fn write_u16(&self, off: usize, v: u16) {
        if off + 2 <= self.file_len {
            for (k, b) in v.to_le_bytes().into_iter().enumerate() {
                // SAFETY: inside the mapping and inside the file (checked);
                // volatile because the backend reads it concurrently.
                unsafe { self.ptr.add(off + k).write_volatile(b) };
            }
        }
    }

    /// Try to shrink the file to `len` (what sealing forbids).
    pub(crate) fn shrink(&mut self, len: usize) -> io::Result<()> {
        self.file.set_len(len as u64)?;
        self.file_len = self.file_len.min(len);
        Ok(())
    }

    /// Whether the file can still shrink (no F_SEAL_SHRINK).
    pub(crate) fn can_shrink(&self) -> bool {
        // SAFETY: F_GET_SEALS only reads the seals of a file this value owns.
        let seals = unsafe { libc::fcntl(self.fd(), libc::F_GET_SEALS) };
        seals < 0 || seals & libc::F_SEAL_SHRINK == 0
    }
}

impl Drop for RawRam {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

fn tempfile_in_tmp() -> io::Result<File> {
    let path = std::env::temp_dir().join(format!(
        "mc-fuzz-ram-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}
