//! The shared heap of a C program on Cashmere is the largest the model
//! allows for the run's variant (docs/c-programs.md, "Heap limits"): a
//! program whose `G_MALLOC`s fit it runs with no setting, and one whose
//! `G_MALLOC`s do not fails at the `G_MALLOC` that goes past it, naming the
//! total asked for, the limit and what sets it. Both sides of the limit,
//! under CSM-DMS (the heap in Memory Channel space, so the cluster's
//! address space bounds it) and CSM-None (the heap in each node's memory:
//! Cashmere's largest heap), with `integration/c/anl/heap.C`, which
//! `G_MALLOC`s `-b BYTES` and touches a few words of it.
//!
//! Skipped, saying so, without a C compiler, m4 or objcopy.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use integration::c_program::tool;
use integration::{build, c_program};

/// `heap.C` built with mc-cc into a directory of this test's own.
struct Program {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn build_heap() -> Result<Program, String> {
    let cc = c_program::compiler()?;
    tool("m4", "--version")?;
    tool("objcopy", "--version")?;
    tool("objdump", "--version")?;
    let lib = build::library_dir("libcsm");
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("heap");
    let src = c_program::workspace().join("integration/c/anl/heap.C");
    c_program::mc_cc(&cc, &lib, &[], &path, &src)?;
    Ok(Program { _dir: dir, path })
}

/// The program, or None (the test is skipped) saying why.
fn built(test: &str) -> Option<Program> {
    match build_heap() {
        Ok(p) => Some(p),
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

/// One run of `heap -p 2 -b BYTES` on 2 nodes with `env`: success, every
/// node's output (read back from files, as `c_anl` does: the last lines
/// of a failing node can come after `mc-host run` stops reading its pipes),
/// and how long it took.
fn run(prog: &Path, host: &[&str], env: &[(&str, &str)], bytes: u64) -> (bool, String, Duration) {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let outs = tempfile::tempdir().expect("temporary directory");
    let mut cmd = String::from("exec env");
    for (k, v) in env {
        cmd += &format!(" {}", quote(&format!("{k}={v}")));
    }
    cmd += &format!(" {} -p 2 -b {bytes}", quote(&prog.to_string_lossy()));
    let o = quote(&outs.path().to_string_lossy());
    cmd += &format!(" > {o}/node$MC_NODE.out 2> {o}/node$MC_NODE.err");
    let t = Instant::now();
    let (ok, mut out) = integration::mc_host_run(2, 120, host, &["sh", "-c", &cmd]);
    let took = t.elapsed();
    for n in 0..2 {
        for ext in ["out", "err"] {
            if let Ok(text) = std::fs::read_to_string(outs.path().join(format!("node{n}.{ext}"))) {
                for l in text.lines() {
                    out += &format!("[node{n}] {l}\n");
                }
            }
        }
    }
    (ok, out, took)
}

/// The run fits: every touched word checked.
fn fits(prog: &Path, host: &[&str], env: &[(&str, &str)], bytes: u64) {
    let (ok, out, _) = run(prog, host, env, bytes);
    assert!(
        ok && out.contains(&format!("heap: fine, {bytes} bytes")),
        "{bytes} bytes ({env:?} {host:?}) should fit:\n{out}"
    );
}

/// The run fails at its first G_MALLOC (before "heap: allocated"), soon,
/// with node 0's message, which is returned.
fn too_big(prog: &Path, host: &[&str], env: &[(&str, &str)], bytes: u64) -> String {
    let (ok, out, took) = run(prog, host, env, bytes);
    assert!(
        !ok,
        "{bytes} bytes ({env:?} {host:?}) should not fit:\n{out}"
    );
    assert!(
        !out.contains("heap: allocated"),
        "the G_MALLOC of {bytes} bytes returned:\n{out}"
    );
    // At once: no waiting, nothing touched (a run that fits takes about a
    // second here); the bound is for a loaded machine.
    assert!(took < Duration::from_secs(30), "{took:?}:\n{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("[node0] csm: node 0: "))
        .unwrap_or_else(|| panic!("no message from node 0:\n{out}"));
    let want = format!("G_MALLOC({bytes}): the program's G_MALLOCs come to {bytes} bytes");
    assert!(line.contains(&want), "{want:?} not in:\n{out}");
    line.to_string()
}

/// The heap's size for G_MALLOC, as the message gives it.
fn limit_in(message: &str) -> u64 {
    let (_, rest) = message
        .split_once("more than the shared heap's ")
        .unwrap_or_else(|| panic!("no limit in {message}"));
    rest.split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no limit in {message}"))
}

/// What the program's one small G_MALLOC after the big one needs besides.
const REST: u64 = 8192;
/// The program: 29.5 GB of G_MALLOCs, of which it touches little.
const HUGE: u64 = 29_500_000_000;

#[test]
fn under_dms_the_heap_is_what_the_memory_channel_space_leaves_on_both_sides() {
    let Some(p) = built("c_heap dms") else {
        return;
    };
    let env = [("CSM_VARIANT", "dms")];
    for (space, mib) in [(None, 512u64), (Some("256M"), 256)] {
        let host: Vec<&str> = space.map_or(vec![], |s| vec!["--address-space", s]);
        let m = too_big(&p.path, &host, &env, HUGE);
        for part in [
            "CSM-DMS keeps the heap in Memory Channel space".to_string(),
            format!("this cluster's space is {mib} MiB"),
            "docs/device.md".to_string(),
        ] {
            assert!(m.contains(&part), "{part:?} not in {m}");
        }
        let limit = limit_in(&m);
        // Most of the space, less the API's arena and Cashmere's metadata.
        assert!(
            limit < mib << 20 && limit > (mib << 20) * 9 / 10,
            "{limit} for {mib} MiB"
        );
        fits(&p.path, &host, &env, limit - REST);
        let m = too_big(&p.path, &host, &env, limit + 1);
        assert_eq!(limit_in(&m), limit, "{m}");
    }
}

#[test]
fn under_none_the_heap_is_cashmeres_largest_on_both_sides() {
    let Some(p) = built("c_heap none") else {
        return;
    };
    let env = [("CSM_VARIANT", "none")];
    let m = too_big(&p.path, &[], &env, HUGE);
    for part in [
        "CSM-NONE keeps the heap in each node's memory, not in Memory Channel space",
        "cashmere::MAX_HEAP_BYTES",
    ] {
        assert!(m.contains(part), "{part:?} not in {m}");
    }
    let limit = limit_in(&m);
    // 1 GiB less the runtime's control block and the program's globals.
    assert!(limit < 1 << 30 && limit > (1 << 30) - (1 << 20), "{limit}");
    fits(&p.path, &[], &env, limit - REST);
    let m = too_big(&p.path, &[], &env, limit + 1);
    assert_eq!(limit_in(&m), limit, "{m}");
}

#[test]
fn csm_heap_mib_may_shrink_the_heap_but_not_pass_the_limit() {
    let Some(p) = built("c_heap setting") else {
        return;
    };
    let m = too_big(&p.path, &[], &[("CSM_HEAP_MIB", "64")], 100 << 20);
    for part in [
        "more than the shared heap's 67108864 bytes for G_MALLOC (CSM_HEAP_MIB=64)",
        "without CSM_HEAP_MIB it would be",
        "CSM-DMS keeps the heap in Memory Channel space",
    ] {
        assert!(m.contains(part), "{part:?} not in {m}");
    }
    fits(&p.path, &[], &[("CSM_HEAP_MIB", "64")], (64 << 20) - REST);
    let (ok, out, _) = run(&p.path, &[], &[("CSM_HEAP_MIB", "1000")], 1 << 20);
    assert!(!ok, "{out}");
    assert!(
        out.contains("CSM_HEAP_MIB=1000 asks for more than the largest shared heap")
            && out.contains("this cluster's space is 512 MiB"),
        "{out}"
    );
}
