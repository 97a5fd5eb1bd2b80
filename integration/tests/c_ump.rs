//! libump, UMP for C (guest-driver/libump, `ump.h`), and the TruCluster V5
//! spellings of libimc: C programs compiled with the system `cc` against
//! `libump.a` (which holds libimc too) and run as virtual guests by
//! `mc-host run --nodes N -- ./prog`.
//!
//! Skipped, saying so, when no C compiler runs.

use std::path::PathBuf;

use integration::{build, c_program};

/// Compile `source` (relative to the workspace) against ump.h and
/// sys/imc.h, linked with libump.a, into a directory of the calling
/// test's own (removed when dropped): no test runs a file another writes.
fn build(cc: &str, source: &str, name: &str) -> (PathBuf, tempfile::TempDir) {
    let lib = build::library_dir(c_program::LIBUMP.package);
    let dir = tempfile::Builder::new()
        .prefix(&format!("c-ump-{name}-"))
        .tempdir_in(&lib)
        .expect("program dir");
    let exe = c_program::build_with(&c_program::LIBUMP, cc, &[source], dir.path(), name, &[]);
    (exe, dir)
}

/// The program, and the directory it is in, which the test keeps while
/// it runs it; None (the test is skipped) without a C compiler.
fn program(test: &str, source: &str, name: &str) -> Option<(String, tempfile::TempDir)> {
    match c_program::compiler() {
        Ok(cc) => {
            let (exe, dir) = build(&cc, source, name);
            Some((exe.to_string_lossy().into_owned(), dir))
        }
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

/// An echo server on node 0 and clients on every node (one a thread on
/// node 0, over shared memory): every call of ump.h, messages to 1 MiB,
/// blocking and non-blocking, a multicast, and misuse.
#[test]
fn a_c_echo_server_serves_clients_on_every_node() {
    let Some((p, _dir)) = program("c_echo", "guest-driver/libump/tests/c/echo.c", "echo") else {
        return;
    };
    for (nodes, opts) in [
        (3u32, vec![]),
        (2, vec!["--delivery", "skewed", "--seed", "9"]),
    ] {
        let (ok, out) = integration::mc_host_run(nodes, 180, &opts, &[&p]);
        assert!(ok, "{nodes} nodes {opts:?}:\n{out}");
        assert!(!out.contains("FAIL"), "{out}");
        for n in 0..nodes {
            assert!(
                out.contains(&format!("[node{n}] echo: node {n} passed")),
                "node {n}:\n{out}"
            );
        }
        assert!(
            out.contains(&format!(
                "echo: server served {} messages from {nodes} clients",
                6 * nodes
            )),
            "{out}"
        );
    }
}

/// Code written for TruCluster V5 compiles unchanged with
/// `IMC_TRUCLUSTER_V5` and runs on rail 0.
#[test]
fn truecluster_v5_spellings_compile_and_run_on_rail_0() {
    let Some((p, _dir)) = program("c_v5", "guest-driver/libump/tests/c/v5.c", "v5") else {
        return;
    };
    let (ok, out) = integration::mc_host_run(2, 120, &[], &[&p]);
    assert!(ok, "{out}");
    for n in 0..2 {
        assert!(
            out.contains(&format!(
                "[node{n}] v5: node {n}: V5 calls passed on rail 0, other rails refused"
            )),
            "{out}"
        );
    }
}

/// The C bench runs (few round trips: its figures are not checked here,
/// only that every line comes out).
#[test]
fn the_c_bench_prints_every_size_over_both_transports() {
    let Some((p, _dir)) = program(
        "c_bench",
        "guest-driver/libump/bench/ump_bench.c",
        "ump_bench",
    ) else {
        return;
    };
    let (ok, out) = integration::mc_host_run(2, 180, &[], &[&p, "20"]);
    assert!(ok, "{out}");
    for t in ["Memory Channel", "shared memory"] {
        for size in ["      8 B", "1048576 B"] {
            assert!(
                out.contains(&format!("[node0] ump_bench: {t} {size}: one-way")),
                "{t} {size}:\n{out}"
            );
        }
    }
}
