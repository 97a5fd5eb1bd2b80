//! The socket directory: one live backend per directory, and nothing at a
//! socket path replaced unless it is a stale socket.
//!
//! A backend holds an exclusive `flock` on `mc-device.lock` in its socket
//! directory for as long as it runs (the lock goes with the process, however it
//! ends), with its process id written inside. A second backend on the same
//! directory is refused, naming the first, instead of taking over its sockets
//! (and, on exit, removing them from under it). Before binding `node<i>.sock`,
//! whatever is at that path is looked at: a socket nobody accepts on (left by a
//! backend that died) is removed; a socket something answers on, a regular file,
//! a directory or anything else is refused with an error naming it.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use log::info;

use crate::error::DeviceError;

/// The lock file's name in the socket directory.
pub(crate) const LOCK_FILE: &str = "mc-device.lock";

/// The exclusive claim on a socket directory; released when dropped.
#[derive(Debug)]
pub(crate) struct DirLock {
    file: File,
    path: PathBuf,
}

impl DirLock {
    /// Claim `dir` for this process, or say who holds it.
    pub(crate) fn acquire(dir: &Path) -> Result<DirLock, DeviceError> {
        let path = dir.join(LOCK_FILE);
        let lock_err = |source| DeviceError::Lock {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(lock_err)?;
        // SAFETY: flock on a descriptor `file` keeps open; no memory involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(lock_err(e));
            }
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(DeviceError::InUse {
                dir: dir.to_path_buf(),
                holder: if holder.is_empty() {
                    "a process that has not written its id yet".into()
                } else {
                    holder.to_string()
                },
            });
        }
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "pid {}", std::process::id()))
            .map_err(lock_err)?;
        Ok(DirLock { file, path })
    }

    /// Give the directory up: the lock file goes first, then the lock.
    pub(crate) fn release(self) {
        let _ = std::fs::remove_file(&self.path);
        drop(self.file);
    }
}

/// Make `path` free for a new socket: nothing there, or a stale socket removed.
pub(crate) fn clear_socket_path(path: &Path) -> Result<(), DeviceError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(DeviceError::SocketPath {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let ft = meta.file_type();
    if !ft.is_socket() {
        let kind = if ft.is_file() {
            "a regular file"
        } else if ft.is_dir() {
            "a directory"
        } else if ft.is_symlink() {
            "a symbolic link"
        } else {
            "not a socket"
        };
        return Err(DeviceError::NotASocket {
            path: path.to_path_buf(),
            kind,
        });
    }
    match UnixStream::connect(path) {
        // Someone answers: a live server that is not a backend holding the lock.
        Ok(_) => Err(DeviceError::SocketLive {
            path: path.to_path_buf(),
        }),
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
            info!("removing the stale socket {}", path.display());
            match std::fs::remove_file(path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(source) => Err(DeviceError::SocketPath {
                    path: path.to_path_buf(),
                    source,
                }),
            }
        }
        Err(source) => Err(DeviceError::SocketPath {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;

    use super::*;

    #[test]
    fn a_second_claim_on_a_directory_is_refused_naming_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path()).unwrap();
        let e = DirLock::acquire(dir.path()).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, DeviceError::InUse { .. }), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        first.release();
        DirLock::acquire(dir.path()).unwrap().release();
        assert!(!dir.path().join(LOCK_FILE).exists());
    }

    #[test]
    fn only_stale_sockets_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("node0.sock");
        clear_socket_path(&p).unwrap();

        std::fs::write(&p, b"precious").unwrap();
        let e = clear_socket_path(&p).unwrap_err();
        assert!(
            matches!(
                e,
                DeviceError::NotASocket {
                    kind: "a regular file",
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        std::fs::remove_file(&p).unwrap();

        std::fs::create_dir(&p).unwrap();
        let e = clear_socket_path(&p).unwrap_err();
        assert!(
            matches!(
                e,
                DeviceError::NotASocket {
                    kind: "a directory",
                    ..
                }
            ),
            "{e}"
        );
        std::fs::remove_dir(&p).unwrap();

        let live = UnixListener::bind(&p).unwrap();
        let e = clear_socket_path(&p).unwrap_err();
        assert!(matches!(e, DeviceError::SocketLive { .. }), "{e}");
        assert!(p.exists());
        // Closing the listener leaves the socket file stale: it is replaced.
        drop(live);
        clear_socket_path(&p).unwrap();
        assert!(!p.exists());
    }
}
