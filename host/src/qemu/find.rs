//! Finding a QEMU >= 10.2 and choosing the accelerator.
//!
//! Order: an explicit path (`--qemu` or `MC_QEMU`), then `qemu-system-x86_64`
//! on `PATH`, then the cached trixie root built by `scripts/setup.sh`, run
//! through the root's own dynamic loader (its QEMU needs glibc 2.38).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use super::{CacheDir, QemuError};

/// The oldest QEMU whose `vhost-user-test-device-pci` is user-creatable.
pub const MIN_VERSION: QemuVersion = QemuVersion {
    major: 10,
    minor: 2,
    micro: 0,
};

/// A QEMU version, as printed by `qemu-system-x86_64 -version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct QemuVersion {
    pub major: u32,
    pub minor: u32,
    pub micro: u32,
}

impl fmt::Display for QemuVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.micro)
    }
}

impl QemuVersion {
    /// Parse the output of `-version`: the first line reading
    /// `QEMU emulator version X.Y[.Z] ...`.
    pub fn parse(output: &str) -> Option<QemuVersion> {
        const TAG: &str = "QEMU emulator version ";
        let line = output.lines().find_map(|l| l.trim().strip_prefix(TAG))?;
        let word = line.split_whitespace().next()?;
        let mut parts = word.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let micro = match parts.next() {
            None => 0,
            Some(p) => {
                // "9.2.90" or a vendor tail like "3-dirty": take the leading digits.
                let digits: String = p.chars().take_while(|c| c.is_ascii_digit()).collect();
                digits.parse().ok()?
            }
        };
        Some(QemuVersion {
            major,
            minor,
            micro,
        })
    }
}

/// Where a QEMU was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QemuSource {
    /// `--qemu PATH` or `MC_QEMU`.
    Explicit,
    /// `qemu-system-x86_64` on `PATH`.
    Path,
    /// The cached root of `scripts/setup.sh`, run through its own loader.
    CachedRoot(PathBuf),
}

/// A runnable QEMU: `program prefix_args... <guest args>`.
#[derive(Debug, Clone)]
pub struct Qemu {
    pub program: PathBuf,
    /// Arguments that come before the guest's: the loader's `--library-path`
    /// and QEMU binary, and `-L` firmware directories for the cached root.
    pub prefix_args: Vec<OsString>,
    pub version: QemuVersion,
    pub source: QemuSource,
}

impl Qemu {
    /// A command that runs this QEMU, with the prefix arguments in place.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.prefix_args);
        cmd
    }

    /// The command line prefix, shell-quoted, for logs and docs.
    pub fn display_prefix(&self) -> String {
        std::iter::once(self.program.as_os_str())
            .chain(self.prefix_args.iter().map(|a| a.as_os_str()))
            .map(|a| super::cmdline::shell_quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The invocation (program, prefix args) for the QEMU in a cached root.
pub fn cached_root_invocation(root: &Path) -> (PathBuf, Vec<OsString>) {
    let lib_path = format!(
        "{}:{}",
        root.join("usr/lib/x86_64-linux-gnu").display(),
        root.join("lib/x86_64-linux-gnu").display()
    );
    let args: Vec<OsString> = vec![
        "--library-path".into(),
        lib_path.into(),
        root.join("usr/bin/qemu-system-x86_64").into(),
        "-L".into(),
        root.join("usr/share/qemu").into(),
        "-L".into(),
        root.join("usr/share/seabios").into(),
    ];
    (root.join("lib64/ld-linux-x86-64.so.2"), args)
}

/// Run `program args... -version` (10 s limit) and parse the version.
fn probe_version(program: &Path, args: &[OsString]) -> Result<QemuVersion, QemuError> {
    let name = program.display().to_string();
    let mut child = Command::new(program)
        .args(args)
        .arg("-version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| QemuError::io(format!("running {name} -version"), e))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(QemuError::Timeout {
                    stage: "answer -version",
                    after: Duration::from_secs(10),
                    serial_tail: String::new(),
                });
            }
            Err(e) => return Err(QemuError::io(format!("waiting for {name}"), e)),
        }
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    QemuVersion::parse(&out).ok_or_else(|| QemuError::VersionParse {
        program: name,
        output: if status.success() {
            out.trim().to_string()
        } else {
            format!("exit {status}: {}{}", out.trim(), err.trim())
        },
    })
}

/// The first executable `qemu-system-x86_64` on `PATH`.
fn on_path(name: &OsStr) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Find a QEMU >= [`MIN_VERSION`]: `explicit` (from `--qemu`) or `MC_QEMU`,
/// then `PATH`, then the cached root. The error lists every candidate tried
/// and why it was refused, and names the set-up command.
pub fn find_qemu(explicit: Option<&Path>, cache: &CacheDir) -> Result<Qemu, QemuError> {
    let mut tried = Vec::new();
    let env = std::env::var_os("MC_QEMU").filter(|v| !v.is_empty());
    let explicit: Option<(PathBuf, &str)> = match explicit {
        Some(p) => Some((p.to_path_buf(), "--qemu")),
        None => env.map(|v| (PathBuf::from(v), "MC_QEMU")),
    };
    let mut candidates: Vec<(PathBuf, Vec<OsString>, QemuSource, String)> = Vec::new();
    if let Some((p, how)) = explicit {
        let label = format!("{how} {}", p.display());
        if p.is_file() {
            candidates.push((p, Vec::new(), QemuSource::Explicit, label));
        } else {
            warn!("{label}: no such file");
            tried.push(format!("{label}: no such file"));
        }
    }
    match on_path(OsStr::new("qemu-system-x86_64")) {
        Some(p) => {
            let label = format!("PATH: {}", p.display());
            candidates.push((p, Vec::new(), QemuSource::Path, label));
        }
        None => tried.push("PATH: no qemu-system-x86_64".to_string()),
    }
    let root = cache.qemu_root();
    if root.join("usr/bin/qemu-system-x86_64").is_file() {
        let (program, args) = cached_root_invocation(&root);
        let label = format!("cached root {}", root.display());
        candidates.push((program, args, QemuSource::CachedRoot(root), label));
    } else {
        tried.push(format!(
            "cached root: no {}",
            root.join("usr/bin/qemu-system-x86_64").display()
        ));
    }
    for (program, args, source, label) in candidates {
        match probe_version(&program, &args) {
            Ok(v) if v >= MIN_VERSION => {
                info!("QEMU {v}: {label}");
                return Ok(Qemu {
                    program,
                    prefix_args: args,
                    version: v,
                    source,
                });
            }
            Ok(v) => {
                warn!("{label}: QEMU {v} is older than {MIN_VERSION}");
                tried.push(format!("{label}: version {v} < {MIN_VERSION}"));
            }
            Err(e) => {
                warn!("{label}: {e}");
                tried.push(format!("{label}: {e}"));
            }
        }
    }
    Err(QemuError::NotFound { tried })
}

/// The accelerator a guest runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Tcg,
    Kvm,
}

impl Accel {
    /// The `-accel` argument.
    pub fn qemu_name(self) -> &'static str {
        match self {
            Accel::Tcg => "tcg",
            Accel::Kvm => "kvm",
        }
    }
}

impl fmt::Display for Accel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.qemu_name())
    }
}

/// Whether `MC_KVM` asks for KVM (`1`, `yes`, `true`, `on`).
pub fn kvm_requested_by(value: Option<&str>) -> bool {
    matches!(
        value.map(|v| v.trim().to_ascii_lowercase()).as_deref(),
        Some("1" | "yes" | "true" | "on")
    )
}

/// The accelerator to try first. TCG unless `MC_KVM=1` asks for KVM and
/// `/dev/kvm` can be opened read-write: KVM hangs Linux guests on this kind
/// of machine, so the boot treats KVM as a probe and falls back to TCG when
/// the guest is not ready in time (see [`super::boot::boot`]).
pub fn preferred_accel() -> Accel {
    let wanted = kvm_requested_by(std::env::var("MC_KVM").ok().as_deref());
    if !wanted {
        debug!("accelerator: TCG (set MC_KVM=1 to try KVM)");
        return Accel::Tcg;
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        Ok(_) => {
            info!("MC_KVM=1: trying KVM first (falls back to TCG if the guest hangs)");
            Accel::Kvm
        }
        Err(e) => {
            warn!("MC_KVM=1 but /dev/kvm cannot be opened ({e}): using TCG");
            Accel::Tcg
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_debian_backports_version() {
        let out = "QEMU emulator version 11.1.3 (Debian 1:11.1.3+ds-1~bpo13+1)\n\
                   Copyright (c) 2003-2025 Fabrice Bellard and the QEMU Project developers\n";
        assert_eq!(
            QemuVersion::parse(out),
            Some(QemuVersion {
                major: 11,
                minor: 1,
                micro: 3
            })
        );
    }

    #[test]
    fn parses_two_part_and_dev_versions() {
        assert_eq!(
            QemuVersion::parse("QEMU emulator version 10.2\n"),
            Some(QemuVersion {
                major: 10,
                minor: 2,
                micro: 0
            })
        );
        assert_eq!(
            QemuVersion::parse("QEMU emulator version 9.2.90 (v9.2.0-1234-gdeadbeef)"),
            Some(QemuVersion {
                major: 9,
                minor: 2,
                micro: 90
            })
        );
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(QemuVersion::parse(""), None);
        assert_eq!(QemuVersion::parse("qemu 11.1"), None);
        assert_eq!(QemuVersion::parse("QEMU emulator version eleven"), None);
        assert_eq!(QemuVersion::parse("QEMU emulator version 11"), None);
        assert_eq!(QemuVersion::parse("QEMU emulator version 11.x.1"), None);
    }

    #[test]
    fn minimum_version_ordering() {
        let v = |s: &str| QemuVersion::parse(&format!("QEMU emulator version {s}")).unwrap();
        assert!(v("10.1.9") < MIN_VERSION);
        assert!(v("10.0.2") < MIN_VERSION);
        assert!(v("7.2.0") < MIN_VERSION);
        assert!(v("10.2.0") >= MIN_VERSION);
        assert!(v("11.1.3") >= MIN_VERSION);
    }

    #[test]
    fn cached_root_runs_through_its_loader() {
        let (prog, args) = cached_root_invocation(Path::new("/c/root"));
        assert_eq!(prog, PathBuf::from("/c/root/lib64/ld-linux-x86-64.so.2"));
        let args: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "--library-path",
                "/c/root/usr/lib/x86_64-linux-gnu:/c/root/lib/x86_64-linux-gnu",
                "/c/root/usr/bin/qemu-system-x86_64",
                "-L",
                "/c/root/usr/share/qemu",
                "-L",
                "/c/root/usr/share/seabios",
            ]
        );
    }

    #[test]
    fn kvm_only_when_asked() {
        assert!(!kvm_requested_by(None));
        assert!(!kvm_requested_by(Some("0")));
        assert!(!kvm_requested_by(Some("")));
        assert!(kvm_requested_by(Some("1")));
        assert!(kvm_requested_by(Some("yes")));
    }

    #[test]
    fn missing_explicit_qemu_is_reported_not_panicked() {
        let cache = CacheDir(PathBuf::from("/nonexistent/mc-emu-cache"));
        match find_qemu(Some(Path::new("/nonexistent/qemu")), &cache) {
            // A QEMU on PATH may still be found; either way, no panic.
            Ok(q) => assert_ne!(q.source, QemuSource::Explicit),
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("--qemu /nonexistent/qemu: no such file"),
                    "{msg}"
                );
                assert!(msg.contains("scripts/setup.sh"), "{msg}");
            }
        }
    }

    #[test]
    fn unparsable_version_is_an_error() {
        // /bin/echo prints "-version": not a QEMU.
        let e = probe_version(Path::new("/bin/echo"), &[]).unwrap_err();
        assert!(matches!(e, QemuError::VersionParse { .. }), "{e}");
    }
}
