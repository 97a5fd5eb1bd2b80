//! Why a Cashmere program failed.

use cashmere::CsmError;
use dsm_core::DsmError;

use super::verify;

/// Why a Cashmere program failed: Cashmere did, or the result is wrong (each
/// check names where and what it expected), or it was asked for too much.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Csm(#[from] CsmError),
    #[error(transparent)]
    Dsm(#[from] DsmError),
    #[error("cannot start an application thread")]
    Spawn(#[source] std::io::Error),
    #[error("an application thread panicked")]
    Panicked,
    #[error("the {0} protocol has no one-level form (--levels 1 with several threads)")]
    OneLevel(dsm_select::ProtocolName),
    #[error("tsp of {cities} cities: 3 to {max} (each city more multiplies the time by 4-7)")]
    TspCities { cities: usize, max: usize },
    /// wtest or test read a wrong value.
    #[error("{check}: element {element} is {got:#x}, expected {want:#x}")]
    Wtest {
        check: &'static str,
        element: usize,
        got: u64,
        want: u64,
    },
    #[error("sor: element ({row}, {col}) is {got}, sequential run has {want}")]
    Sor {
        row: usize,
        col: usize,
        got: f64,
        want: f64,
    },
    #[error("gauss: x[{index}] is {got}, sequential run has {want}")]
    Gauss { index: usize, got: f64, want: f64 },
    #[error("tsp: best tour {best}, sequential branch and bound finds {want}")]
    TspBest { best: u32, want: u32 },
    #[error(transparent)]
    Suite(#[from] verify::SuiteError),
    #[error("tsp: {path:?} is not a tour")]
    TspNotATour { path: Vec<usize> },
    #[error("tsp: tour {path:?} has length {len}, recorded as {best}")]
    TspLength {
        path: Vec<usize>,
        len: u32,
        best: u32,
    },
}
