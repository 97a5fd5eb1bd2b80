//! The application suite of seed 000 Table III on CSM-DMS, each program
//! checking its result against its own sequential run on every node (see
//! docs/applications.md for each one's method and tolerance), as
//! `mc-host run` processes in eager delivery.
//!
//! By default a representative subset runs (each application once, the
//! configurations spread over 2 and 4 nodes with 1 and 2 threads). With
//! MC_TEST_EXHAUSTIVE=1 every application runs on 2 and 4 nodes with 1 and
//! 2 threads at the small preset.

use integration::mc_host_run;
use mc_guest::csm::App;

/// `mc-host run --nodes N --threads T -- mc-guest csm APP --preset small`;
/// every node must verify its values and report its counters.
fn run_app(nodes: u32, threads: u32, app: &str, extra: &[&str]) -> String {
    let t = threads.to_string();
    let mut guest = vec!["mc-guest", "csm", app, "--threads", &t, "--preset", "small"];
    guest.extend_from_slice(extra);
    let (ok, text) = mc_host_run(nodes, 300, &[], &guest);
    assert!(
        ok,
        "{app} on {nodes} nodes x {threads} threads failed:\n{text}"
    );
    for n in 0..nodes {
        assert!(
            text.contains(&format!("on node {n}\n"))
                && text.contains(&format!("[node{n}] csm stats node {n}: faults")),
            "node {n} did not report for {app}:\n{text}"
        );
    }
    assert_eq!(
        text.matches(": verified ").count(),
        nodes as usize,
        "{text}"
    );
    text
}

fn exhaustive() -> bool {
    std::env::var("MC_TEST_EXHAUSTIVE").is_ok_and(|v| v == "1")
}

#[test]
fn every_application_verifies_at_the_small_preset() {
    if exhaustive() {
        for app in App::SUITE {
            for nodes in [2, 4] {
                for threads in [1, 2] {
                    run_app(nodes, threads, app.name(), &[]);
                }
            }
        }
        return;
    }
    // Each new application once, the four configurations spread over them
    // (SOR, Gauss and TSP have tests of their own in cashmere.rs).
    for (app, nodes, threads) in [
        ("barnes", 2, 2),
        ("clu", 4, 1),
        ("lu", 2, 2),
        ("em3d", 4, 2),
        ("ilink", 2, 1),
        ("water-nsquared", 2, 2),
        ("water-spatial", 4, 1),
    ] {
        run_app(nodes, threads, app, &[]);
    }
}

#[test]
fn lu_with_more_steps_and_4_kib_pages() {
    // A matrix of partial tiles (100 = 6 x 16 + 4) on 4 KiB pages.
    run_app(2, 1, "lu", &["--size", "100", "--page-size", "4096"]);
}

#[test]
fn the_record_of_a_run_has_every_node_and_the_totals() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.jsonl");
    let f = file.to_str().unwrap();
    run_app(2, 2, "em3d", &["--json", f, "--stats"]);
    run_app(2, 1, "em3d", &["--json", f, "--sequential"]);
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "node 0 writes one line per run:\n{text}");
    for (line, threads) in lines.iter().zip([2, 1]) {
        assert!(
            line.starts_with(r#"{"schema":1,"app":"em3d","preset":"small","#),
            "{line}"
        );
        assert!(
            line.contains(&format!(r#""nodes":2,"threads":{threads},"#)),
            "{line}"
        );
        assert!(
            line.contains(r#""variant":"dms","protocol":"cashmere","delivery":"eager","#),
            "{line}"
        );
        assert!(line.contains(r#""counters_until":"compute_end""#), "{line}");
        assert!(line.contains(r#""per_node":[{"read_faults":"#), "{line}");
    }
    assert!(lines[0].contains(r#""sequential_s":null"#), "{}", lines[0]);
    // --stats: the time breakdown (seed 000 Figs. 2-3), per node and total.
    assert!(
        lines[0].contains(r#""breakdown":{"per_node":[{"comm_wait":"#)
            || lines[0].contains(r#""breakdown":{"total":{"#),
        "{}",
        lines[0]
    );
    for part in ["user", "protocol", "comm_wait", "messages"] {
        assert!(lines[0].contains(&format!(r#""{part}":"#)), "{}", lines[0]);
    }
    assert!(!lines[1].contains(r#""breakdown""#), "{}", lines[1]);
    assert!(
        !lines[1].contains(r#""sequential_s":null,"per_node""#),
        "{}",
        lines[1]
    );
}

#[test]
fn tsp_takes_up_to_17_cities() {
    let (ok, text) = mc_host_run(1, 60, &[], &["mc-guest", "csm", "tsp", "--size", "18"]);
    assert!(!ok && text.contains("tsp of 18 cities: 3 to 17"), "{text}");
}

#[test]
fn debugging_programs_have_no_presets() {
    let (ok, text) = mc_host_run(
        1,
        60,
        &[],
        &["mc-guest", "csm", "wtest", "--preset", "paper"],
    );
    assert!(!ok && text.contains("wtest has no presets"), "{text}");
}

/// Sizes no cluster can hold, and shapes a program cannot take, are refused
/// on every node with the reason, before anything is allocated; nothing
/// overflows, panics or leaves a node waiting.
#[test]
fn impossible_sizes_and_shapes_are_refused_with_the_reason() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["sor", "--size", "100000"],
            "MiB of shared heap; a Memory Channel address space holds at most 1024 MiB",
        ),
        (
            &["clu", "--size", "268435456"],
            "MiB of shared heap; a Memory Channel address space holds at most 1024 MiB",
        ),
        (
            &["wtest", "--size", "18446744073709551615"],
            "--size 18446744073709551615 is past any Memory Channel heap",
        ),
        (&["em3d", "--size", "1"], "at least 2 (an E and an H node)"),
        (
            &["wtest", "--threads", "17"],
            "34 processors (2 nodes x 17 threads)",
        ),
        (
            &["sor", "--threads", "65"],
            "65 threads per node: Cashmere runs 1 to 64",
        ),
        (&["wtest", "--heap-kib", "0"], "0 is not in 1..=1048576"),
        // Outputs are checked before the run, not after it.
        (
            &["sor", "--json", "/nonexistent/dir/r.jsonl"],
            "cannot append the run's record to /nonexistent/dir/r.jsonl",
        ),
        (
            &["sor", "--record-homes", "/nonexistent/dir/homes"],
            "its directory does not exist",
        ),
    ];
    for (args, want) in cases {
        let mut guest = vec!["mc-guest", "csm"];
        guest.extend_from_slice(args);
        let (ok, text) = mc_host_run(2, 60, &[], &guest);
        assert!(!ok, "{args:?} ran: {text}");
        assert!(text.contains(want), "{args:?}: wanted {want:?} in {text}");
        assert!(
            !text.contains("panicked") && !text.contains("signal"),
            "{args:?}: {text}"
        );
    }
}
