//! The guest programs as whole processes under skewed delivery (`mc-host run
//! --delivery skewed --seed S`, docs/device.md section 19): what passes
//! eagerly (tests/processes.rs) passes with every seed.

use integration::delivery::{exhaustive, host_args, skewed_seeds};
use integration::mc_host_run;

use firmware_model::DeliveryMode;

fn run(nodes: u32, seed: u64, guest: &[&str]) -> String {
    let host = host_args(DeliveryMode::skewed(seed));
    let host: Vec<&str> = host.iter().map(String::as_str).collect();
    let (ok, out) = mc_host_run(nodes, 240, &host, guest);
    assert!(ok, "skewed seed {seed}, {nodes} nodes: {guest:?}\n{out}");
    out
}

#[test]
fn selftest_passes_under_skewed_delivery() {
    for seed in skewed_seeds(&[1]) {
        for nodes in [2, 4] {
            let out = run(nodes, seed, &["mc-guest", "selftest", "--iterations", "50"]);
            for n in 0..nodes {
                assert!(
                    out.contains(&format!("[node{n}] selftest: 9 checks passed on node {n}")),
                    "skewed seed {seed}: {out}"
                );
            }
            assert!(!out.contains("FAIL"), "skewed seed {seed}: {out}");
        }
    }
}

/// The bench waits for what it measures to arrive (latency: the peer saw the
/// word and answered; bandwidth: the receiver saw the end marker), so it
/// runs as well skewed. The streaming rows only in an exhaustive run: in a
/// debug build they take a while skewed.
#[test]
fn bench_runs_under_skewed_delivery() {
    for seed in skewed_seeds(&[2]) {
        let out = run(2, seed, &["mc-guest", "bench", "latency", "--iters", "200"]);
        assert!(
            out.contains("[node0] one-way latency, 8-byte write (median)"),
            "{out}"
        );
        let out = run(
            2,
            seed,
            &["mc-guest", "bench", "errcheck", "--iters", "200"],
        );
        assert!(out.contains("[node0] error check via ACK page"), "{out}");
    }
    if exhaustive() {
        let out = run(3, 1, &["mc-guest", "bench", "--iters", "200"]);
        for row in [
            "streaming, 65536 B writes",
            "broadcast to 2 nodes, 65536 B writes (delivered, total)",
            "lock acquire+release, 3 nodes contending",
        ] {
            assert!(out.contains(row), "{row}: {out}");
        }
    }
}
