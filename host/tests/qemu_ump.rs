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

use common::{build_static_c, c_skip_reason, RunningCluster};

#[test]
fn a_ump_program_runs_across_two_qemu_guests() {
    if let Some(why) = c_skip_reason() {
        eprintln!("SKIPPED a_ump_program_runs_across_two_qemu_guests: {why}");
        return;
    }
    // Short: the sockets' paths must fit in 108 bytes.
    let state = std::env::temp_dir().join(format!("mc-qc-u-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    std::fs::create_dir_all(&state).unwrap();
    // Not `echo`: the guest's busybox has an applet of that name first on PATH.
    let echo = state.join("ump_echo");
    build_static_c(
        "libump",
        "libump.a",
        &["guest-driver/libump/include", "guest-driver/libimc/include"],
        &["guest-driver/libump/tests/c/echo.c"],
        &echo,
    );
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
