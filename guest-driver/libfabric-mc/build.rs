//! Compiles the provider's C surface (src/fi_mc.c) against libfabric's
//! public headers. Without them (libfabric-dev not installed) the crate
//! builds without the C surface and says so: the Rust side still builds
//! and tests, and the MPI tests skip saying why.
//!
//! Every path probed is declared to cargo (`rerun-if-changed`), so the
//! probe is never stale: while the header is missing this script runs on
//! every build (below), so the first build after `scripts/setup-mpi.sh`
//! compiles the C surface, whatever was built before it; once found, the
//! header is declared, and its removal reruns the probe (docs/mpi.md,
//! Building).
//!
//! `MC_LIBFABRIC_INCLUDE`, a directory holding `rdma/fabric.h`, replaces
//! the system's include directories for a libfabric installed elsewhere.

use std::path::PathBuf;

/// Where the compiler finds libfabric's headers when nothing else is said.
const SYSTEM_INCLUDE: [&str; 2] = ["/usr/include", "/usr/local/include"];

/// The header whose presence decides whether the C surface is built.
const HEADER: &str = "rdma/fabric.h";

fn main() {
    println!("cargo:rerun-if-changed=src/fi_mc.c");
    println!("cargo:rerun-if-env-changed=MC_LIBFABRIC_INCLUDE");
    println!("cargo:rustc-check-cfg=cfg(mc_fi_c)");
    let given = std::env::var_os("MC_LIBFABRIC_INCLUDE")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    let dirs: Vec<PathBuf> = match &given {
        Some(dir) => vec![dir.clone()],
        None => SYSTEM_INCLUDE.iter().map(PathBuf::from).collect(),
    };
    let candidates: Vec<PathBuf> = dirs.iter().map(|d| d.join(HEADER)).collect();
    let Some(header) = candidates.iter().find(|p| p.is_file()) else {
        // Cargo reruns a build script while a path it declared is missing,
        // and otherwise only when one is newer than the script's last run.
        // A header that appears is not newer: dpkg gives the files it
        // installs the package's own time. So a path this script never
        // creates is declared beside the headers: the probe runs again on
        // every build until it finds them, and stops once it has.
        for path in &candidates {
            println!("cargo:rerun-if-changed={}", path.display());
        }
        let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        println!(
            "cargo:rerun-if-changed={}",
            out.join("probe-again-libfabric-headers-missing").display()
        );
        let looked: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        println!(
            "cargo:warning=libfabric's headers are missing ({}): libmc_fi.so is built without its provider entry point, and `mc-host mpirun` refuses it; `scripts/setup-mpi.sh && cargo build --release -p libfabric-mc` builds it with one",
            looked.join(", ")
        );
        return;
    };
    // Found: a change to it (libfabric-dev upgraded or removed) reruns this.
    println!("cargo:rerun-if-changed={}", header.display());
    let mut c = cc::Build::new();
    c.file("src/fi_mc.c")
        .flag_if_supported("-Wall")
        .flag_if_supported("-Wextra")
        .flag_if_supported("-Wno-unused-parameter");
    if let Some(dir) = &given {
        c.include(dir);
    }
    c.compile("fi_mc");
    println!("cargo:rustc-link-lib=dylib=fabric");
    println!("cargo:rustc-cfg=mc_fi_c");
}
