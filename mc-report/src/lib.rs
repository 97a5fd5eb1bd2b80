//! `mc-host report`: seed 000's tables and charts from runs on the
//! emulator. `report run` runs a matrix of applications, protocol variants
//! and cluster shapes (each run an `mc-host run ... -- mc-guest csm ...
//! --json`), appending one JSON line per run to a results file, resuming
//! where it stopped; `report render` turns a results file into report.md
//! (Tables III and IV) and SVG charts (Figs. 1-6 style).
//!
//! Modules, leaves first: `matrix` (what to run), `paper` (the paper's
//! figures), `run_clock` (which clock the runs keep), `clock` (which clock
//! a report's times are read from and how that is said), `host_info` (this
//! machine), `error`, `progress`, `results` (reading the file back), `runner` (one run, the matrix), `tables`
//! (report.md), `beside_paper` (its Table IV summary beside the paper's), `seed001` (seed 001 Table 5 and
//! HLRC beside Cashmere), `charts` (SVG), `render` (both), `cli` (the subcommand).
//! With the `raster` feature, `raster` turns a chart into pixels (tests).

#![forbid(unsafe_code)]

pub mod beside_paper;
pub mod charts;
pub mod cli;
pub mod clock;
pub mod error;
pub mod host_info;
pub mod matrix;
pub mod paper;
pub mod progress;
#[cfg(feature = "raster")]
pub mod raster;
pub mod render;
pub mod results;
pub mod run_clock;
pub mod runner;
pub mod seed001;
pub mod tables;

pub use cli::{run, RenderArgs, ReportArgs, ReportCommand};
pub use error::ReportError;
pub use matrix::{ClusterShape, MatrixError, RunSpec};
pub use render::{render, Rendered};
pub use results::RunRecord;
