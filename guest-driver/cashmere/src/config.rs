//! What a node starts Cashmere with ([`Config`]); every node must pass the
//! same.

use std::sync::Arc;

use crate::error::CsmError;
use crate::homes::HomeAssignment;
use crate::space::CsmSpace;
use crate::variant::{CsmVariant, Levels, MessageDetection};
use dsm_core::{MAX_HEAP_BYTES, MAX_THREADS};

/// What [`crate::Csm::start`] needs; every node must pass the same values.
#[derive(Clone, Debug)]
pub struct Config {
    /// Shared heap, 1 byte to [`MAX_HEAP_BYTES`] (rounded up to pages).
    pub heap_bytes: usize,
    /// Coherence unit: 8192 (default) or 4096.
    pub page_size: u32,
    /// Application threads per node (machine), 1 to [`MAX_THREADS`].
    pub threads: u32,
    /// 2L: the node's threads share one protocol node; 1L: each is its own
    /// ([`crate::Csm::start_one_level`]).
    pub levels: Levels,
    pub locks: u32,
    pub flags: u32,
    /// The home of a page with no other sharer skips twins (seed 000 s.2.1).
    pub exclusive_mode: bool,
    /// With several threads per node, update a write-noticed page that local
    /// threads are writing by an incoming diff at the acquire, instead of
    /// invalidating it (which stops those writers: a shoot-down). Seed 000
    /// s.2.1.
    pub incoming_diffs: bool,
    /// The home maps its master copy (its receive mapping) as its working
    /// copy and writes it directly, with no twins or diffs (seed 000
    /// s.2.3.2). Off: the home keeps a separate working copy and diffs its
    /// writes into the master copy by loopback (the protocol before).
    pub home_direct: bool,
    /// Homes imposed from an earlier run ([`crate::Csm::homes`]); pages it leaves
    /// without one, and every page without it, get theirs by first touch.
    pub homes: Option<Arc<HomeAssignment>>,
    pub variant: CsmVariant,
    pub detection: MessageDetection,
    /// Where the application view of the heap goes: `None`, wherever
    /// `mmap` puts it; `Some(addr)`, exactly there on every node, or an
    /// error if that range is taken (C programs store heap pointers in
    /// shared data, so libcsm gives every node the same base).
    pub heap_base: Option<usize>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heap_bytes: 1 << 20,
            page_size: 8192,
            threads: 1,
            levels: Levels::Two,
            locks: 64,
            flags: 64,
            exclusive_mode: true,
            incoming_diffs: true,
            home_direct: true,
            homes: None,
            variant: CsmVariant::Dms,
            detection: MessageDetection::Polling,
            heap_base: None,
        }
    }
}

impl Config {
    /// Where CSM-DMS keeps its state for this configuration on `nodes` nodes.
    pub fn space(&self, nodes: u32) -> CsmSpace {
        CsmSpace {
            nodes,
            pages: u32::try_from(self.heap_bytes.div_ceil(self.page_size as usize))
                .unwrap_or(u32::MAX),
            page_size: self.page_size,
            flags: self.flags,
        }
    }

    /// Refuse what no node could run.
    pub(crate) fn check(&self) -> Result<(), CsmError> {
        if self.page_size != 4096 && self.page_size != 8192 {
            return Err(CsmError::PageSize(self.page_size));
        }
        if self.threads == 0 {
            return Err(CsmError::NoThreads);
        }
        if self.threads > MAX_THREADS {
            return Err(CsmError::TooManyThreads(self.threads));
        }
        if !(1..=MAX_HEAP_BYTES).contains(&self.heap_bytes) {
            return Err(CsmError::HeapSize(self.heap_bytes));
        }
        Ok(())
    }
}
