//! Real QEMU guests: finding a QEMU that has the generic vhost-user device,
//! building the guest boot image, and booting guests under TCG.
//!
//! Set-up (QEMU, guest kernel, busybox) is done by `scripts/setup.sh`, which
//! fills the cache directory ([`CacheDir`]) this module reads. See docs/qemu.md.

pub mod boot;
pub mod cluster;
pub mod cmdline;
pub mod cpio;
pub mod elf;
pub mod find;
pub mod guest_build;
pub mod image;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use boot::{boot, AdapterSpec, BootOutcome, BootSpec};
pub use find::{find_qemu, Accel, Qemu, QemuSource, QemuVersion, MIN_VERSION};
pub use image::{build_image, BuiltImage, GuestInputs};

/// The command that installs everything the QEMU path needs.
pub const SETUP_COMMAND: &str = "scripts/setup.sh";

/// Everything that can go wrong on the QEMU path.
#[derive(Debug, thiserror::Error)]
pub enum QemuError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "no QEMU >= {min} found; tried:\n{}\ninstall one with `{SETUP_COMMAND}` \
         (it builds a cached Debian trixie root with trixie-backports' qemu-system-x86), \
         or name one with --qemu PATH or MC_QEMU=PATH",
        tried.iter().map(|t| format!("  - {t}")).collect::<Vec<_>>().join("\n"),
        min = MIN_VERSION
    )]
    NotFound { tried: Vec<String> },
    #[error("cannot parse the version of {program}: expected a line `QEMU emulator version X.Y[.Z]`, got {output:?}")]
    VersionParse { program: String, output: String },
    #[error("{what} not found at {}: run `{SETUP_COMMAND}` to install it", path.display())]
    MissingGuestFile { what: &'static str, path: PathBuf },
    #[error("guest binary {}: no such file", path.display())]
    NoGuestBinary { path: PathBuf },
    #[error("guest binary {}: {source}", path.display())]
    BadGuestBinary {
        path: PathBuf,
        #[source]
        source: elf::ElfCheckError,
    },
    #[error("program {}: no such file", path.display())]
    NoProgram { path: PathBuf },
    #[error(
        "program {}: dynamically linked; the guest image has no dynamic loader: \
         link it with -static (docs/c-api.md, \"QEMU guests\")",
        path.display()
    )]
    DynamicProgram { path: PathBuf },
    #[error("program {}: {source}", path.display())]
    BadProgram {
        path: PathBuf,
        #[source]
        source: elf::ElfCheckError,
    },
    #[error("programs {first} and {second} would both be /bin/{name} in the image")]
    ProgramNameTwice {
        name: String,
        first: String,
        second: String,
    },
    #[error("invalid cpio entry name {name:?}: {reason}")]
    CpioName { name: String, reason: &'static str },
    #[error("kernel command line is {len} bytes, more than the {max} x86 Linux accepts")]
    CmdlineTooLong { len: usize, max: usize },
    #[error("cache directory: neither MC_CACHE_DIR nor HOME is set")]
    NoCacheDir,
    #[error("{what}: {} is not UTF-8", path.display())]
    NotUtf8 { what: &'static str, path: PathBuf },
    #[error("guest memory: {mib} MiB is too little (at least {min})")]
    TooLittleMemory { mib: u32, min: u32 },
    #[error("{what}: {} does not exist; build it with `mc-host image`", path.display())]
    MissingImageFile { what: &'static str, path: PathBuf },
    #[error("vhost-user socket: {} does not exist; start the backend first", path.display())]
    NoBackendSocket { path: PathBuf },
    #[error(
        "cluster up: a cluster is already running in {} ({what} is alive): \
         `mc-host cluster down --state-dir {}` first",
        dir.display(),
        dir.display()
    )]
    ClusterRunning { dir: PathBuf, what: String },
    #[error("backend: mc-host serve exited ({status}); its log:\n{log_tail}")]
    BackendExited {
        status: std::process::ExitStatus,
        log_tail: String,
    },
    #[error("cluster state: {}: {source}", path.display())]
    ClusterRecord {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error("cluster state: {0}")]
    ClusterRecordWrite(#[source] toml::ser::Error),
    #[error("guest did not {stage} within {after:?}; last serial output:\n{serial_tail}")]
    Timeout {
        stage: &'static str,
        after: Duration,
        serial_tail: String,
    },
    #[error(transparent)]
    GuestBuild(#[from] guest_build::GuestBuildError),
    #[error("guest printed a malformed line {line:?}")]
    GuestProtocol { line: String },
    #[error("QEMU exited ({status}) before the guest {stage}; QEMU said:\n{stderr}\nlast serial output:\n{serial_tail}")]
    QemuExited {
        status: String,
        stage: &'static str,
        stderr: String,
        serial_tail: String,
    },
}

impl QemuError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        QemuError::Io {
            context: context.into(),
            source,
        }
    }
}

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

/// The last `n` lines of `text`.
pub(crate) fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
