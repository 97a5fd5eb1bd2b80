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
