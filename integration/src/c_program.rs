//! C programs for the tests of libimc (the TruCluster API in C) and libump
//! (UMP for C): compiled with the system C compiler at test time against
//! `libimc.a` or `libump.a`, built first with the test's own profile, and
//! their headers from the source tree.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::build;
pub use crate::build::workspace;

/// A tool a C build needs (`m4 --version`, ...), or why it is missing.
pub fn tool(name: &str, arg: &str) -> Result<(), String> {
    match Command::new(name).arg(arg).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("`{name} {arg}` failed ({})", o.status)),
        Err(e) => Err(format!("no `{name}`: {e}")),
    }
}

/// Build `src` with `scripts/mc-cc` (`-Wall -Werror` and `args`) against
/// the libcsm in `lib`, into `out`; the compiler's output when it fails.
pub fn mc_cc(cc: &str, lib: &Path, args: &[&str], out: &Path, src: &Path) -> Result<(), String> {
    let o = Command::new(workspace().join("scripts/mc-cc"))
        .env("CC", cc)
        .env("MC_CSM_LIB", lib)
        .args(["-Wall", "-Werror"])
        .args(args)
        .arg("-o")
        .arg(out)
        .arg(src)
        .output()
        .map_err(|e| format!("run scripts/mc-cc: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "mc-cc {} failed:\n{}{}",
            src.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(())
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

/// A C library of the workspace that programs link with: its package,
/// the archive it builds and the include directories of its headers.
pub struct CLibrary {
    pub package: &'static str,
    pub archive: &'static str,
    pub includes: &'static [&'static str],
}

/// libimc, the TruCluster API in C (`<sys/imc.h>`).
pub const LIBIMC: CLibrary = CLibrary {
    package: "libimc",
    archive: "libimc.a",
    includes: &["guest-driver/libimc/include"],
};

/// libump, UMP for C (`ump.h`); it holds libimc too.
pub const LIBUMP: CLibrary = CLibrary {
    package: "libump",
    archive: "libump.a",
    includes: &["guest-driver/libump/include", "guest-driver/libimc/include"],
};

/// The directory holding `libimc.a` for this test's profile, built (or
/// found up to date by cargo) once per test process.
pub fn libimc_dir() -> PathBuf {
    build::library_dir(LIBIMC.package)
}

/// Compile `sources` (paths relative to the workspace) into `out/name`,
/// linked statically with libimc; `extra` are more compiler flags (`-static`
/// for a QEMU guest). Panics with the compiler's output on failure.
pub fn build(cc: &str, sources: &[&str], out: &Path, name: &str, extra: &[&str]) -> PathBuf {
    build_with(&LIBIMC, cc, sources, out, name, extra)
}

/// [`build`], linked with `library` (built first) instead of libimc.
pub fn build_with(
    library: &CLibrary,
    cc: &str,
    sources: &[&str],
    out: &Path,
    name: &str,
    extra: &[&str],
) -> PathBuf {
    let root = workspace();
    let exe = out.join(name);
    let mut cmd = Command::new(cc);
    cmd.args(["-O2", "-Wall", "-Werror", "-pthread"]);
    for include in library.includes {
        cmd.arg("-I").arg(root.join(include));
    }
    cmd.args(sources.iter().map(|s| root.join(s)))
        .arg(build::library_dir(library.package).join(library.archive))
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
