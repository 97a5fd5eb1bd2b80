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
