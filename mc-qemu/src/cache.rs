//! The set-up cache that `scripts/setup.sh` fills: QEMU's root, the guest
//! kernel, busybox, and the default image directory.

use std::path::{Path, PathBuf};

use crate::error::QemuError;

/// The cache directory that `scripts/setup.sh` fills:
/// `${MC_CACHE_DIR:-~/.cache/mc-emu}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheDir(pub PathBuf);

impl CacheDir {
    /// `MC_CACHE_DIR`, else `$HOME/.cache/mc-emu`.
    pub fn from_env() -> Result<Self, QemuError> {
        if let Some(dir) = std::env::var_os("MC_CACHE_DIR").filter(|d| !d.is_empty()) {
            return Ok(CacheDir(PathBuf::from(dir)));
        }
        match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
            Some(home) => Ok(CacheDir(Path::new(&home).join(".cache/mc-emu"))),
            None => Err(QemuError::NoCacheDir),
        }
    }

    /// The trixie root holding `usr/bin/qemu-system-x86_64`.
    pub fn qemu_root(&self) -> PathBuf {
        self.0.join("qemu-root")
    }

    /// The guest kernel image.
    pub fn kernel(&self) -> PathBuf {
        self.0.join("guest/vmlinuz")
    }

    /// The static busybox.
    pub fn busybox(&self) -> PathBuf {
        self.0.join("guest/busybox")
    }

    /// Default output directory of `mc-host image`.
    pub fn image_dir(&self) -> PathBuf {
        self.0.join("image")
    }
}
