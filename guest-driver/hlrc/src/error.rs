//! What can go wrong in a node of HLRC.

use std::time::Duration;

use crate::Node;

#[derive(Debug, thiserror::Error)]
pub enum HlrcError {
    #[error("the Memory Channel")]
    Mc(#[from] mc_api::McError),
    #[error("the shared heap")]
    Heap(#[source] std::io::Error),
    #[error("page size {0}: HLRC takes 4096 or 8192")]
    PageSize(u32),
    #[error(
        "{threads} application threads on a node: HLRC runs one per node, as seed 001 does \
         (run N:1, e.g. --nodes 4 --threads 1)"
    )]
    Threads { threads: u32 },
    #[error("a broadcast with no barrier board (barriers were not chosen to broadcast)")]
    NoBoard,
    #[error("a message of {len} bytes: the largest is {max}")]
    MessageTooLarge { len: usize, max: usize },
    #[error("node {from} sent a message frame of {len} bytes, which no message is")]
    BadFrame { from: Node, len: usize },
    #[error(
        "message {seq} from node {from} arrived damaged or in part (a packet of it was lost): \
         HLRC does not retransmit; run with --reliable"
    )]
    Damaged { from: Node, seq: u32 },
    #[error("waiting for {what}: {evidence}; HLRC does not retransmit: run with --reliable")]
    Lost {
        what: String,
        evidence: mc_api::LossEvidence,
    },
    #[error("node {from} sent a damaged message")]
    Wire {
        from: Node,
        #[source]
        source: crate::wire::WireError,
    },
    #[error("the protocol")]
    Engine(#[from] crate::engine::EngineError),
    #[error("node {node} failed")]
    NodeFailed { node: Node },
    #[error("no answer after {after:?} while waiting for {what}")]
    Timeout { what: String, after: Duration },
    #[error("lock {lock} of {locks}")]
    NoSuchLock { lock: u32, locks: u32 },
    #[error("flag {flag} of {flags}")]
    NoSuchFlag { flag: u32, flags: u32 },
    #[error("a flag's value must not be 0")]
    ZeroFlagValue,
    #[error("starting the communication thread")]
    Spawn(#[source] std::io::Error),
    #[error("the communication thread stopped: {0}")]
    CommThread(String),
    #[error("too many heaps in one process (at most {0})")]
    TooManyHeaps(usize),
}
