//! [`MemfdMemory`]: the RAM of a virtual guest. A memfd mapped `MAP_SHARED`,
//! so that the backend that maps the same fd (vhost-user SET_MEM_TABLE) sees
//! every store, at guest-physical `gpa_base + offset`.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use log::debug;
use vm_memory::{FileOffset, MmapRegion};

use super::backing::{memfd, DmaBacking};
use super::error::DmaError;

/// A virtual guest's RAM: `len` bytes of a memfd, mapped shared.
#[derive(Debug)]
pub struct MemfdMemory {
    file: Arc<File>,
    mapping: Arc<MmapRegion>,
    gpa_base: u64,
}

impl MemfdMemory {
    /// Create `len` bytes of zeroed shared memory at guest-physical `gpa_base`.
    pub fn new(len: usize, gpa_base: u64) -> Result<MemfdMemory, DmaError> {
        if len == 0 || gpa_base.checked_add(len as u64).is_none() {
            return Err(DmaError::BadSize { len, gpa: gpa_base });
        }
        // Sealable, and sealed against resizing once sized, as QEMU's
        // memory-backend-memfd does: the backend refuses guest RAM that could
        // shrink under it (a mapping past the end of its file raises SIGBUS).
        let file =
            memfd(c"mc-guest-ram", libc::MFD_ALLOW_SEALING).map_err(|source| DmaError::Os {
                what: "memfd_create",
                source,
            })?;
        file.set_len(len as u64).map_err(|source| DmaError::Os {
            what: "sizing the guest RAM memfd",
            source,
        })?;
        // SAFETY: F_ADD_SEALS on a descriptor `file` owns; no memory is involved.
        if unsafe {
            libc::fcntl(
                file.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW,
            )
        } < 0
        {
            return Err(DmaError::Os {
                what: "sealing the guest RAM memfd",
                source: std::io::Error::last_os_error(),
            });
        }
        let file = Arc::new(file);
        let mapping = MmapRegion::build(
            Some(FileOffset::from_arc(file.clone(), 0)),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
        )
        .map_err(|source| DmaError::Map {
            what: "the guest RAM memfd",
            source,
        })?;
        debug!(
            "guest RAM: {} MiB memfd at gpa {gpa_base:#x}, host {:p}",
            len >> 20,
            mapping.as_ptr()
        );
        Ok(MemfdMemory {
            file,
            mapping: Arc::new(mapping),
            gpa_base,
        })
    }

    /// The memfd, for sharing with the device.
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// The memfd itself (a device model in a test maps it too).
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl DmaBacking for MemfdMemory {
    fn mapping(&self) -> &Arc<MmapRegion> {
        &self.mapping
    }
    fn gpa(&self) -> u64 {
        self.gpa_base
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::DmaRegion;
    use std::os::unix::fs::FileExt;

    #[test]
    fn the_memfd_and_the_mapping_are_the_same_memory() {
        let m = Arc::new(MemfdMemory::new(8192, 0x1000).unwrap());
        assert_eq!((m.len(), m.gpa(), m.start()), (8192, 0x1000, 0));
        let r = DmaRegion::new(m.clone());
        r.write(4095, b"seen by the device").unwrap();
        // What the backend, mapping the same fd, reads.
        let mut b = [0u8; 18];
        m.file().read_exact_at(&mut b, 4095).unwrap();
        assert_eq!(&b, b"seen by the device");
        m.file().write_all_at(b"and back", 100).unwrap();
        assert_eq!(r.read_vec(100, 8).unwrap(), b"and back");
        assert!(matches!(
            MemfdMemory::new(0, 0),
            Err(DmaError::BadSize { .. })
        ));
        assert!(matches!(
            MemfdMemory::new(8192, u64::MAX - 10),
            Err(DmaError::BadSize { .. })
        ));
    }
}
