//! Why `mc-guest` failed. `main` prints the error and each of its causes
//! once (`firmware_model::ErrorChain`).

use std::path::PathBuf;

use mc_api::{ConnectError, McError};
use mc_driver::OpenError;
use mc_guest::bench::BenchError;
use mc_guest::csm::{self, AppError};
use mc_guest::selftest::SelftestError;

/// Why `mc-guest` failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GuestError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Adapter(#[from] mc_driver::Error),
    #[error(transparent)]
    Api(#[from] McError),
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    Selftest(#[from] SelftestError),
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error(transparent)]
    BenchUmp(#[from] mc_guest::bench_ump::BenchUmpError),
    #[error(transparent)]
    Csm(#[from] AppError),
    #[error("virtual time")]
    Clock(#[from] mc_api::vclock::VclockError),
    #[error(
        "the virtual clock needs a virtual guest (`mc-host run --clock virtual`): a QEMU \
         guest cannot reach the clock board the guests of a predicted-time run share"
    )]
    VirtualClockInQemu,
    #[error(transparent)]
    Gather(#[from] dsm_core::gather::GatherError),
    #[error(transparent)]
    Record(#[from] csm::record::RecordError),
    /// A Cashmere run failed while the network was losing packets and the
    /// API was not reliable: the loss is the likely cause, whatever symptom
    /// the run reported.
    #[error(
        "the network lost or damaged packets during the run (the cluster error count went \
         from {before} to {now}, and without --reliable nothing retransmits them; rerun with \
         --reliable)"
    )]
    LostOnNetwork {
        #[source]
        source: Box<GuestError>,
        before: u64,
        now: u64,
    },
    #[error("home assignment {}", path.display())]
    HomesFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} has no sequential version to time (--sequential-only)")]
    NoSequential(&'static str),
    #[error("home assignment {}", path.display())]
    Homes {
        path: PathBuf,
        #[source]
        source: cashmere::HomesError,
    },
}
