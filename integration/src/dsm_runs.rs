//! What the tests of DSM protocols other than Cashmere share
//! (`dsm_protocols.rs`, `hlrc.rs`): the shapes they run, an ANL-macro C
//! program built for libcsm and with the pthreads macros, and the line
//! that a C program's result is compared by.

use std::path::Path;

use crate::build;
use crate::c_program::{self, mc_cc, tool};

/// Delivery options of every shape: eager, and skewed with `seed`.
pub fn deliveries(seed: u64) -> [Vec<String>; 2] {
    [
        vec![],
        vec![
            "--delivery".to_string(),
            "skewed".to_string(),
            "--seed".to_string(),
            seed.to_string(),
        ],
    ]
}

/// (nodes, delivery options) on 2 and 4 nodes, eager and skewed.
pub fn shapes(seed: u64) -> Vec<(u32, Vec<String>)> {
    let [e2, s2] = deliveries(seed);
    let [e4, s4] = deliveries(seed + 1);
    vec![(2, e2), (2, s2), (4, e4), (4, s4)]
}

/// Every node's counters line (`csm stats node N: ...`).
pub fn stats_line(text: &str, node: u32) -> &str {
    let tag = format!("[node{node}] csm stats node {node}: ");
    text.lines()
        .find_map(|l| l.strip_prefix(&tag))
        .unwrap_or_else(|| panic!("node {node} printed no counters:\n{text}"))
}

/// Build `integration/c/anl/NAME.C` for libcsm and with the pthreads
/// macros into `dir`; why not, when a tool is missing.
pub fn build_anl(dir: &Path, name: &str) -> Result<(), String> {
    let cc = c_program::compiler()?;
    tool("m4", "--version")?;
    tool("objcopy", "--version")?;
    tool("objdump", "--version")?;
    let lib = build::library_dir("libcsm");
    let src = c_program::workspace().join(format!("integration/c/anl/{name}.C"));
    mc_cc(&cc, &lib, &[], &dir.join(name), &src)?;
    mc_cc(
        &cc,
        &lib,
        &["--posix"],
        &dir.join(format!("{name}-posix")),
        &src,
    )
}

/// A C program's result line (`NAME: ...`, not its timing).
pub fn result_line(out: &str, name: &str) -> Option<String> {
    let p = format!("{name}: ");
    out.lines()
        .map(|l| l.strip_prefix("[node0] ").unwrap_or(l))
        .find(|l| l.starts_with(&p) && !l.ends_with(" us"))
        .map(str::to_string)
}

/// Run the libcsm build of `name` (in `dir`, from [`build_anl`]) on
/// `nodes` nodes under `CSM_PROTOCOL=protocol` with `args`, and its
/// pthreads build with the same `args`: (the run's success, every node's
/// output as `[nodeN] ` lines, the pthreads build's result line). Each
/// node's output goes to files of its own, as `mc-host run` stops reading
/// its guests' pipes soon after they exit.
pub fn run_anl(
    dir: &Path,
    name: &str,
    nodes: u32,
    host: &[&str],
    protocol: &str,
    args: &[&str],
) -> (bool, String, String) {
    let posix = std::process::Command::new(dir.join(format!("{name}-posix")))
        .args(args)
        .output()
        .expect("run the pthreads build");
    let posix = String::from_utf8_lossy(&posix.stdout).into_owned();
    let want = result_line(&posix, name)
        .unwrap_or_else(|| panic!("the pthreads build printed no result: {posix}"));
    let outs = tempfile::tempdir().expect("temporary directory");
    let cmd = format!(
        "exec env {}={protocol} CSM_STATS=1 '{}' {} > '{o}'/node$MC_NODE.out 2> '{o}'/node$MC_NODE.err",
        firmware_model::abi::dsm::PROTOCOL_ENV,
        dir.join(name).display(),
        args.join(" "),
        o = outs.path().display(),
    );
    let (ok, mut text) = crate::mc_host_run(nodes, 180, host, &["sh", "-c", &cmd]);
    for n in 0..nodes {
        for ext in ["out", "err"] {
            if let Ok(t) = std::fs::read_to_string(outs.path().join(format!("node{n}.{ext}"))) {
                for l in t.lines() {
                    text += &format!("[node{n}] {l}\n");
                }
            }
        }
    }
    (ok, text, want)
}
