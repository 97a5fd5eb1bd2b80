//! The last request of each node this node answered (seed 002 s.5): a
//! request word is answered once. Written with the node's state held (by
//! whoever answers), read without it by the protocol thread and the pollers
//! to see whether anything new is waiting.

use std::sync::atomic::{AtomicU64, Ordering};

pub(super) struct ServedRequests {
    last: Box<[AtomicU64]>,
}

impl ServedRequests {
    pub(super) fn new(nodes: u32) -> ServedRequests {
        ServedRequests {
            last: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The key (`request_key`) of node `r`'s request answered last.
    pub(super) fn last(&self, r: u32) -> u64 {
        self.last[r as usize].load(Ordering::Relaxed)
    }

    /// Node `r`'s request `key` is answered (call with the state held).
    pub(super) fn answered(&self, r: u32, key: u64) {
        self.last[r as usize].store(key, Ordering::Relaxed);
    }
}

/// A request word as served: its sequence number and its word together (a
/// migration request asked again keeps its sequence number and changes its
/// try bits).
pub(super) fn request_key((seq, word): (u32, u32)) -> u64 {
    u64::from(seq) << 32 | u64::from(word)
}
