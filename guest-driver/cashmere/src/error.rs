//! The errors of Cashmere.

use mc_api::McError;

#[derive(Debug, thiserror::Error)]
pub enum CsmError {
    #[error("Memory Channel: {0}")]
    Mc(#[from] McError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("usage: {0}")]
    Usage(String),
    #[error("timed out after {after:?} waiting for {waiting_for}")]
    Timeout {
        after: std::time::Duration,
        waiting_for: BarrierWait,
    },
}

/// What a node waits for at a cluster barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarrierWait {
    /// (The master, node 0:) every node to arrive.
    Arrivals,
    /// (Every other node:) the master to release the barrier.
    Master,
}

impl std::fmt::Display for BarrierWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BarrierWait::Arrivals => "every node at the barrier",
            BarrierWait::Master => "the barrier master",
        })
    }
}
