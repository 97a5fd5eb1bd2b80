//! A UMP program in C (ump.h, guest-driver/libump) across 2 QEMU guests
//! (TCG), reaching the adapter over PCI: built static with the system
//! `cc` against libump.a, added to the image with `cluster up --add`, run
//! with `cluster run`. Node 0's echo server must serve the client on node
//! 1 (Memory Channel) and its own second thread (shared memory), messages
//! up to 1 MiB, blocking and non-blocking, and a multicast.
//!
//! Skips, and passes, with a message naming `scripts/setup.sh` when no QEMU
//! 10.2 or later, guest kernel or busybox is installed, or when there is no
//! C compiler.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{qemu_skip_reason, RunningCluster, MC_HOST};

fn skip_reason() -> Option<String> {
    qemu_skip_reason().or_else(|| {
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        match Command::new(&cc).arg("--version").output() {
            Ok(o) if o.status.success() => None,
            _ => Some(format!("no C compiler `{cc}`")),
        }
    })
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// libump.a of this test's profile, built (or found up to date) by cargo.
fn libump() -> PathBuf {
    let profile = Path::new(MC_HOST).parent().unwrap().to_path_buf();
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["build", "-p", "libump"]).current_dir(workspace());
    if profile.file_name().is_some_and(|p| p == "release") {
        cmd.arg("--release");
    }
    assert!(cmd.status().unwrap().success(), "cargo build -p libump");
    profile.join("libump.a")
}

#[test]
fn a_ump_program_runs_across_two_qemu_guests() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED a_ump_program_runs_across_two_qemu_guests: {why}");
        return;
    }
    // Short: the sockets' paths must fit in 108 bytes.
    let state = std::env::temp_dir().join(format!("mc-qc-u-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    std::fs::create_dir_all(&state).unwrap();
    // Not `echo`: the guest's busybox has an applet of that name first on PATH.
    let echo = state.join("ump_echo");
    let root = workspace();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let o = Command::new(cc)
        .args(["-static", "-s", "-O2", "-Wall", "-pthread", "-I"])
        .arg(root.join("guest-driver/libump/include"))
        .arg("-I")
        .arg(root.join("guest-driver/libimc/include"))
        .arg(root.join("guest-driver/libump/tests/c/echo.c"))
        .arg(libump())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&echo)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let image = state.join("image");
    let cluster = RunningCluster::up(&state, 2, &image, &["--add", echo.to_str().unwrap()]);
    let (ok, text) = cluster.run(&["ump_echo"]);
    assert!(ok, "echo failed:\n{text}");
    assert!(!text.contains("FAIL"), "{text}");
    for n in 0..2 {
        let want = format!("[node {n}] echo: node {n} passed");
        assert!(text.contains(&want), "{want:?}:\n{text}");
    }
    assert!(
        text.contains("echo: server served 12 messages from 2 clients"),
        "{text}"
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&state);
}
