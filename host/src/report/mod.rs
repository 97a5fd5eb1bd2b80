//! `mc-host report`: seed 000's tables and charts from runs on the
//! emulator. `report run` runs a matrix of applications, protocol variants
//! and cluster shapes (each run an `mc-host run ... -- mc-guest csm ...
//! --json`), appending one JSON line per run to a results file, resuming
//! where it stopped; `report render` turns a results file into report.md
//! (Tables III and IV) and SVG charts (Figs. 1-6 style).
//!
//! Files: `matrix` (what to run), `host_info` (this machine), `progress`,
//! `runner` (one run, the matrix), `results` (reading the file back),
//! `paper` (the paper's figures), `tables` (report.md), `charts` (SVG).

pub mod charts;
pub mod host_info;
pub mod matrix;
pub mod paper;
pub mod progress;
pub mod results;
pub mod runner;
pub mod tables;

use std::path::PathBuf;

use clap::{Args, Subcommand};

pub use matrix::{ClusterShape, MatrixError, RunSpec};
pub use results::RunRecord;

/// `mc-host report ...`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub command: ReportCommand,
}

#[derive(Subcommand, Debug)]
pub enum ReportCommand {
    /// Run every application x variant x configuration (and one sequential
    /// baseline per application), appending each run's record to the
    /// results file; runs already recorded there are skipped.
    Run(runner::RunMatrixArgs),
    /// Write report.md and the SVG charts from a results file.
    Render(RenderArgs),
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// The results file (JSON lines) `report run` wrote.
    pub results: PathBuf,
    /// Where report.md and the charts go (created if need be).
    #[arg(long)]
    pub out: PathBuf,
}

/// Why `mc-host report` failed.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Matrix(#[from] MatrixError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: line {line}: {source}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot start {}: {source}", program.display())]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("finding mc-host: {0}")]
    CurrentExe(#[source] std::io::Error),
    #[error("chart {}: {message}", path.display())]
    Chart { path: PathBuf, message: String },
    #[error("{failed} of {runs} runs failed (logs in {})", logs.display())]
    RunsFailed {
        failed: usize,
        runs: usize,
        logs: PathBuf,
    },
    #[error("{} holds no runs", path.display())]
    NoRuns { path: PathBuf },
}

impl ReportError {
    /// True when the command line asked for something impossible.
    pub fn is_usage(&self) -> bool {
        matches!(self, ReportError::Matrix(_))
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ReportError {
        let path = path.into();
        move |source| ReportError::Io { path, source }
    }
}

/// Run `mc-host report ARGS`.
pub fn run(args: &ReportArgs) -> Result<(), ReportError> {
    match &args.command {
        ReportCommand::Run(a) => runner::run_matrix(a),
        ReportCommand::Render(a) => render(&a.results, &a.out).map(|files| {
            for f in files {
                println!("{}", f.display());
            }
        }),
    }
}

/// Write report.md and the charts for `results` into `out`; returns the
/// files written.
pub fn render(
    results: &std::path::Path,
    out: &std::path::Path,
) -> Result<Vec<PathBuf>, ReportError> {
    let records = results::load(results)?;
    if records.is_empty() {
        return Err(ReportError::NoRuns {
            path: results.to_path_buf(),
        });
    }
    std::fs::create_dir_all(out).map_err(ReportError::io(out))?;
    let set = results::ResultSet::new(records);
    let mut files = charts::write_all(&set, out)?;
    let md = out.join("report.md");
    let charts: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    std::fs::write(&md, tables::report_md(&set, results, &charts)).map_err(ReportError::io(&md))?;
    files.insert(0, md);
    Ok(files)
}
