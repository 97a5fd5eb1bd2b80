//! A node's protocol state: each page's state, home, twin and timestamps,
//! the dirty and pending lists, the logical clock and the counters. All
//! threads of a node share one mapping of the heap, hence one frame per page
//! and one protection: the state is one structure under one mutex.
//!
//! Everything the fault path needs is allocated here up front (lists with
//! room for every page, page buffers), so resolving a fault inside the
//! SIGSEGV handler never allocates.

use std::sync::MutexGuard;

use dsm_core::Stats;

use crate::adb_interest::AdbInterest;
use crate::migration_answers::MigrationAnswers;
use crate::stale::StaleVector;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageState {
    Invalid,
    Read,
    ReadWrite,
    /// Read-write at the home with no other sharer: no twin, no diffs.
    Exclusive,
}

pub struct PageInfo {
    pub state: PageState,
    pub home: Option<u32>,
    /// The page has a twin (in the node's twin space).
    pub twinned: bool,
    /// On the node's dirty list (needs write notices at the next release).
    pub dirty: bool,
    /// Logical time of the last fetch / refresh of the working copy.
    pub fetched_at: u64,
    /// Logical time a write notice for the page was taken from a bin; 0 when
    /// none is pending.
    pub notice_at: u64,
    /// At the home: the echo that follows this node's last store into the
    /// page's master copy (a diff of its own writes, or the whole page as it
    /// leaves Exclusive). The master copy holds that store once the echo is
    /// back; 0 when there is nothing to wait for.
    pub own_store_echo: u64,
    /// At the home: its working copy is its master copy (the receive
    /// mapping, mapped into the heap's views), so its threads write the
    /// master copy directly: no twins, no diffs, no refreshes, and write
    /// notices for the page are ignored here (seed 000 s.2.3.2).
    pub direct: bool,
    /// Whether mapping the master copy as the working copy was tried.
    pub direct_tried: bool,
}

pub struct ProtocolState {
    pub pages: Vec<PageInfo>,
    /// Room for every page: pushing never allocates.
    pub dirty: Vec<u32>,
    /// The dirty list a release is working through (room for every page).
    pub releasing: Vec<u32>,
    /// Pages with write notices taken and not yet acted on (room for every
    /// page; a page is on it at most once).
    pub pending: Vec<u32>,
    pub clock: u64,
    pub stats: Stats,
    /// The sequence number of this node's last request.
    pub fetch_seq: u32,
    /// Per requester, the last migration request this node answered and
    /// its answer (`requests`).
    pub(crate) migration_answers: MigrationAnswers,
    barrier_episode: u64,
    /// A page for the fault path (an incoming diff's copy from the home).
    pub fetch_buf: Box<[u8]>,
    /// A page for answering requests (which happens while a fetch waits).
    pub serve_buf: Box<[u8]>,
    /// Requests are being answered (not again from inside an answer).
    pub serving: bool,
    /// The working copy of the page being diffed, as words.
    pub words: Box<[u32]>,
    /// A page from elsewhere (the home's copy, a migration's reply), as
    /// words, to merge into the working copy byte by byte.
    pub incoming: Box<[u32]>,
    /// The diff being made.
    pub diff: crate::twin::Diff,
    /// A diff message being applied at the home (two pages: room for a
    /// page of one-word runs with their byte masks, 1.5 pages).
    pub msg_buf: Box<[u8]>,
    /// The Stale vector (seed 002 s.3).
    pub(crate) stale: StaleVector,
    /// CSM-ADB, per page at its home: its consumers, and whether this node
    /// has a copy placed in the broadcast buffers.
    pub(crate) adb: AdbInterest,
    /// Passes over the requests so far (requests answered in one pass came
    /// "simultaneously").
    pub serve_pass: u64,
}

impl ProtocolState {
    pub fn new(pages: u32, nodes: u32, page_size: u32) -> ProtocolState {
        let n = pages as usize;
        let ps = page_size as usize;
        ProtocolState {
            pages: (0..pages)
                .map(|_| PageInfo {
                    state: PageState::Invalid,
                    home: None,
                    twinned: false,
                    dirty: false,
                    fetched_at: 0,
                    notice_at: 0,
                    own_store_echo: 0,
                    direct: false,
                    direct_tried: false,
                })
                .collect(),
            dirty: Vec::with_capacity(n),
            releasing: Vec::with_capacity(n),
            pending: Vec::with_capacity(n),
            clock: 1,
            stats: Stats::default(),
            fetch_seq: 0,
            migration_answers: MigrationAnswers::new(nodes),
            barrier_episode: 0,
            fetch_buf: vec![0u8; ps].into_boxed_slice(),
            serve_buf: vec![0u8; ps].into_boxed_slice(),
            serving: false,
            words: vec![0u32; ps / 4].into_boxed_slice(),
            incoming: vec![0u32; ps / 4].into_boxed_slice(),
            diff: crate::twin::Diff::new(ps / 4),
            msg_buf: vec![0u8; 2 * ps + crate::twin::DIFF_HEADER].into_boxed_slice(),
            stale: StaleVector::new(pages),
            adb: AdbInterest::new(pages),
            serve_pass: 0,
        }
    }

    /// The sequence number of a new request (never 0, which no request
    /// carries).
    pub fn next_fetch_seq(&mut self) -> u32 {
        self.fetch_seq = self.fetch_seq.wrapping_add(1).max(1);
        self.fetch_seq
    }

    /// The next cluster barrier's episode.
    pub fn next_barrier_episode(&mut self) -> u64 {
        self.barrier_episode += 1;
        self.barrier_episode
    }

    /// A write notice for page `p` has arrived: the page goes on the
    /// pending list once, stamped with the clock.
    pub fn take_notice(&mut self, p: u32) {
        self.stats.write_notices_received += 1;
        if let Some(pg) = self.pages.get_mut(p as usize) {
            if pg.notice_at == 0 {
                self.pending.push(p);
            }
            pg.notice_at = self.clock;
        }
    }
}

pub type StateGuard<'a> = MutexGuard<'a, ProtocolState>;
