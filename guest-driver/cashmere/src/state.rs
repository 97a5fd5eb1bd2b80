//! A node's protocol state: each page's state, home, twin and timestamps,
//! the dirty and pending lists, the logical clock and the counters. All
//! threads of a node share one mapping of the heap, hence one frame per page
//! and one protection: the state is one structure under one mutex.

use std::sync::MutexGuard;

use crate::stats::Stats;
use crate::twin::TwinPool;

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
    pub twin: Option<Box<[u32]>>,
    /// On the node's dirty list (needs write notices at the next release).
    pub dirty: bool,
    /// Logical time of the last fetch / refresh of the working copy.
    pub fetched_at: u64,
    /// Logical time a write notice for the page was taken from a bin; 0 when
    /// none is pending.
    pub notice_at: u64,
}

pub struct State {
    pub pages: Vec<PageInfo>,
    pub dirty: Vec<u32>,
    pub pending: Vec<u32>,
    pub clock: u64,
    pub stats: Stats,
    pub twins: TwinPool,
    pub fetch_seq: u32,
    pub served: Vec<u32>,
    pub barrier_episode: u64,
}

impl State {
    pub fn new(pages: u32, nodes: u32) -> State {
        State {
            pages: (0..pages)
                .map(|_| PageInfo {
                    state: PageState::Invalid,
                    home: None,
                    twin: None,
                    dirty: false,
                    fetched_at: 0,
                    notice_at: 0,
                })
                .collect(),
            dirty: Vec::new(),
            pending: Vec::new(),
            clock: 1,
            stats: Stats::default(),
            twins: TwinPool::default(),
            fetch_seq: 0,
            served: vec![0; nodes as usize],
            barrier_episode: 0,
        }
    }
}

pub type StateGuard<'a> = MutexGuard<'a, State>;
