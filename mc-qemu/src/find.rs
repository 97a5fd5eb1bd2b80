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

use firmware_model::ErrorChain;
use log::{debug, info, warn};

use crate::cache::CacheDir;
use crate::error::QemuError;
use crate::shell::shell_quote;
use crate::version::{QemuVersion, MIN_VERSION};

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
            .map(|a| shell_quote(&a.to_string_lossy()))
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
                let e = ErrorChain(&e);
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
/// the guest is not ready in time (see `boot::boot`).
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
