//! Shared memory between the processes of one host (issue 41: PVM tasks
//! are separate processes, each with its own adapter): a channel's two
//! rings and their indexes in a file both processes map, so the channel
//! runs the shared-memory protocol of [`ShmLink`](crate::link::ShmLink)
//! without the hub (seed 004, Figure 7: tasks 1 and 2 of one node).
//!
//! The channel's B end (the one that completes it in the directory)
//! creates the file, named by the channel's number, in the host's
//! directory ([`HostShm`]) before the directory says the channel is open;
//! the A end maps it once it sees that, checks its header, and unlinks it.
//! So no retry is needed, and once both ends have it mapped no other
//! process can reach the file. An A end that closes without mapping it
//! removes it; `mc-host` removes the directory at the end of the run.
//!
//! Layout (little-endian, offsets in bytes):
//!
//! | at | what |
//! |---|---|
//! | 0 | magic ([`MAGIC`]), stored last by the creator (release) |
//! | 8 | version (u32), header bytes (u32) |
//! | 16 | bytes of the A-to-B ring, of the B-to-A ring (u64 each) |
//! | 32 | the channel's number (u32), 0 (u32) |
//! | 40 | the file's length (u64) |
//! | 64, 128 | A-to-B producer index, consumer index (own cache lines) |
//! | 192, 256 | B-to-A producer index, consumer index |
//! | 512 | the A-to-B ring, then the B-to-A ring |

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use firmware_model::abi::shm::HostShm;

use crate::error::{ShmFileError, UmpError};
use crate::link::Link;

/// "UMPSHM" and a byte for the layout, in the file's first word.
pub(crate) const MAGIC: u64 = 0x0001_4d48_5350_4d55;
const VERSION: u32 = 1;
/// Bytes before the first ring.
pub(crate) const HEADER: usize = 512;
const HEADER_BYTES: u64 = 512;
const A_PROD: usize = 64;
const A_CONS: usize = 128;
const B_PROD: usize = 192;
const B_CONS: usize = 256;
/// The largest ring a file may declare (as `Config::shm_ring_bytes`).
const MAX_RING: u64 = 1 << 30;

/// The file of channel `uid` in `dir`.
pub(crate) fn path_of(dir: &Path, uid: u32) -> PathBuf {
    dir.join(format!("ump-channel-{uid:08x}.shm"))
}

/// Where this node's channels to node `peer` keep their files, if `peer`
/// is another process of this host.
pub(crate) fn shared_with(shm: Option<&HostShm>, me: u8, peer: u8) -> Option<&Path> {
    shm.filter(|s| peer != me && s.holds(me) && s.holds(peer))
        .map(|s| s.dir.as_path())
}

/// A channel's file, mapped.
pub(crate) struct ShmFile {
    base: *mut u8,
    len: usize,
    a_size: usize,
    b_size: usize,
}

// SAFETY: the mapping is plain shared memory that lives as long as the
// value (unmapped in Drop); the indexes are touched only as atomics and
// the ring bytes only under the single-writer single-reader protocol (see
// `FileLink`), from whichever thread holds the link.
unsafe impl Send for ShmFile {}
// SAFETY: as for Send: no method hands out references into the rings.
unsafe impl Sync for ShmFile {}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> ShmFileError + 'a {
    move |source| ShmFileError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

impl ShmFile {
    /// Create channel `uid`'s file in `dir` with rings of `a_size` (A to B)
    /// and `b_size` bytes, and map it. Fails if the file exists.
    pub(crate) fn create(
        dir: &Path,
        uid: u32,
        a_size: usize,
        b_size: usize,
    ) -> Result<ShmFile, ShmFileError> {
        let path = path_of(dir, uid);
        let len = HEADER + a_size + b_size;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io_err("creating", &path))?;
        let sized = u64::try_from(len)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
            .and_then(|l| file.set_len(l));
        let made = sized
            .map_err(io_err("sizing", &path))
            .and_then(|()| ShmFile::map(&file, len, a_size, b_size, &path));
        let f = match made {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        // The file is fresh (zeros): the indexes start at 0.
        f.store(8, u64::from(VERSION) | (HEADER_BYTES << 32));
        f.store(16, a_size as u64);
        f.store(24, b_size as u64);
        f.store(32, u64::from(uid));
        f.store(40, len as u64);
        f.word(0).store(MAGIC, Ordering::Release);
        Ok(f)
    }

    /// Map channel `uid`'s file from `dir` after checking its header, then
    /// unlink it (both ends now hold it).
    pub(crate) fn open(dir: &Path, uid: u32) -> Result<ShmFile, ShmFileError> {
        let path = path_of(dir, uid);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err("opening", &path))?;
        let on_disk = file.metadata().map_err(io_err("reading", &path))?.len();
        let bad = |problem: String| ShmFileError::Header {
            path: path.clone(),
            problem,
        };
        let header_bytes = HEADER_BYTES;
        if on_disk < header_bytes {
            return Err(bad(format!(
                "{on_disk} bytes, shorter than the {HEADER}-byte header"
            )));
        }
        // Map the header alone first: nothing beyond the file is touched
        // before its sizes are known to fit.
        let head = ShmFile::map(&file, HEADER, 0, 0, &path)?;
        let magic = head.word(0).load(Ordering::Acquire);
        if magic != MAGIC {
            return Err(bad(format!("magic {magic:#018x}, not {MAGIC:#018x}")));
        }
        let vh = head.load(8);
        let (version, hb) = (vh & 0xffff_ffff, vh >> 32);
        if version != u64::from(VERSION) || hb != header_bytes {
            return Err(bad(format!(
                "version {version} with a {hb}-byte header, not {VERSION} with {HEADER}"
            )));
        }
        let (a, b, file_uid, len) = (head.load(16), head.load(24), head.load(32), head.load(40));
        drop(head);
        for (name, v) in [("A-to-B", a), ("B-to-A", b)] {
            if v < 64 || v % 64 != 0 || v > MAX_RING {
                return Err(bad(format!(
                    "its {name} ring has {v} bytes (a multiple of 64, 64 B to 1 GiB)"
                )));
            }
        }
        if file_uid != u64::from(uid) {
            return Err(bad(format!("it belongs to channel {file_uid}, not {uid}")));
        }
        if len != header_bytes + a + b || len != on_disk {
            return Err(bad(format!(
                "it says {len} bytes, its header and rings need {}, and the file has {on_disk}",
                header_bytes + a + b
            )));
        }
        let size = |v: u64| usize::try_from(v).expect("a ring of at most 1 GiB fits usize");
        let f = ShmFile::map(&file, size(len), size(a), size(b), &path)?;
        std::fs::remove_file(&path).map_err(io_err("removing", &path))?;
        Ok(f)
    }

    fn map(
        file: &File,
        len: usize,
        a_size: usize,
        b_size: usize,
        path: &Path,
    ) -> Result<ShmFile, ShmFileError> {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of an open file, at an address the
        // kernel picks; `len` is at most the file's length (checked by the
        // callers), so every byte of it is backed.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io_err("mapping", path)(io::Error::last_os_error()));
        }
        Ok(ShmFile {
            base: p.cast::<u8>(),
            len,
            a_size,
            b_size,
        })
    }

    /// The 8-byte word at `at` (a multiple of 8 within the header).
    fn word(&self, at: usize) -> &AtomicU64 {
        assert!(at % 8 == 0 && at + 8 <= HEADER.min(self.len));
        // SAFETY: in the mapping (checked above), 8-aligned (the mapping is
        // page-aligned), and only ever accessed as an atomic; it lives as
        // long as `self`.
        unsafe { &*self.base.add(at).cast::<AtomicU64>() }
    }

    fn store(&self, at: usize, v: u64) {
        self.word(at).store(v, Ordering::Relaxed)
    }

    fn load(&self, at: usize) -> u64 {
        self.word(at).load(Ordering::Relaxed)
    }

    /// Ring `b` (false: A to B), as its offset and size.
    fn ring(&self, b_to_a: bool) -> (usize, usize) {
        if b_to_a {
            (HEADER + self.a_size, self.b_size)
        } else {
            (HEADER, self.a_size)
        }
    }

    fn write(&self, b_to_a: bool, at: usize, src: &[u8]) {
        let (off, size) = self.ring(b_to_a);
        assert!(at + src.len() <= size, "ring write out of range");
        // SAFETY: within the ring, within the mapping (checked above and
        // at open); the bytes are the writer's alone under the ring
        // protocol (`FileLink`), and `src` is process memory, not the
        // mapping.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.add(off + at), src.len()) }
    }

    fn read(&self, b_to_a: bool, at: usize, dst: &mut [u8]) {
        let (off, size) = self.ring(b_to_a);
        assert!(at + dst.len() <= size, "ring read out of range");
        // SAFETY: within the ring, within the mapping (checked above); the
        // bytes were published by the writer and are not written again
        // until the reader releases them.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(off + at), dst.as_mut_ptr(), dst.len())
        }
    }
}

impl Drop for ShmFile {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no reference
        // into it outlives `self` (`word` borrows `self`).
        unsafe { libc::munmap(self.base.cast::<libc::c_void>(), self.len) };
    }
}

/// One end of a channel between two processes of one host: the
/// shared-memory protocol ([`ShmLink`](crate::link::ShmLink)'s: the writer
/// stores the data, then the producer index with release; the reader loads
/// the producer index with acquire, then the data, then stores its
/// consumer index with release) on a mapped file.
pub(crate) struct FileLink {
    file: ShmFile,
    side_a: bool,
    uid: u32,
}

impl FileLink {
    /// The B end: create the file (rings of `size` bytes each way).
    pub(crate) fn create(dir: &Path, uid: u32, size: usize) -> Result<FileLink, UmpError> {
        Ok(FileLink {
            file: ShmFile::create(dir, uid, size, size)?,
            side_a: false,
            uid,
        })
    }

    /// The A end: map the file B made.
    pub(crate) fn open(dir: &Path, uid: u32) -> Result<FileLink, UmpError> {
        Ok(FileLink {
            file: ShmFile::open(dir, uid)?,
            side_a: true,
            uid,
        })
    }

    /// (ring written by this end is B-to-A, its producer word, the peer's
    /// consumer word of it)
    fn out(&self) -> (bool, usize, usize) {
        if self.side_a {
            (false, A_PROD, A_CONS)
        } else {
            (true, B_PROD, B_CONS)
        }
    }

    fn inc(&self) -> (bool, usize, usize) {
        if self.side_a {
            (true, B_PROD, B_CONS)
        } else {
            (false, A_PROD, A_CONS)
        }
    }
}

impl Link for FileLink {
    fn out_size(&self) -> usize {
        self.file.ring(self.out().0).1
    }
    fn put(&self, at: usize, data: &[u8], prod: Option<u64>) -> Result<(), UmpError> {
        let (ring, p, _) = self.out();
        self.file.write(ring, at, data);
        if let Some(v) = prod {
            self.file.word(p).store(v, Ordering::Release);
        }
        Ok(())
    }
    fn out_cons(&self) -> u64 {
        self.file.word(self.out().2).load(Ordering::Acquire)
    }
    fn in_size(&self) -> usize {
        self.file.ring(self.inc().0).1
    }
    fn get(&self, at: usize, buf: &mut [u8]) {
        self.file.read(self.inc().0, at, buf)
    }
    fn in_prod(&self) -> u64 {
        self.file.word(self.inc().1).load(Ordering::Acquire)
    }
    fn publish_cons(&self, cons: u64) -> Result<(), UmpError> {
        self.file.word(self.inc().2).store(cons, Ordering::Release);
        Ok(())
    }
    fn error_count(&self) -> Option<u64> {
        None
    }
    fn check_errors(&self) -> Result<Option<u64>, UmpError> {
        Ok(None)
    }
    fn uid(&self) -> u32 {
        self.uid
    }
    fn polled(&self) -> bool {
        // As ShmLink: the reader follows the producer index and never loads
        // bytes the writer may be storing.
        false
    }
    fn in_word(&self, at: usize) -> u64 {
        let mut b = [0u8; 8];
        self.get(at, &mut b);
        u64::from_le_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "ump-shm-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn two_mappings_of_one_file_carry_bytes_and_indexes_both_ways() {
        let d = dir();
        let b = FileLink::create(&d, 7, 128).unwrap();
        let a = FileLink::open(&d, 7).unwrap();
        assert!(!path_of(&d, 7).exists(), "A unlinks the file once mapped");
        a.put(8, b"hello", Some(13)).unwrap();
        assert_eq!(b.in_prod(), 13);
        let mut got = [0u8; 5];
        b.get(8, &mut got);
        assert_eq!(&got, b"hello");
        b.publish_cons(13).unwrap();
        assert_eq!(a.out_cons(), 13);
        b.put(0, b"back", Some(4)).unwrap();
        assert_eq!(
            (a.in_prod(), b.out_cons(), a.in_size(), b.out_size()),
            (4, 0, 128, 128)
        );
        let mut got = [0u8; 4];
        a.get(0, &mut got);
        assert_eq!(&got, b"back");
        let _ = std::fs::remove_dir_all(&d);
    }

    fn pattern(i: usize) -> u8 {
        u8::try_from(i % 251).expect("below 251")
    }

    /// The writer side as a stream: bytes go round the ring many times,
    /// each chunk split at the ring's end, and the reader on another
    /// thread (its own mapping) sees every byte in order.
    #[test]
    fn a_stream_wraps_the_ring_in_order_between_two_mappings() {
        let d = dir();
        const RING: usize = 256;
        const TOTAL: usize = 64 << 10;
        let b = FileLink::create(&d, 9, RING).unwrap();
        let a = FileLink::open(&d, 9).unwrap();
        let index = |v: u64| usize::try_from(v).expect("a test index fits usize");
        let reader = std::thread::spawn(move || {
            let mut pos = 0usize;
            while pos < TOTAL {
                let prod = index(b.in_prod());
                while pos < prod {
                    let at = pos % RING;
                    let n = (prod - pos).min(RING - at);
                    let mut buf = vec![0u8; n];
                    b.get(at, &mut buf);
                    for (i, &x) in buf.iter().enumerate() {
                        assert_eq!(x, pattern(pos + i), "byte {}", pos + i);
                    }
                    pos += n;
                    b.publish_cons(pos as u64).unwrap();
                }
                std::hint::spin_loop();
            }
        });
        let mut pos = 0usize;
        let mut chunk = 1usize;
        while pos < TOTAL {
            let free = RING - (pos - index(a.out_cons()));
            if free == 0 {
                std::thread::yield_now();
                continue;
            }
            let n = chunk.min(free).min(TOTAL - pos);
            let data: Vec<u8> = (pos..pos + n).map(pattern).collect();
            let at = pos % RING;
            let first = n.min(RING - at);
            a.put(at, &data[..first], None).unwrap();
            a.put(0, &data[first..], Some((pos + n) as u64)).unwrap();
            pos += n;
            chunk = chunk % 97 + 13;
        }
        reader.join().unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Write a file, damage one header word, and expect `open` to refuse it
    /// with `what` in the message.
    fn refused_after(word: usize, value: u64, what: &str) {
        let d = dir();
        let b = ShmFile::create(&d, 3, 64, 64).unwrap();
        b.store(word, value);
        let e = ShmFile::open(&d, 3)
            .err()
            .expect("a damaged header is refused");
        assert!(
            matches!(e, ShmFileError::Header { .. }) && e.to_string().contains(what),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_damaged_or_mismatched_header_is_refused_naming_the_fault() {
        refused_after(0, 0x1234, "magic 0x0000000000001234");
        refused_after(8, 2 | (512 << 32), "version 2");
        refused_after(16, 100, "A-to-B ring has 100 bytes");
        refused_after(24, 1 << 40, "B-to-A ring has");
        refused_after(32, 4, "belongs to channel 4, not 3");
        refused_after(40, 4096, "it says 4096 bytes");
        // Rings that would reach past the file.
        refused_after(16, 1 << 20, "the file has 640");
    }

    #[test]
    fn a_short_or_missing_file_is_an_error_not_a_mapping() {
        let d = dir();
        std::fs::write(path_of(&d, 5), b"short").unwrap();
        let e = ShmFile::open(&d, 5).err().unwrap();
        assert!(e.to_string().contains("5 bytes, shorter than"), "{e}");
        let e = ShmFile::open(&d, 6).err().unwrap();
        assert!(
            matches!(
                e,
                ShmFileError::Io {
                    what: "opening",
                    ..
                }
            ),
            "{e}"
        );
        // A second creator of the same channel is refused, not merged.
        let _b = ShmFile::create(&d, 8, 64, 64).unwrap();
        assert!(ShmFile::create(&d, 8, 64, 64).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn only_other_processes_of_this_host_share_files() {
        let s = HostShm {
            dir: PathBuf::from("/d"),
            nodes: 0b1100,
        };
        assert_eq!(shared_with(Some(&s), 2, 3), Some(Path::new("/d")));
        assert_eq!(shared_with(Some(&s), 2, 2), None);
        assert_eq!(shared_with(Some(&s), 2, 1), None);
        assert_eq!(shared_with(Some(&s), 0, 3), None);
        assert_eq!(shared_with(None, 2, 3), None);
    }
}
