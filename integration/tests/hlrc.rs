//! HLRC (seed 001, issue 40, docs/hlrc.md) on the emulated adapter:
//! `mc-guest csm APP --protocol hlrc` and an ANL-macro C program under
//! `CSM_PROTOCOL=hlrc`, one application thread per node as in seed 001,
//! on 2 and 4 nodes, eager and skewed delivery; every result verified.
//! The protocol's engine is tested alone on a simulated network in
//! `guest-driver/hlrc/tests/simulated.rs`.

use integration::dsm_runs::{build_anl, result_line, run_anl, shapes, stats_line};
use integration::mc_host_run;

/// `mc-guest csm ARGS --protocol hlrc` on every shape: every node
/// verifies, and its counters show HLRC moved pages and diffs.
fn hlrc_app(args: &[&str], seed: u64) {
    hlrc_app_as("hlrc", args, seed);
}

fn hlrc_app_as(protocol: &str, args: &[&str], seed: u64) {
    for (nodes, host) in shapes(seed) {
        let host: Vec<&str> = host.iter().map(String::as_str).collect();
        let mut g = vec!["mc-guest", "csm"];
        g.extend_from_slice(args);
        g.extend_from_slice(&["--protocol", protocol]);
        let (ok, text) = mc_host_run(nodes, 240, &host, &g);
        let what = format!("{args:?} on {nodes} nodes ({host:?})");
        assert!(ok, "{what} failed:\n{text}");
        for n in 0..nodes {
            assert!(
                text.contains(&format!("on node {n}\n")) && text.contains("verified"),
                "{what}: node {n} did not verify:\n{text}"
            );
        }
        let moved: u64 = (0..nodes)
            .map(|n| {
                let s = stats_line(&text, n);
                let t = s
                    .split("page transfers ")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|v| v.parse::<u64>().ok());
                t.unwrap_or_else(|| panic!("{what}: node {n}'s counters: {s}"))
            })
            .sum();
        assert!(moved > 0, "{what}: no page moved between nodes:\n{text}");
    }
}

#[test]
fn hlrc_runs_wtest_on_2_and_4_nodes_eager_and_skewed() {
    hlrc_app(&["wtest"], 41);
}

#[test]
fn hlrc_keeps_every_byte_of_sub_word_writes() {
    hlrc_app(&["subword"], 43);
}

#[test]
fn hlrc_runs_applications_with_locks_barriers_and_flags() {
    // SOR: barriers; Gauss: flags; water-nsquared: locks.
    for app in ["sor", "gauss", "water-nsquared"] {
        hlrc_app(&[app, "--preset", "small"], 47);
    }
}

/// Seed 001 s.6's what-if: barriers that broadcast their write notices
/// (one store to every node, read from the barrier board) keep every
/// result, with nodes a barrier apart under skewed delivery.
#[test]
fn hlrc_with_broadcast_barriers_verifies_eager_and_skewed() {
    for app in ["wtest", "sor"] {
        let args: &[&str] = if app == "sor" {
            &[app, "--preset", "small"]
        } else {
            &[app]
        };
        hlrc_app_as("hlrc-broadcast", args, 53);
    }
}

#[test]
fn hlrc_refuses_several_threads_a_node_saying_why() {
    let (ok, text) = mc_host_run(
        2,
        60,
        &[],
        &[
            "mc-guest",
            "csm",
            "wtest",
            "--threads",
            "2",
            "--protocol",
            "hlrc",
        ],
    );
    assert!(!ok, "HLRC ran two threads a node:\n{text}");
    assert!(
        text.contains("HLRC runs one per node, as seed 001 does"),
        "{text}"
    );
}

#[test]
fn hlrc_runs_an_anl_c_program_as_its_pthreads_build_does() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let name = "subword";
    if let Err(why) = build_anl(dir.path(), name) {
        eprintln!("SKIPPED: {why}");
        return;
    }
    for (nodes, host) in shapes(53) {
        let procs = nodes.to_string();
        let args = ["-p", procs.as_str(), "-n", "6000", "-r", "2"];
        let host: Vec<&str> = host.iter().map(String::as_str).collect();
        let (ok, text, want) = run_anl(dir.path(), name, nodes, &host, "hlrc", &args);
        let what = format!("{name} on {nodes} nodes ({host:?})");
        assert!(ok, "{what} failed:\n{text}");
        let got = result_line(&text, name).unwrap_or_else(|| panic!("{what}: no result:\n{text}"));
        assert_eq!(
            got, want,
            "{what}: the pthreads build printed\n{want}\n{text}"
        );
        assert!(
            text.contains("protocol hlrc:"),
            "{what}: not on HLRC:\n{text}"
        );
    }
}

/// Without `--reliable` nothing retransmits: under drops HLRC either
/// verifies (nothing it needed was lost) or stops within seconds naming
/// the lost message and the remedy; it never reports a wrong value (the
/// program's verification would say "sequential run has"). With `--reliable` the
/// API repairs what is corrupted and the run verifies.
#[test]
fn hlrc_under_losses_fails_naming_them_or_verifies_and_with_reliable_verifies() {
    let dir = tempfile::tempdir().expect("temporary directory");
    for seed in [7, 8] {
        let plan = dir.path().join(format!("drop{seed}.toml"));
        std::fs::write(
            &plan,
            format!("seed = {seed}\n[[fault]]\nat = \"400ms\"\ndo = \"drop 1% everywhere\"\n"),
        )
        .expect("write the plan");
        let plan = plan.to_str().expect("a UTF-8 temporary path");
        let start = std::time::Instant::now();
        let (ok, text) = mc_host_run(
            4,
            120,
            &["--fault-plan", plan],
            &[
                "mc-guest",
                "csm",
                "sor",
                "--size",
                "128",
                "--iters",
                "2000",
                "--protocol",
                "hlrc",
            ],
        );
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "took {:?}:\n{text}",
            start.elapsed()
        );
        assert!(
            !text.contains("sequential run has"),
            "a wrong value:\n{text}"
        );
        if !ok {
            assert!(
                text.contains("--reliable") || text.contains("lost on the network"),
                "seed {seed}: failed without naming the loss:\n{text}"
            );
        }
    }
    let plan = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/sor-fault-plan.toml"
    );
    let (ok, text) = mc_host_run(
        4,
        180,
        &["--fault-plan", plan],
        &[
            "mc-guest",
            "--reliable",
            "csm",
            "sor",
            "--preset",
            "small",
            "--protocol",
            "hlrc",
        ],
    );
    assert!(ok && text.matches("verified").count() == 4, "{text}");
}
