//! The errors of Cashmere: the Memory Channel API's and the operating
//! system's as their source, the protocol's own (a node lost, a page that
//! does not come), and misuse, each with the values that name its cause.

use std::sync::Arc;
use std::time::Duration;

use mc_api::McError;

#[derive(Debug, thiserror::Error)]
pub enum CsmError {
    #[error("Memory Channel")]
    Mc(#[from] McError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The virtual clock could not take this thread (a predicted-time run).
    #[error("virtual clock")]
    Clock(#[source] Arc<mc_api::vclock::VclockError>),
    /// A node wrote the abort word, or left the cluster (its adapter
    /// crashed): nobody waits for it any longer.
    #[error("node {node} failed or left the cluster")]
    NodeFailed { node: u32 },
    #[error("timed out after {after:?} waiting for {waiting_for}")]
    Timeout {
        after: Duration,
        waiting_for: BarrierWait,
    },
    /// A page fetch gave up: the home never sent a whole reply.
    #[error("no reply from node {home} for page {page} in {after:?} ({timeouts} timeouts, {damaged} damaged replies so far)")]
    NoReply {
        home: u32,
        page: u32,
        after: Duration,
        timeouts: u64,
        damaged: u64,
    },
    /// Another node asked this one for a page beyond the heap.
    #[error("node {from} asked for page {page}, which is not in the heap")]
    BadRequest { from: u32, page: u32 },
    /// An incoming diff was due for a page with no twin to diff against.
    #[error("incoming diff for page {page}, which has no twin")]
    NoTwin { page: u32 },
    /// The node's protocol thread stopped on this error; the node is out.
    #[error("protocol thread failed")]
    ProtocolThread(#[source] Arc<CsmError>),
    /// The error that stopped this node's barrier, as each of its threads
    /// sees it: the one that took the node through the cluster barrier and
    /// those that waited for it.
    #[error(transparent)]
    NodeBarrier(Arc<CsmError>),
    #[error("page size {0}: the coherence unit is 4096 or 8192 bytes")]
    PageSize(u32),
    #[error("at least one thread per node")]
    NoThreads,
    #[error("{0} threads per node: Cashmere runs 1 to 64 application threads per node")]
    TooManyThreads(u32),
    #[error("shared heap of {0} bytes: Cashmere's heap is 1 byte to 1 GiB (every node's home region is the heap's size, in a Memory Channel address space of at most 1 GiB)")]
    HeapSize(usize),
    #[error("{adapters} adapters x {per_adapter} protocol nodes each: Cashmere runs on 1 to {max} protocol nodes here (a barrier word and a mailbox region each, in a region table shared with everything else on the cluster)")]
    TooManyNodes {
        adapters: u32,
        per_adapter: u32,
        max: u32,
    },
    /// `Csm::start` was asked for the one-level protocol with several
    /// threads per node, which needs one protocol node per thread.
    #[error("the one-level protocol (1L) with {threads} threads per node starts a protocol node per thread: use Csm::start_one_level")]
    OneLevelThreads { threads: u32 },
    #[error("too many Cashmere heaps in one process (at most {0})")]
    TooManyHeaps(usize),
    #[error("shared heap of {heap} bytes is full (wanted {wanted} more at {at}): make it larger (Config::heap_bytes; mc-guest csm --heap-kib)")]
    HeapFull {
        heap: usize,
        wanted: usize,
        at: usize,
    },
    #[error("a flag's value must be nonzero")]
    ZeroFlagValue,
    #[error("no lock {lock}: there are {locks}")]
    NoSuchLock { lock: u32, locks: u32 },
    #[error("no flag {flag}: there are {flags}")]
    NoSuchFlag { flag: u32, flags: u32 },
    #[error("page {0} has no home yet")]
    NoHome(u32),
    /// The directory lock (home assignment at first touch) stayed taken.
    #[error("the directory lock stayed taken for {after:?}")]
    DirectoryLock { after: Duration },
    /// The network damaged or lost packets during the run and the API does
    /// not retransmit them (it was not opened reliable).
    #[error(
        "the network lost or damaged stores during the run (the cluster error count went \
         from {before} to {now}) and the Memory Channel API does not retransmit them, so \
         Cashmere's data may be incomplete: rerun with the API reliable (mc-guest --reliable)"
    )]
    NetworkLoss { before: u64, now: u64 },
    /// This node's own echo did not come back: its stores are not arriving.
    #[error("this node's own stores did not come back in {after:?}")]
    NoEcho { after: Duration },
    /// The imposed home assignment does not fit this run.
    #[error("imposed homes")]
    Homes(#[from] crate::homes::HomesError),
}

impl CsmError {
    /// Whether this error is, or was caused by, [`CsmError::NetworkLoss`]
    /// (a node's threads see it through their barrier or protocol thread).
    pub fn is_network_loss(&self) -> bool {
        match self {
            CsmError::NetworkLoss { .. } => true,
            CsmError::NodeBarrier(e) | CsmError::ProtocolThread(e) => e.is_network_loss(),
            _ => false,
        }
    }
}

/// What a node waits for at a cluster barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarrierWait {
    /// (The master, node 0:) every node to arrive.
    Arrivals,
    /// (Every other node:) the master to release the barrier.
    Master,
    /// A message-based lock's handoff (CSM-None).
    LockHandoff,
    /// Room in another node's synchronisation queue (CSM-None).
    QueueRoom,
}

impl std::fmt::Display for BarrierWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BarrierWait::Arrivals => "every node at the barrier",
            BarrierWait::Master => "the barrier master",
            BarrierWait::LockHandoff => "a lock's handoff",
            BarrierWait::QueueRoom => "room in a node's synchronisation queue",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_node_is_named_through_every_wrapper() {
        // What `mc-host run` shows when a node crashes under a program: the
        // lost node's number, whichever thread reports it.
        let lost = Arc::new(CsmError::NodeFailed { node: 2 });
        for e in [
            CsmError::NodeBarrier(lost.clone()),
            CsmError::ProtocolThread(lost.clone()),
        ] {
            assert!(
                mc_api::ErrorChain(&e)
                    .to_string()
                    .contains("node 2 failed or left the cluster"),
                "{e}"
            );
        }
        // The cause stays a value a caller can match on.
        let e = CsmError::ProtocolThread(lost);
        assert!(std::error::Error::source(&e).is_some());
        let CsmError::ProtocolThread(cause) = &e else {
            unreachable!()
        };
        assert!(matches!(**cause, CsmError::NodeFailed { node: 2 }));
    }
}
