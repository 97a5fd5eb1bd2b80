//! What the QEMU cluster tests share: why a test must skip on this machine,
//! `mc-host cluster ...` with its output echoed, and a cluster that goes
//! down when the test ends (also when it panics).

#![allow(dead_code)] // each test file uses its own part of it

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mc_qemu::{find_qemu, CacheDir, GuestInputs};

pub const MC_HOST: &str = env!("CARGO_BIN_EXE_mc-host");

/// Why the QEMU tests cannot run here (no QEMU 10.2 or later, guest kernel
/// or busybox: `scripts/setup.sh` installs them), or None.
pub fn qemu_skip_reason() -> Option<String> {
    let cache = match CacheDir::from_env() {
        Ok(c) => c,
        Err(e) => return Some(e.to_string()),
    };
    if let Err(e) = find_qemu(None, &cache) {
        return Some(e.to_string());
    }
    GuestInputs::from_cache(&cache, None)
        .err()
        .map(|e| e.to_string())
}

/// Why the QEMU tests of C programs cannot run here: [`qemu_skip_reason`],
/// or no C compiler (`$CC`, else `cc`).
pub fn c_skip_reason() -> Option<String> {
    qemu_skip_reason().or_else(|| {
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        match Command::new(&cc).arg("--version").output() {
            Ok(o) if o.status.success() => None,
            _ => Some(format!("no C compiler `{cc}`")),
        }
    })
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The static library `archive` of workspace package `package`, built (or
/// found up to date) by cargo with the profile of this test's mc-host.
fn library(package: &str, archive: &str) -> PathBuf {
    let dir = Path::new(MC_HOST).parent().expect("profile dir");
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(name) => name,
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "--profile", profile, "-p", package])
        .current_dir(workspace())
        .output()
        .expect("run cargo build");
    assert!(
        out.status.success(),
        "cargo build -p {package} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join(archive)
}

/// `cc -static` of C `sources` (relative to the workspace) into `out`,
/// linked with `archive` of workspace package `package` and its headers in
/// `includes`, as a program for the QEMU guests (docs/c-api.md).
pub fn build_static_c(
    package: &str,
    archive: &str,
    includes: &[&str],
    sources: &[&str],
    out: &Path,
) {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let root = workspace();
    let mut cmd = Command::new(cc);
    cmd.args(["-static", "-s", "-O2", "-Wall", "-pthread"]);
    for include in includes {
        cmd.arg("-I").arg(root.join(include));
    }
    let o = cmd
        .args(sources.iter().map(|s| root.join(s)))
        .arg(library(package, archive))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(out)
        .output()
        .expect("run the C compiler");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `MC_TEST_GUEST_BINARY`, if set: a static mc-guest to use instead of the
/// one `cluster up` builds from this checkout.
pub fn given_guest_binary() -> Option<String> {
    std::env::var("MC_TEST_GUEST_BINARY").ok()
}

/// `mc-host cluster --state-dir STATE ARGS`, its output echoed for the log.
pub fn mc_host(state: &Path, args: &[&str]) -> Output {
    let out = Command::new(MC_HOST)
        .arg("cluster")
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .output()
        .expect("running mc-host");
    eprintln!(
        "$ mc-host cluster {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A cluster brought up by `cluster up`; `cluster down` when dropped.
pub struct RunningCluster(pub PathBuf);

impl RunningCluster {
    /// `cluster up --nodes N --image-dir IMAGE` plus `extra` arguments (and
    /// `--guest-binary` when the environment gives one).
    pub fn up(state: &Path, nodes: u32, image: &Path, extra: &[&str]) -> RunningCluster {
        let n = nodes.to_string();
        let mut args = vec!["up", "--nodes", &n, "--image-dir", image.to_str().unwrap()];
        args.extend_from_slice(extra);
        let guest = given_guest_binary();
        if let Some(g) = &guest {
            args.extend(["--guest-binary", g]);
        }
        let out = mc_host(state, &args);
        // Down also when up failed half way.
        let c = RunningCluster(state.to_path_buf());
        assert!(out.status.success(), "cluster up failed");
        c
    }

    /// `cluster run -- CMD`: whether every node succeeded, and the output.
    pub fn run(&self, cmd: &[&str]) -> (bool, String) {
        let mut args = vec!["run", "--"];
        args.extend_from_slice(cmd);
        let out = mc_host(&self.0, &args);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }
}

impl Drop for RunningCluster {
    fn drop(&mut self) {
        let out = mc_host(&self.0, &["down"]);
        assert!(out.status.success() || std::thread::panicking());
    }
}
