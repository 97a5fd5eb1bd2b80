//! A Memory Channel cluster of real QEMU guests (TCG), driven through
//! `mc-host cluster up|run|down`, with mc-guest using the PCI transport.
//!
//! 1. Three guests run `mc-guest selftest` together; each guest's own output
//!    must show node 0's broadcast pattern reaching every node, loopback, the
//!    cluster spinlock protecting a counter incremented by all three, and an
//!    error count of 0.
//!    Point-to-point reaches only its target.
//! 2. Two guests run a Cashmere application (SOR), verified on every node,
//!    then wtest under the message variants (CSM-MS, and CSM-None at 1L
//!    with two protocol nodes per guest): no interrupts reach a user-space
//!    driver over PCI, so these run on the protocol thread's polling.
//! 3. Two guests run `mc-guest bench latency`; the result is printed, not
//!    asserted (TCG on a shared machine says little about the hardware).
//! 4. `cluster up` with no sources to build the guest from (`MC_WORKSPACE`
//!    naming an empty directory) and no guest program recorded stops before
//!    starting anything, with exit status 2 and an error naming
//!    `--guest-binary`.
//!
//! Skips, and passes, with a message naming `scripts/setup.sh` when no QEMU
//! 10.2 or later, guest kernel or busybox is installed. `cluster up` is given
//! no guest program, as in the README's quick start: it builds the static
//! mc-guest from this checkout into `target/static` (unless
//! `MC_TEST_GUEST_BINARY` names one).

mod common;

use std::process::Command;

use common::{qemu_skip_reason, RunningCluster, MC_HOST};

#[test]
fn three_qemu_guests_run_the_selftest_and_two_cashmere_and_the_latency_bench() {
    if let Some(why) = qemu_skip_reason() {
        eprintln!("SKIPPED three_qemu_guests_run_the_selftest_and_two_cashmere_and_the_latency_bench: {why}");
        return;
    }
    // Short: the sockets' paths must fit in 108 bytes.
    let state = std::env::temp_dir().join(format!("mc-qc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    std::fs::create_dir_all(&state).unwrap();
    let image = state.join("image");

    {
        let c = RunningCluster::up(&state, 3, &image, &[]);
        let (ok, out) = c.run(&["mc-guest", "selftest"]);
        assert!(ok, "selftest failed on some node:\n{out}");
        for n in 0..3 {
            let p = format!("[node {n}] ");
            let has = |s: &str| out.lines().any(|l| l.starts_with(&p) && l.contains(s));
            for want in [
                "ok   host list: 3 members",
                "ok   broadcast + coherent late attach: 16 KiB written by node 0 before any receive attach, read on every node",
                "ok   loopback: a write with loopback reaches its writer, one without does not",
                "ok   point-to-point: node 0 -> node 2 only",
                "ok   spinlock mutual exclusion: 200 increments under the lock",
                "ok   shared counter adds up: 600 = 200 x 3",
                "ok   save count, write, check: error count 0 before and after, every adapter healthy",
                &format!("selftest: 9 checks passed on node {n}"),
            ] {
                assert!(has(want), "node {n} did not print {want:?}:\n{out}");
            }
        }
        assert!(
            out.contains("exit status: node 0: 0, node 1: 0, node 2: 0"),
            "{out}"
        );
    }
    {
        let c = RunningCluster::up(&state, 2, &image, &[]);
        let (ok, out) = c.run(&["mc-guest", "csm", "sor"]);
        assert!(ok, "Cashmere SOR failed on some node:\n{out}");
        for n in 0..2 {
            assert!(
                out.lines().any(
                    |l| l.starts_with(&format!("[node {n}] csm sor")) && l.contains("verified")
                ),
                "node {n} did not verify SOR:\n{out}"
            );
        }
        for (variant, levels, threads) in [("ms", "2", "1"), ("none", "1", "2")] {
            let (ok, out) = c.run(&[
                "mc-guest",
                "csm",
                "wtest",
                "--variant",
                variant,
                "--levels",
                levels,
                "--threads",
                threads,
                "--size",
                "64",
                "--iters",
                "2",
            ]);
            assert!(ok, "wtest under {variant} failed on some node:\n{out}");
            for n in 0..2 {
                assert!(
                    out.lines()
                        .any(|l| l.starts_with(&format!("[node {n}] csm wtest"))
                            && l.contains("verified")),
                    "node {n} did not verify wtest under {variant}:\n{out}"
                );
            }
        }
        let (ok, out) = c.run(&["mc-guest", "bench", "latency", "--iters", "300"]);
        println!("mc-guest bench latency, 2 QEMU guests under TCG:\n{out}");
        assert!(ok, "bench failed:\n{out}");
    }
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn cluster_up_away_from_the_sources_says_what_to_pass() {
    if let Some(why) = qemu_skip_reason() {
        eprintln!("SKIPPED cluster_up_away_from_the_sources_says_what_to_pass: {why}");
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    let state = empty.path().join("state");
    let out = Command::new(MC_HOST)
        .env("MC_WORKSPACE", empty.path())
        .arg("cluster")
        .arg("--state-dir")
        .arg(&state)
        .args(["up", "--nodes", "2", "--image-dir"])
        .arg(empty.path().join("image"))
        .output()
        .expect("running mc-host");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for want in [
        "no static mc-guest: MC_WORKSPACE",
        "no Cargo.toml there",
        "give --guest-binary PATH",
        "set MC_WORKSPACE=DIR",
    ] {
        assert!(stderr.contains(want), "{want:?} missing from:\n{stderr}");
    }
    // Nothing was started.
    assert!(!state.join("backend.pid").exists());
}
