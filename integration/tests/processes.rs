//! Whole virtual clusters as processes: `mc-host run` starts the backend and one
//! `mc-guest` process per node.

use std::process::Command;

use integration::{binary, mc_host_run};

fn run(nodes: u32, args: &[&str]) -> (bool, String) {
    mc_host_run(nodes, 120, &[], args)
}

#[test]
fn selftest_passes_on_two_and_four_virtual_guests() {
    for nodes in [2, 4] {
        let (ok, out) = run(nodes, &["mc-guest", "selftest", "--iterations", "100"]);
        assert!(ok, "{out}");
        for n in 0..nodes {
            assert!(
                out.contains(&format!("[node{n}] selftest: 9 checks passed on node {n}")),
                "{out}"
            );
        }
        assert!(!out.contains("FAIL"), "{out}");
    }
}

#[test]
fn info_reports_each_node() {
    let (ok, out) = run(3, &["mc-guest", "info"]);
    assert!(ok, "{out}");
    for n in 0..3 {
        assert!(
            out.contains(&format!("[node{n}] Memory Channel adapter: node {n} of 3")),
            "{out}"
        );
    }
}

#[test]
fn a_guest_without_a_socket_says_so() {
    let out = Command::new(binary("mc-guest"))
        .arg("info")
        .env_remove("MC_SOCKET")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("MC_SOCKET"), "{err}");
}

#[test]
fn bench_on_one_node_says_what_needs_a_second() {
    let (ok, out) = run(1, &["mc-guest", "bench", "latency"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("bench latency needs a second node") && out.contains("--nodes 2"),
        "{out}"
    );
    // `all` measures what one node can and names what it left out.
    let (ok, out) = run(1, &["mc-guest", "bench", "--iters", "20"]);
    assert!(ok, "{out}");
    assert!(out.contains("[node0] lock acquire, uncontended"), "{out}");
    assert!(
        out.contains("not measured: latency, bandwidth, broadcast: they need a second node"),
        "{out}"
    );
}

/// A guest that fails ends the run soon after for the others too (as mpirun
/// ends a job when a rank fails): the ones still running are stopped
/// `--after-failure` seconds later and reported as such, not left to run
/// until `--timeout`.
#[test]
fn a_failed_guest_stops_the_others_after_the_grace() {
    let start = std::time::Instant::now();
    let (ok, text) = integration::mc_host_run(
        3,
        120,
        &["--after-failure", "1"],
        &[
            "sh",
            "-c",
            "if [ \"$MC_NODE\" = 1 ]; then exit 3; else sleep 100; fi",
        ],
    );
    assert!(!ok, "{text}");
    assert!(
        start.elapsed() < std::time::Duration::from_secs(30),
        "{:?}:\n{text}",
        start.elapsed()
    );
    assert!(text.contains("node1: exit status: 3"), "{text}");
    assert!(
        text.contains("node0: stopped before it finished")
            && text.contains("node2: stopped before it finished"),
        "{text}"
    );
}

/// Whether a process whose command line contains `marker` is running.
fn running(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
            .unwrap_or(false)
    })
}

#[test]
fn guests_do_not_outlive_mc_host() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    // Each guest prints a line a tenth of a second, forever: the run ends
    // only when mc-host stops it. The marker tells this test's guests apart.
    let marker = format!("mc-test-guest-{}", std::process::id());
    let script = format!("while :; do echo {marker}; sleep 0.1; done");
    let start = || {
        Command::new(integration::binary("mc-host"))
            .args([
                "run",
                "--nodes",
                "2",
                "--timeout",
                "120",
                "--",
                "/bin/sh",
                "-c",
            ])
            .arg(&script)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let gone_soon = || {
        let t = std::time::Instant::now();
        while running(&marker) {
            assert!(t.elapsed().as_secs() < 10, "guests still running");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    // Whoever reads mc-host's output goes away (`mc-host run ... | head`):
    // it stops the guests and says why.
    let mut host = start();
    let mut out = BufReader::new(host.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains(&marker), "{line}");
    drop(out);
    let status = host.wait_with_output().unwrap();
    assert!(!status.status.success());
    let err = String::from_utf8_lossy(&status.stderr);
    assert!(err.contains("the output was closed"), "{err}");
    gone_soon();
    // mc-host killed outright: the kernel kills its guests.
    let mut host = start();
    let mut out = BufReader::new(host.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    assert!(running(&marker));
    host.kill().unwrap();
    host.wait().unwrap();
    gone_soon();
}
