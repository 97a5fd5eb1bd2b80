//! C programs for the tests of libimc (the TruCluster API in C): compiled
//! with the system C compiler at test time against `libimc.a`, built first
//! with the test's own profile, and `<sys/imc.h>` from the source tree.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The C compiler (`$CC`, else `cc`), if one runs; None says why not.
pub fn compiler() -> Result<String, String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    match Command::new(&cc).arg("--version").output() {
        Ok(o) if o.status.success() => Ok(cc),
        Ok(o) => Err(format!("`{cc} --version` failed ({})", o.status)),
        Err(e) => Err(format!("no C compiler `{cc}`: {e}")),
    }
}

/// The directory holding `libimc.a` for this test's profile, built (or
/// found up to date by cargo) once per test process.
pub fn libimc_dir() -> PathBuf {
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
            cmd.args(["build", "-p", "libimc"]).current_dir(workspace());
            if release {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("run cargo build -p libimc");
            assert!(status.success(), "cargo build -p libimc failed");
            profile_dir
        })
        .clone()
}

/// Compile `sources` (paths relative to the workspace) into `out/name`,
/// linked statically with libimc; `extra` are more compiler flags (`-static`
/// for a QEMU guest). Panics with the compiler's output on failure.
pub fn build(cc: &str, sources: &[&str], out: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let root = workspace();
    let exe = out.join(name);
    let mut cmd = Command::new(cc);
    cmd.args(["-O2", "-Wall", "-Werror", "-pthread"])
        .arg("-I")
        .arg(root.join("guest-driver/libimc/include"))
        .args(sources.iter().map(|s| root.join(s)))
        .arg(libimc_dir().join("libimc.a"))
        .args(["-lpthread", "-ldl", "-lm"])
        .args(extra)
        .arg("-o")
        .arg(&exe);
    let o = cmd.output().expect("run the C compiler");
    assert!(
        o.status.success(),
        "compiling {name} failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}
