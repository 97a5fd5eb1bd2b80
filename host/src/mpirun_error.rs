//! Why `mc-host mpirun` cannot run an MPI program, apart from the cluster's
//! own failures: Open MPI or this project's provider is missing or unusable,
//! or mpirun itself failed. Kept apart from `mpirun` so that `cli_error`,
//! which wraps it, does not depend on the command that returns `CliError`.

use std::path::{Path, PathBuf};

/// The provider's file as cargo builds it, and the name libfabric loads.
pub const PROVIDER_BUILT: &str = "libmc_fi.so";
pub const PROVIDER_LOADED: &str = "libmc-fi.so";

/// What is missing to run MPI programs.
#[derive(Debug, thiserror::Error)]
pub enum MpirunError {
    #[error("Open MPI's mpirun is not installed (on Debian: apt-get install openmpi-bin libopenmpi-dev libfabric1, or scripts/setup-mpi.sh)")]
    NoOpenMpi,
    #[error("the provider library {PROVIDER_BUILT} is not next to mc-host nor at MC_FI_LIB (build it: cargo build -p libfabric-mc; it needs libfabric-dev)")]
    NoProvider,
    #[error("{} has no libfabric entry point: it was built without libfabric's headers; `{}` installs them and rebuilds it", path.display(), rebuild_command(path))]
    ProviderWithoutEntry { path: PathBuf },
    #[error("libfabric does not load the mc provider from {}: {why}", path.display())]
    NotLoaded { path: PathBuf, why: String },
    #[error("cannot prepare the provider directory")]
    ProviderDir(#[source] std::io::Error),
    #[error("cannot start {}", program.display())]
    Start {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("mpirun exited with status {0}")]
    Exit(i32),
    #[error("mpirun was killed by signal {0}")]
    Signal(i32),
}

/// The command that installs libfabric's headers and rebuilds the provider
/// at `lib` with them: a debug build for a library in a `debug/` directory
/// (where cargo puts one), else a release build. The provider's build
/// script probes for the headers on every build until it finds them, so
/// this one rebuild is enough.
fn rebuild_command(lib: &Path) -> String {
    let debug = lib.parent().and_then(Path::file_name) == Some("debug".as_ref());
    let flag = if debug { "" } else { " --release" };
    format!("scripts/setup-mpi.sh && cargo build{flag} -p libfabric-mc")
}
