//! Why `mc-host report` failed. A cause a variant keeps (`#[source]`) is
//! returned from `source()`, not printed in its message: `mc-host` prints
//! the chain, each cause once.

use std::path::PathBuf;

use crate::matrix::MatrixError;
use crate::run_clock::ClockError;

/// Why `mc-host report` failed.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Matrix(#[from] MatrixError),
    #[error(transparent)]
    Clock(#[from] ClockError),
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: line {line}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot start {}", program.display())]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("finding mc-host")]
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
    #[error(
        "{} holds no predicted times: its runs kept the wall clock (run the matrix with \
         `report run --clock virtual`, the default, or render with --clock wall)",
        path.display()
    )]
    NoPredictedTimes { path: PathBuf },
    #[error(
        "--cpu-scale paper charges Cashmere's protocol work at a scale taken from Table II's \
         micro-benchmark under CSM-DMS, and {} holds none: run without --no-table2 once",
        path.display()
    )]
    NoProtocolScale { path: PathBuf },
}

impl ReportError {
    /// True when the command line asked for something impossible.
    pub fn is_usage(&self) -> bool {
        matches!(self, ReportError::Matrix(_) | ReportError::Clock(_))
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ReportError {
        let path = path.into();
        move |source| ReportError::Io { path, source }
    }
}
