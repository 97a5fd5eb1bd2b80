//! Everything that can go wrong on the QEMU path, in one type.
//!
//! Each variant prints its own words; a cause it keeps (`#[source]`) is not
//! in its message but returned from `source()`, and
//! [`ErrorChain`](firmware_model::ErrorChain) (what
//! `mc-host` prints errors with) names each cause once. A few variants
//! elsewhere print their cause mid-sentence, before advice; those do not
//! return it from `source()`.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::elf::ElfCheckError;
use crate::guest_build::GuestBuildError;
use crate::version::MIN_VERSION;

/// The command that installs everything the QEMU path needs.
pub const SETUP_COMMAND: &str = "scripts/setup.sh";

/// Everything that can go wrong on the QEMU path.
#[derive(Debug, thiserror::Error)]
pub enum QemuError {
    #[error("{context}")]
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
    #[error("guest binary {}", path.display())]
    BadGuestBinary {
        path: PathBuf,
        #[source]
        source: ElfCheckError,
    },
    #[error("program {}: no such file", path.display())]
    NoProgram { path: PathBuf },
    #[error(
        "program {}: dynamically linked; the guest image has no dynamic loader: \
         link it with -static (docs/c-api.md, \"QEMU guests\")",
        path.display()
    )]
    DynamicProgram { path: PathBuf },
    #[error("program {}", path.display())]
    BadProgram {
        path: PathBuf,
        #[source]
        source: ElfCheckError,
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
    #[error("cluster state: {}", path.display())]
    ClusterRecord {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error("cluster state")]
    ClusterRecordWrite(#[source] toml::ser::Error),
    #[error("guest did not {stage} within {after:?}; last serial output:\n{serial_tail}")]
    Timeout {
        stage: &'static str,
        after: Duration,
        serial_tail: String,
    },
    #[error(transparent)]
    GuestBuild(#[from] GuestBuildError),
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

#[cfg(test)]
mod tests {
    use super::*;
    use firmware_model::ErrorChain;

    #[test]
    fn a_chain_names_each_cause_once() {
        let e = QemuError::io("reading x", io::Error::other("disk on fire"));
        assert_eq!(e.to_string(), "reading x");
        assert_eq!(ErrorChain(&e).to_string(), "reading x: disk on fire");
        let bad = QemuError::BadGuestBinary {
            path: PathBuf::from("/g"),
            source: ElfCheckError::NotElf,
        };
        assert_eq!(
            ErrorChain(&bad).to_string(),
            "guest binary /g: not an ELF file"
        );
    }
}
