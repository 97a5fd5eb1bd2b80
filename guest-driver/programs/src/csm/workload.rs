//! The interface every application of the suite implements: its shared
//! data, set up once per node, then run by every thread ([`Workload`]),
//! and the end of its timed computation ([`ComputeWindow`]).

use std::sync::Mutex;

use dsm_core::{Dsm, DsmError, Stats};

use super::error::AppError;

/// One application's shared data on one node; `run` is called by every
/// application thread of the node with its cluster-wide thread id and
/// returns how many values it checked against the sequential run.
pub trait Workload: Send + Sync {
    fn run(&self, csm: &Dsm, tid: usize) -> Result<u64, AppError>;
    /// The node's counters at the end of the computation.
    fn window(&self) -> &ComputeWindow;
}

/// The end of the timed computation: this node's counters as they were
/// then, before verification reads other processors' results.
#[derive(Default)]
pub struct ComputeWindow {
    stats: Mutex<Option<Stats>>,
}

impl ComputeWindow {
    /// Every thread calls this after its last computing step: a barrier (all
    /// results are released), the end mark, one thread per node keeps the
    /// node's counters, and a second barrier so no thread verifies (and
    /// faults) before they are kept.
    pub fn end(&self, csm: &Dsm, tid: usize) -> Result<(), DsmError> {
        csm.barrier()?;
        csm.mark_end();
        if tid % csm.threads() as usize == 0 {
            *self.stats.lock().unwrap_or_else(|p| p.into_inner()) = Some(csm.stats());
        }
        csm.barrier()
    }

    pub fn stats(&self) -> Option<Stats> {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }
}
