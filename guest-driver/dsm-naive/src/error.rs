//! Why the naive protocol failed.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum NaiveError {
    #[error("Memory Channel")]
    Mc(#[from] mc_api::McError),
    #[error("cannot map the shared heap")]
    Heap(#[source] std::io::Error),
    #[error("page size {0}: 4096 or 8192")]
    PageSize(u32),
    #[error("{threads} threads on a node: 1 to {max}")]
    Threads { threads: u32, max: u32 },
    #[error("every process may hold {0} DSM heaps at most")]
    TooManyHeaps(usize),
    #[error("flag {flag}: the run has {flags} flags")]
    NoSuchFlag { flag: u32, flags: u32 },
    #[error("a flag is set to a nonzero value")]
    ZeroFlagValue,
    #[error("node 0 did not answer the request for page {page} within {after:?}")]
    NoReply { page: u32, after: Duration },
    #[error("waited {after:?} for flag {flag}")]
    FlagTimeout { flag: u32, after: Duration },
    #[error("node {node} failed")]
    NodeFailed { node: u32 },
    #[error("a thread of this node failed at the barrier")]
    NodeBarrier(#[source] std::sync::Arc<NaiveError>),
    #[error("cannot start node 0's server thread")]
    Spawn(#[source] std::io::Error),
}
