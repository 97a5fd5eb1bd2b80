//! The adapter's BARs, mapped through sysfs `resourceN` (`MAP_SHARED`, as
//! vm-memory [`MmapRegion`]s), and windows on them holding one virtio
//! structure each, read and written with accesses of the field's own width
//! (virtio 1.x, 4.1.3.1).
//!
//! Accesses are vm-memory [`VolatileRef`] loads and stores at naturally
//! aligned offsets: on x86-64, where the PCI transport runs (a q35 guest),
//! each is a single load or store of the field's width, which is what the
//! device decodes.

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use log::debug;
use vm_memory::mmap::MmapRegionError;
use vm_memory::{ByteValued, FileOffset, MmapRegion, VolatileMemory, VolatileRef};

/// Standard BARs of a type-0 function.
const BARS: usize = 6;

/// Errors of mapping BARs and windows on them.
#[derive(Debug, thiserror::Error)]
pub enum MmioError {
    #[error("{op} {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is empty (BAR not assigned?)", path.display())]
    EmptyBar { path: PathBuf },
    #[error("mmap {}", path.display())]
    Map {
        path: PathBuf,
        #[source]
        source: MmapRegionError,
    },
    #[error("a capability names BAR {0}")]
    NoSuchBar(u8),
    #[error("capability range {offset:#x}+{len:#x} is outside its BAR of {bar_len:#x} bytes")]
    OutsideBar {
        offset: usize,
        len: usize,
        bar_len: usize,
    },
}

/// Map a BAR's `resourceN` file read-write and shared.
fn map_bar(path: &Path) -> Result<MmapRegion, MmioError> {
    let io = |op| {
        let path = path.to_path_buf();
        move |source| MmioError::Io { op, path, source }
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io("opening"))?;
    let len = usize::try_from(file.metadata().map_err(io("stat"))?.len())
        .map_err(|_| io("stat")(io::Error::other("a BAR larger than the address space")))?;
    if len == 0 {
        return Err(MmioError::EmptyBar {
            path: path.to_path_buf(),
        });
    }
    MmapRegion::build(
        Some(FileOffset::new(file, 0)),
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED,
    )
    .map_err(|source| MmioError::Map {
        path: path.to_path_buf(),
        source,
    })
}

/// A function's BARs, each mapped the first time a window asks for it.
#[derive(Debug)]
pub struct Bars {
    /// The function's sysfs directory.
    dir: PathBuf,
    mapped: [Option<Arc<MmapRegion>>; BARS],
}

impl Bars {
    pub fn new(dir: &Path) -> Bars {
        Bars {
            dir: dir.to_path_buf(),
            mapped: Default::default(),
        }
    }

    /// A window of `len` bytes at `offset` in BAR `bar`.
    pub fn window(&mut self, bar: u8, offset: usize, len: usize) -> Result<Mmio, MmioError> {
        let slot = self
            .mapped
            .get_mut(usize::from(bar))
            .ok_or(MmioError::NoSuchBar(bar))?;
        let region = match slot {
            Some(r) => r.clone(),
            None => {
                let path = self.dir.join(format!("resource{bar}"));
                let r = Arc::new(map_bar(&path)?);
                debug!("mapped {} ({:#x} bytes)", path.display(), r.size());
                *slot = Some(r.clone());
                r
            }
        };
        Mmio::new(region, offset, len)
    }
}

/// A window of a mapped BAR (one virtio structure).
#[derive(Clone, Debug)]
pub struct Mmio {
    bar: Arc<MmapRegion>,
    offset: usize,
    len: usize,
}

impl Mmio {
    fn new(bar: Arc<MmapRegion>, offset: usize, len: usize) -> Result<Mmio, MmioError> {
        if offset.checked_add(len).is_none_or(|e| e > bar.size()) {
            return Err(MmioError::OutsideBar {
                offset,
                len,
                bar_len: bar.size(),
            });
        }
        Ok(Mmio { bar, offset, len })
    }

    /// Bytes in the window.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `T` at `off`. Offsets are the transport's own constants, checked
    /// against the window's size when it was made, or checked by the caller
    /// (the notify offset): one outside the window is a bug, and panics.
    fn reg<T: ByteValued>(&self, off: usize) -> VolatileRef<'_, T> {
        let size = size_of::<T>();
        assert!(
            off.checked_add(size).is_some_and(|e| e <= self.len) && off % size == 0,
            "MMIO access {off:#x}/{size} outside {:#x} bytes",
            self.len
        );
        self.bar
            .get_ref::<T>(self.offset + off)
            .expect("a window lies inside its BAR (checked in Mmio::new)")
    }

    pub fn r8(&self, off: usize) -> u8 {
        self.reg::<u8>(off).load()
    }
    pub fn r16(&self, off: usize) -> u16 {
        u16::from_le(self.reg::<u16>(off).load())
    }
    pub fn r32(&self, off: usize) -> u32 {
        u32::from_le(self.reg::<u32>(off).load())
    }
    pub fn w8(&self, off: usize, v: u8) {
        self.reg::<u8>(off).store(v)
    }
    pub fn w16(&self, off: usize, v: u16) {
        self.reg::<u16>(off).store(v.to_le())
    }
    pub fn w32(&self, off: usize, v: u32) {
        self.reg::<u32>(off).store(v.to_le())
    }
    /// A 64-bit field as two 32-bit writes, low half first (allowed by 4.1.3.1).
    pub fn w64(&self, off: usize, v: u64) {
        self.w32(off, (v & 0xffff_ffff) as u32);
        self.w32(off + 4, (v >> 32) as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A function directory whose `resource2` is an ordinary file standing in
    /// for a BAR: what the window writes, the file holds.
    fn fake_function(bar_len: usize) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("resource2"), vec![0u8; bar_len]).unwrap();
        fs::write(d.path().join("resource0"), []).unwrap();
        d
    }

    #[test]
    fn windows_read_and_write_their_bar() {
        let d = fake_function(0x2000);
        let mut bars = Bars::new(d.path());
        let w = bars.window(2, 0x1000, 0x38).unwrap();
        w.w8(0x14, 0xab);
        w.w16(0x16, 0x1234);
        w.w32(0x20, 0xdead_beef);
        w.w64(0x28, 0x0102_0304_0506_0708);
        let file = fs::read(d.path().join("resource2")).unwrap();
        assert_eq!(file[0x1014], 0xab);
        assert_eq!(&file[0x1016..0x1018], &[0x34, 0x12]);
        assert_eq!(&file[0x1020..0x1024], &0xdead_beefu32.to_le_bytes());
        assert_eq!(
            &file[0x1028..0x1030],
            &0x0102_0304_0506_0708u64.to_le_bytes()
        );
        assert_eq!(
            (w.r8(0x14), w.r16(0x16), w.r32(0x20)),
            (0xab, 0x1234, 0xdead_beef)
        );
        // A second window on the same BAR shares the mapping.
        let w2 = bars.window(2, 0x1000, 0x10).unwrap();
        w2.w32(0, 7);
        assert_eq!(w.r32(0), 7);
        assert_eq!(w2.len(), 0x10);
    }

    #[test]
    fn bad_windows_are_errors() {
        let d = fake_function(0x2000);
        let mut bars = Bars::new(d.path());
        assert!(matches!(
            bars.window(2, 0x1f00, 0x200),
            Err(MmioError::OutsideBar { .. })
        ));
        assert!(matches!(
            bars.window(2, usize::MAX, 2),
            Err(MmioError::OutsideBar { .. })
        ));
        assert!(matches!(bars.window(6, 0, 4), Err(MmioError::NoSuchBar(6))));
        assert!(matches!(
            bars.window(0, 0, 4),
            Err(MmioError::EmptyBar { .. })
        ));
        assert!(matches!(bars.window(1, 0, 4), Err(MmioError::Io { .. })));
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn an_access_past_the_window_panics() {
        let d = fake_function(0x2000);
        let w = Bars::new(d.path()).window(2, 0, 0x10).unwrap();
        w.r32(0x10);
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn a_misaligned_access_panics() {
        let d = fake_function(0x2000);
        let w = Bars::new(d.path()).window(2, 0, 0x10).unwrap();
        w.w16(3, 1);
    }
}
