//! A second protocol on the DSM core (issue 38, docs/dsm.md): the naive
//! protocol (`dsm-naive`: every page at node 0, every copy dropped at an
//! acquire) runs the seed's wtest and the sub-word test through
//! `mc-guest csm --protocol naive`, and an ANL-macro C program through
//! libcsm's `CSM_PROTOCOL=naive`, on 2 and 4 nodes with 2 threads each, in
//! eager and skewed delivery, and every result is verified (the C program's
//! against its pthreads build, bit for bit). Cashmere's own tests are
//! `cashmere.rs` and `c_anl.rs`.
//!
//! The C program is skipped, saying so, without a C compiler, m4 or
//! objcopy.

use integration::dsm_runs::{build_anl, result_line, run_anl, shapes, stats_line};
use integration::mc_host_run;

/// `mc-guest csm APP --threads 2 --protocol naive` on every shape: every
/// node verifies its values, and its counters are the naive protocol's
/// (no write notices, copies dropped at acquires; node 0 answers every
/// fetch).
fn naive_app(app: &str, seed: u64) {
    for (nodes, host) in shapes(seed) {
        let host: Vec<&str> = host.iter().map(String::as_str).collect();
        let args = [
            "mc-guest",
            "csm",
            app,
            "--threads",
            "2",
            "--protocol",
            "naive",
        ];
        let (ok, text) = mc_host_run(nodes, 240, &host, &args);
        let what = format!("{app} on {nodes} x 2 ({host:?})");
        assert!(ok, "{what} failed:\n{text}");
        assert_eq!(
            text.matches("verified").count(),
            nodes as usize,
            "{what}:\n{text}"
        );
        for n in 0..nodes {
            assert!(
                text.contains(&format!("on node {n}\n")),
                "{what}: node {n} did not verify:\n{text}"
            );
            let s = stats_line(&text, n);
            assert!(
                s.contains("write notices sent/received 0/0,"),
                "{what}: node {n} is not on the naive protocol: {s}"
            );
            assert!(
                !s.contains("invalidations 0,"),
                "{what}: node {n} dropped no copies: {s}"
            );
        }
    }
}

#[test]
fn the_naive_protocol_runs_wtest_on_2_and_4_nodes_eager_and_skewed() {
    naive_app("wtest", 11);
}

#[test]
fn the_naive_protocol_keeps_every_byte_of_sub_word_writes() {
    naive_app("subword", 21);
}

#[test]
fn an_unknown_protocol_is_refused_naming_the_known_ones() {
    let (ok, text) = mc_host_run(
        2,
        60,
        &[],
        &["mc-guest", "csm", "wtest", "--protocol", "treadmarks"],
    );
    assert!(!ok, "an unknown protocol ran:\n{text}");
    // Every protocol dsm-select knows, by its own list (a new one joins it).
    let known = format!(
        "no DSM protocol is called \"treadmarks\" (one of {})",
        dsm_select::ProtocolName::names()
    );
    assert!(text.contains(&known), "{text}");
    assert!(known.contains("cashmere, naive, hlrc"), "{known}");
}

#[test]
fn the_naive_protocol_runs_an_anl_c_program_as_its_pthreads_build_does() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let name = "subword";
    if let Err(why) = build_anl(dir.path(), name) {
        eprintln!("SKIPPED: {why}");
        return;
    }
    for (nodes, host) in shapes(31) {
        let procs = (nodes * 2).to_string();
        let args = ["-p", procs.as_str(), "-n", "6000", "-r", "2"];
        let mut opts = vec!["--threads", "2"];
        opts.extend(host.iter().map(String::as_str));
        let (ok, text, want) = run_anl(dir.path(), name, nodes, &opts, "naive", &args);
        let what = format!("{name} on {nodes} x 2 ({host:?})");
        assert!(ok, "{what} failed:\n{text}");
        let got = result_line(&text, name).unwrap_or_else(|| panic!("{what}: no result:\n{text}"));
        assert_eq!(
            got, want,
            "{what}: the pthreads build printed\n{want}\n{text}"
        );
        for n in 0..nodes {
            let tag = format!("[node{n}] csm {name} node {n}: ");
            let s = text
                .lines()
                .find_map(|l| l.strip_prefix(&tag))
                .unwrap_or_else(|| panic!("{what}: node {n} printed no counters:\n{text}"));
            assert!(
                s.contains("protocol naive:") && s.contains("write notices sent/received 0/0,"),
                "{what}: node {n} is not on the naive protocol: {s}"
            );
        }
    }
}
