//! The static `mc-guest` a guest image carries: built from this project's
//! sources with cargo, or found, when `mc-host cluster up` is given none.
//!
//! The sources are looked for in `$MC_WORKSPACE`, else in the checkout this
//! `mc-host` was compiled from (its `CARGO_MANIFEST_DIR`'s parent, checked at
//! run time: an installed or copied `mc-host` may outlive it). The binary is
//! built into `<workspace>/target/static`, a target directory of its own so
//! that static linking never invalidates the normal build, with the recipe of
//! [`STATIC_BUILD_COMMAND`]. Cargo is asked every time: it is the one that
//! knows whether the binary is older than its sources, and says so in well
//! under a second when it is not.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Instant, SystemTime};

use log::warn;

use crate::image_record::recorded_guest_binary;
use crate::recipe::{STATIC_BUILD_COMMAND, STATIC_TARGET, STATIC_TARGET_DIR};
use crate::shell::shell_quote;

/// Names the checkout holding the mc-guest sources, overriding the one
/// `mc-host` was compiled from.
pub const WORKSPACE_ENV: &str = "MC_WORKSPACE";

/// The package manifest that marks a checkout of this project.
const GUEST_MANIFEST: &str = "guest-driver/programs/Cargo.toml";

/// Why no static guest program could be had.
#[derive(Debug, thiserror::Error)]
pub enum GuestBuildError {
    #[error(
        "no static mc-guest: {} and the image in {} records none; \
         give --guest-binary PATH (a static mc-guest, built in a checkout with `{STATIC_BUILD_COMMAND}`) \
         or set {WORKSPACE_ENV}=DIR to a checkout of this project",
        tried.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
        image_dir.display()
    )]
    NoSources {
        tried: Vec<SourcesNotFound>,
        image_dir: PathBuf,
    },
    #[error(
        "cannot run cargo ({}) to build the static mc-guest in {}: {cause}; \
         install Rust (https://rustup.rs) or give --guest-binary PATH",
        program.to_string_lossy(),
        workspace.display()
    )]
    // The cause sits before the advice: printed here, so not a `source()`.
    NoCargo {
        program: OsString,
        workspace: PathBuf,
        cause: io::Error,
    },
    #[error(
        "building the static mc-guest failed ({status}); cargo's output is above. \
         The command, in {}: `{command}`",
        workspace.display()
    )]
    BuildFailed {
        status: ExitStatus,
        command: String,
        workspace: PathBuf,
    },
    #[error("cargo finished, but the static mc-guest is not at {}", path.display())]
    NotBuilt { path: PathBuf },
}

/// One place where the sources were looked for, and why it did not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{how} {}: {why}", dir.display())]
pub struct SourcesNotFound {
    /// `MC_WORKSPACE` or "the checkout mc-host was built from".
    pub how: &'static str,
    pub dir: PathBuf,
    pub why: &'static str,
}

/// A checkout of this project holding the mc-guest sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestSources {
    pub root: PathBuf,
    /// The cargo to build with: `$CARGO` (which `cargo run` sets), else
    /// `cargo` from PATH.
    pub cargo: OsString,
}

/// Where this crate's sources were at compile time (`<workspace>/mc-qemu`),
/// compiled into mc-host.
const COMPILED_FROM: &str = env!("CARGO_MANIFEST_DIR");

impl GuestSources {
    /// `$MC_WORKSPACE`, else the checkout mc-host was compiled from.
    pub fn locate() -> Result<GuestSources, Vec<SourcesNotFound>> {
        let env = std::env::var_os(WORKSPACE_ENV).filter(|v| !v.is_empty());
        Self::locate_in(env.map(PathBuf::from), Path::new(COMPILED_FROM).parent())
    }

    /// [`Self::locate`] with its two candidates given: an explicit directory
    /// (from the environment) is the only one tried when present.
    pub fn locate_in(
        explicit: Option<PathBuf>,
        compiled_from: Option<&Path>,
    ) -> Result<GuestSources, Vec<SourcesNotFound>> {
        let (how, dir) = match (explicit, compiled_from) {
            (Some(d), _) => (WORKSPACE_ENV, d),
            (None, Some(d)) => ("the checkout mc-host was built from,", d.to_path_buf()),
            (None, None) => return Err(Vec::new()),
        };
        Self::at(&dir).map_err(|why| vec![SourcesNotFound { how, dir, why }])
    }

    /// The checkout at `root`, if it holds the mc-guest package.
    pub fn at(root: &Path) -> Result<GuestSources, &'static str> {
        if !root.join("Cargo.toml").is_file() {
            return Err("no Cargo.toml there");
        }
        let manifest = fs::read_to_string(root.join(GUEST_MANIFEST))
            .map_err(|_| "no guest-driver/programs/Cargo.toml there")?;
        if !manifest.contains("name = \"mc-guest\"") {
            return Err("guest-driver/programs/Cargo.toml is not the mc-guest package");
        }
        Ok(GuestSources {
            root: root.to_path_buf(),
            cargo: std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
        })
    }

    /// Where the static build puts the binary.
    pub fn static_binary(&self) -> PathBuf {
        self.root
            .join(STATIC_TARGET_DIR)
            .join(STATIC_TARGET)
            .join("release/mc-guest")
    }

    /// The cargo command of the static build.
    pub fn build_command(&self) -> Command {
        let mut cmd = Command::new(&self.cargo);
        cmd.current_dir(&self.root)
            // CARGO_ENCODED_RUSTFLAGS would win over RUSTFLAGS.
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .args(["build", "--release", "-p", "mc-guest", "--bin", "mc-guest"])
            // An explicit --target keeps build scripts and proc-macros
            // dynamically linked.
            .args(["--target", STATIC_TARGET])
            .arg("--target-dir")
            .arg(self.root.join(STATIC_TARGET_DIR));
        cmd
    }

    /// Build the static mc-guest, or find it up to date, and return its
    /// path. Cargo's output goes to stderr; `progress` gets a line before
    /// and after. Without cargo, a binary already built is used (with a
    /// warning that it may be stale).
    pub fn ensure_static_guest(
        &self,
        progress: &mut dyn FnMut(&str),
    ) -> Result<PathBuf, GuestBuildError> {
        let bin = self.static_binary();
        let before = modified(&bin);
        let mut cmd = self.build_command();
        let command = display_command(&cmd);
        progress(&match before {
            Some(_) => format!("static mc-guest: checking it against its sources: {command}"),
            None => format!(
                "static mc-guest: building it (the first build takes a few minutes): {command}"
            ),
        });
        // Keep stdout for mc-host's own report: cargo's goes to stderr too.
        if let Ok(err) = io::stderr().as_fd().try_clone_to_owned() {
            cmd.stdout(Stdio::from(err));
        }
        let start = Instant::now();
        let status = match cmd.status() {
            Ok(s) => s,
            Err(source) if before.is_some() => {
                warn!(
                    "cannot run cargo ({source}): using {} as it is, without checking it against its sources",
                    bin.display()
                );
                return Ok(bin);
            }
            Err(source) => {
                return Err(GuestBuildError::NoCargo {
                    program: cmd.get_program().to_os_string(),
                    workspace: self.root.clone(),
                    cause: source,
                })
            }
        };
        if !status.success() {
            return Err(GuestBuildError::BuildFailed {
                status,
                command,
                workspace: self.root.clone(),
            });
        }
        let after =
            modified(&bin).ok_or_else(|| GuestBuildError::NotBuilt { path: bin.clone() })?;
        progress(&if before == Some(after) {
            format!(
                "static mc-guest: up to date ({:.1} s): {}",
                start.elapsed().as_secs_f64(),
                bin.display()
            )
        } else {
            format!(
                "static mc-guest: built in {:.1} s: {}",
                start.elapsed().as_secs_f64(),
                bin.display()
            )
        });
        Ok(bin)
    }
}

fn modified(p: &Path) -> Option<SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// `cmd` as one shell line, environment first, relative to its directory.
fn display_command(cmd: &Command) -> String {
    let mut words: Vec<String> = cmd
        .get_envs()
        .filter_map(|(k, v)| {
            Some(format!(
                "{}={}",
                k.to_str()?,
                shell_quote(&v?.to_string_lossy())
            ))
        })
        .collect();
    let dir = cmd.get_current_dir();
    words.push(shell_quote(&cmd.get_program().to_string_lossy()));
    for a in cmd.get_args() {
        let a = Path::new(a);
        let a = dir.and_then(|d| a.strip_prefix(d).ok()).unwrap_or(a);
        words.push(shell_quote(&a.to_string_lossy()));
    }
    words.join(" ")
}

/// The guest program for an image in `image_dir` when the user named none:
/// the static build of the sources (built or refreshed now), else, with no
/// sources to build from, the one the image was last built with.
pub fn default_guest_binary(
    image_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, GuestBuildError> {
    match GuestSources::locate() {
        Ok(sources) => sources.ensure_static_guest(progress),
        Err(tried) => match recorded_guest_binary(image_dir) {
            Some(p) => {
                warn!(
                    "no mc-guest sources to build from ({}): using {}, which the image was last built with",
                    tried.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
                    p.display()
                );
                Ok(p)
            }
            None => Err(GuestBuildError::NoSources {
                tried,
                image_dir: image_dir.to_path_buf(),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_checkout(manifest: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("Cargo.toml"), "[workspace]\n").unwrap();
        fs::create_dir_all(d.path().join("guest-driver/programs")).unwrap();
        fs::write(d.path().join(GUEST_MANIFEST), manifest).unwrap();
        d
    }

    #[test]
    fn the_checkout_mc_host_was_built_from_holds_the_guest() {
        let root = Path::new(COMPILED_FROM).parent().unwrap();
        let s = GuestSources::locate_in(None, Some(root)).unwrap();
        assert_eq!(s.root, root);
        assert_eq!(
            s.static_binary(),
            root.join("target/static/x86_64-unknown-linux-gnu/release/mc-guest")
        );
    }

    #[test]
    fn an_explicit_directory_is_the_only_one_tried() {
        let good = fake_checkout("[package]\nname = \"mc-guest\"\n");
        let s = GuestSources::locate_in(Some(good.path().into()), None).unwrap();
        assert_eq!(s.root, good.path());
        let empty = tempfile::tempdir().unwrap();
        let e = GuestSources::locate_in(
            Some(empty.path().into()),
            Some(Path::new(COMPILED_FROM).parent().unwrap()),
        )
        .unwrap_err();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].how, WORKSPACE_ENV);
        assert_eq!(e[0].why, "no Cargo.toml there");
        let other = fake_checkout("[package]\nname = \"something-else\"\n");
        let e = GuestSources::at(other.path()).unwrap_err();
        assert!(e.contains("not the mc-guest package"), "{e}");
    }

    #[test]
    fn no_sources_and_no_recorded_guest_says_what_to_pass() {
        let empty = tempfile::tempdir().unwrap();
        let tried = GuestSources::locate_in(Some(empty.path().into()), None).unwrap_err();
        let e = GuestBuildError::NoSources {
            tried,
            image_dir: empty.path().join("image"),
        };
        let msg = e.to_string();
        assert!(msg.contains("--guest-binary PATH"), "{msg}");
        assert!(msg.contains("MC_WORKSPACE=DIR"), "{msg}");
        assert!(msg.contains(STATIC_BUILD_COMMAND), "{msg}");
        assert!(msg.contains("no Cargo.toml there"), "{msg}");
    }

    #[test]
    fn the_build_command_is_the_static_recipe() {
        let s = GuestSources {
            root: PathBuf::from("/src/mc"),
            cargo: "cargo".into(),
        };
        let cmd = s.build_command();
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/src/mc")));
        let shown = display_command(&cmd);
        assert!(
            shown.starts_with("RUSTFLAGS='-C target-feature=+crt-static' "),
            "{shown}"
        );
        assert!(
            shown.ends_with(
                "build --release -p mc-guest --bin mc-guest --target x86_64-unknown-linux-gnu \
                 --target-dir target/static"
            ),
            "{shown}"
        );
        assert_eq!(shown, STATIC_BUILD_COMMAND, "the recipe quoted in messages");
    }

    fn sources_with_cargo(cargo: &str) -> (tempfile::TempDir, GuestSources) {
        let d = fake_checkout("[package]\nname = \"mc-guest\"\n");
        let s = GuestSources {
            root: d.path().into(),
            cargo: cargo.into(),
        };
        (d, s)
    }

    #[test]
    fn a_missing_cargo_is_named_unless_a_build_is_there() {
        let (_d, s) = sources_with_cargo("/nonexistent/cargo");
        let e = s.ensure_static_guest(&mut |_| {}).unwrap_err();
        assert!(matches!(e, GuestBuildError::NoCargo { .. }), "{e}");
        assert!(e.to_string().contains("install Rust"), "{e}");
        assert!(e.to_string().contains("/nonexistent/cargo"), "{e}");
        assert!(
            std::error::Error::source(&e).is_none(),
            "the cause is printed once"
        );
        // A binary built earlier is used as it is.
        let bin = s.static_binary();
        fs::create_dir_all(bin.parent().unwrap()).unwrap();
        fs::write(&bin, b"built earlier").unwrap();
        assert_eq!(s.ensure_static_guest(&mut |_| {}).unwrap(), bin);
    }

    #[test]
    fn a_failed_build_names_the_command() {
        let (_d, s) = sources_with_cargo("false");
        let e = s.ensure_static_guest(&mut |_| {}).unwrap_err();
        match &e {
            GuestBuildError::BuildFailed {
                status, command, ..
            } => {
                assert!(!status.success());
                assert!(command.contains("--target-dir target/static"), "{command}");
            }
            other => panic!("expected BuildFailed, got {other}"),
        }
    }

    #[test]
    fn a_build_that_leaves_no_binary_is_an_error() {
        let (_d, s) = sources_with_cargo("true");
        let mut lines = Vec::new();
        let e = s
            .ensure_static_guest(&mut |l| lines.push(l.to_string()))
            .unwrap_err();
        assert!(matches!(e, GuestBuildError::NotBuilt { .. }), "{e}");
        assert!(lines[0].contains("building it"), "{lines:?}");
    }
}
