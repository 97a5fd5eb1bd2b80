//! Workspace artefacts the tests run (the `mc-host` and `mc-guest`
//! binaries, the C libraries libimc, libump, libcsm and the libfabric
//! provider), built with the test's own profile by `cargo build` once per
//! test process.
//!
//! Always built, never only when missing: cargo is a no-op when they are
//! fresh, and a binary left from an older checkout (an mc-guest of an older
//! ABI, say) would otherwise fail every test that runs it. `cargo test`
//! releases its build lock before it runs the test executables, so the
//! nested `cargo build` does not wait on it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// `target/<profile>/` of the running test (`target/<profile>/deps/<test>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf()
}

/// The cargo profile whose output lands in `profile_dir` (`debug` is the
/// `dev` profile's directory).
fn profile_name(profile_dir: &Path) -> String {
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".into(),
        Some(name) => name.into(),
    }
}

/// Run `cargo build --profile <the test's> ARGS` once per test process
/// (later calls with the same `args` return at once) and return the profile
/// directory the artefacts are in. Panics, with cargo's last words, when
/// the build fails.
pub fn cargo_build(args: &[&str]) -> PathBuf {
    // One build at a time: concurrent ones would only queue on cargo's lock.
    static DONE: Mutex<BTreeMap<String, Result<(), String>>> = Mutex::new(BTreeMap::new());
    let dir = profile_dir();
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    let result = done
        .entry(args.join(" "))
        .or_insert_with(|| run_cargo_build(&dir, args))
        .clone();
    drop(done);
    if let Err(why) = result {
        panic!("{why}");
    }
    dir
}

fn run_cargo_build(profile_dir: &Path, args: &[&str]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let profile = profile_name(profile_dir);
    let shown = format!("cargo build --profile {profile} {}", args.join(" "));
    let out = Command::new(&cargo)
        .args(["build", "--profile", &profile])
        .args(args)
        .current_dir(workspace())
        .output()
        .map_err(|e| format!("could not run `{shown}` ({cargo}): {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    let tail = lines[lines.len().saturating_sub(60)..].join("\n");
    Err(format!(
        "`{shown}` failed ({}), so the test cannot run what it needs:\n{tail}",
        out.status
    ))
}

/// The profile directory holding package `package`'s library (libimc.a,
/// libump.a, libcsm.a, libmc_fi.so), built first.
pub fn library_dir(package: &str) -> PathBuf {
    cargo_build(&["-p", package])
}

/// Path of workspace binary `name`, built first with the test's profile.
/// `mc-host` and `mc-guest` are built together, since mc-host runs the
/// mc-guest beside it.
pub fn binary(name: &str) -> PathBuf {
    let dir = match name {
        "mc-host" | "mc-guest" => {
            cargo_build(&["--workspace", "--bin", "mc-host", "--bin", "mc-guest"])
        }
        other => cargo_build(&["--workspace", "--bin", other]),
    };
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "cargo built {name} but {} is not there",
        path.display()
    );
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_build_names_the_command_and_says_why() {
        let why = run_cargo_build(&profile_dir(), &["-p", "no-such-package-here"])
            .expect_err("a build of a package that does not exist fails");
        assert!(
            why.contains("cargo build --profile dev -p no-such-package-here"),
            "{why}"
        );
        assert!(why.contains("did not match any packages"), "{why}");
    }

    #[test]
    fn the_profile_follows_the_directory() {
        assert_eq!(profile_name(Path::new("target/debug")), "dev");
        assert_eq!(profile_name(Path::new("target/release")), "release");
        assert_eq!(profile_name(Path::new("target/bench-lto")), "bench-lto");
    }
}
