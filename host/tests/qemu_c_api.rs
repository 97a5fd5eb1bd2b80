//! A C program linked with libimc (the TruCluster API in C,
//! guest-driver/libimc) across 2 QEMU guests (TCG), reaching the adapter
//! over PCI: built static with the system `cc`, added to the image with
//! `cluster up --add`, run with `cluster run`. Seed 004's Figure 6 must
//! count both copies on both nodes, and the call suite (every call, its
//! misuse codes, imc_kill through the relay) must pass on both.
//!
//! Skips, and passes, with a message naming `scripts/setup.sh` when no QEMU
//! 10.2 or later, guest kernel or busybox is installed, or when there is no
//! C compiler.

mod common;

use std::path::Path;

use common::{build_static_c, c_skip_reason, RunningCluster};

/// `cc -static` of a C program with libimc, as docs/c-api.md says.
fn build_static(sources: &[&str], out: &Path) {
    build_static_c(
        "libimc",
        "libimc.a",
        &["guest-driver/libimc/include"],
        sources,
        out,
    );
}

#[test]
fn a_c_program_runs_across_two_qemu_guests() {
    if let Some(why) = c_skip_reason() {
        eprintln!("SKIPPED a_c_program_runs_across_two_qemu_guests: {why}");
        return;
    }
    // Short: the sockets' paths must fit in 108 bytes.
    let state = std::env::temp_dir().join(format!("mc-qc-c-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    std::fs::create_dir_all(&state).unwrap();
    let figure6 = state.join("figure6");
    let calls = state.join("calls");
    build_static(&["examples/c/figure6.c"], &figure6);
    build_static(&["guest-driver/libimc/tests/c/calls.c"], &calls);
    let image = state.join("image");
    let cluster = RunningCluster::up(
        &state,
        2,
        &image,
        &[
            "--add",
            figure6.to_str().unwrap(),
            "--add",
            calls.to_str().unwrap(),
        ],
    );

    let (ok, text) = cluster.run(&["figure6"]);
    assert!(ok, "figure6 failed:\n{text}");
    for n in 0..2 {
        let want =
            format!("[node {n}] figure6: node {n} sees 2 processes counted, 2 copies running");
        assert!(text.contains(&want), "{want:?}:\n{text}");
    }
    let ups: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("incremented the process counter to"))
        .collect();
    assert_eq!(ups.len(), 2, "{text}");
    assert!(
        ups.iter().any(|l| l.ends_with(" to 1")) && ups.iter().any(|l| l.ends_with(" to 2")),
        "{text}"
    );

    let (ok, text) = cluster.run(&["calls"]);
    assert!(ok, "calls failed:\n{text}");
    for n in 0..2 {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("[node {n}] calls: "))
                    && l.ends_with(&format!("checks passed on node {n}"))),
            "node {n}:\n{text}"
        );
    }
    assert!(
        text.contains("calls: node 1 got SIGUSR1 from node 0 through the relay"),
        "{text}"
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&state);
}
