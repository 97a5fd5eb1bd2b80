//! libump, UMP for C (guest-driver/libump, `ump.h`), and the TruCluster V5
//! spellings of libimc: C programs compiled with the system `cc` against
//! `libump.a` (which holds libimc too) and run as virtual guests by
//! `mc-host run --nodes N -- ./prog`.
//!
//! Skipped, saying so, when no C compiler runs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use integration::c_program;

/// The directory holding `libump.a` for this test's profile, built once.
fn libump_dir() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test executable");
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("target dir")
                .to_path_buf();
            let release = profile_dir.file_name().is_some_and(|p| p == "release");
            let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cmd.args(["build", "-p", "libump"])
                .current_dir(c_program::workspace());
            if release {
                cmd.arg("--release");
            }
            assert!(cmd.status().expect("cargo build -p libump").success());
            profile_dir
        })
        .clone()
}

/// Compile `source` (relative to the workspace) against ump.h and
/// sys/imc.h, linked with libump.a.
fn build(cc: &str, source: &str, name: &str) -> PathBuf {
    let root = c_program::workspace();
    let dir = libump_dir().join("c-ump-programs");
    std::fs::create_dir_all(&dir).expect("program dir");
    let exe = dir.join(name);
    let o = Command::new(cc)
        .args(["-O2", "-Wall", "-Werror", "-pthread"])
        .arg("-I")
        .arg(root.join("guest-driver/libump/include"))
        .arg("-I")
        .arg(root.join("guest-driver/libimc/include"))
        .arg(root.join(source))
        .arg(libump_dir().join("libump.a"))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("run the C compiler");
    assert!(
        o.status.success(),
        "compiling {name} failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

fn program(test: &str, source: &str, name: &str) -> Option<String> {
    match c_program::compiler() {
        Ok(cc) => Some(build(&cc, source, name).to_string_lossy().into_owned()),
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
    let Some(p) = program("c_echo", "guest-driver/libump/tests/c/echo.c", "echo") else {
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
    let Some(p) = program("c_v5", "guest-driver/libump/tests/c/v5.c", "v5") else {
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
