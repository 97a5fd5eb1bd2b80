//! Programs on Cashmere (`mc-guest csm APP`): the seed's debugging programs
//! `wtest` and `test`, and the applications of seed 000 Table III (SOR,
//! Gauss, TSP here; Barnes, CLU, LU, EM3D, Ilink, Water-Nsquared and
//! Water-Spatial through `suite`) and seed 001's FFT, Ocean and Radix
//! (also through `suite`), each verified; their presets (`problem`);
//! the JSON record of a run (`record`, on `dsm_core::record` and
//! `dsm_core::gather`); plus the Table II
//! benchmark (`mc-guest bench csm`).
//!
//! The run itself: `app` (the programs by name), `params` (what to run), `run` (running it on this node),
//! `error`; `workload` (the interface of the suite's applications) and
//! `suite` (their registry), `seq_timing` (where a sequential program's
//! timed computation begins, which the applications mark).

mod app;
pub mod barnes;
pub mod bench;
pub mod bench_hlrc;
pub mod blocked_lu;
pub mod clu;
pub mod em3d;
mod error;
pub mod fft;
pub mod gauss;
pub mod ilink;
pub mod lu;
pub mod ocean;
mod params;
pub mod problem;
pub mod radix;
pub mod record;
mod run;
mod seq_timing;
pub mod sor;
pub mod subword;
pub mod suite;
pub mod tsp;
pub mod variant;
pub mod verify;
pub mod water;
pub mod water_nsquared;
pub mod water_spatial;
pub mod workload;
pub mod wtest;

pub use app::App;
/// The protocol variant a run uses (seed 000 Table I), as `--variant`
/// names it and records carry it.
pub use cashmere::CsmVariant;
pub use error::AppError;
pub use params::{clock_for, Params, MAX_TSP_CITIES};
pub use problem::{Preset, Problem};
pub use run::{run, Outcome};
pub use sor::Grid;
pub use workload::{ComputeWindow, Workload};
