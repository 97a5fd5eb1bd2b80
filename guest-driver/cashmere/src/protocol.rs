//! The CSM-2L protocol core (seed 000 s.2.1, seed 002 s.3): page faults,
//! releases, acquires, and answering page requests, over the three seams.
//!
//! All threads of a node share one mapping of the heap, hence one frame per
//! page and one protection: the node's protocol state is one structure under
//! one mutex. A change of protection is made *before* the protocol reads a
//! page it is about to flush or invalidate (the `mprotect` is the shoot-down),
//! so a concurrent local writer faults and waits instead of writing behind
//! the diff. At an acquire, a noticed page that local threads are writing is
//! instead updated in place by an incoming diff (seed 000 s.2.1), which
//! stops nobody.

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use mc_api::backoff::{Backoff, BackoffPolicy};

use super::fault::Fault;
use super::seams::DirectoryState;
use super::stats::Stats;
use super::twin::{self, diff, TwinPool};
use super::vm::Prot;
use super::{CsmError, Node};

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

/// How long a page request waits for its reply before asking again. A reply
/// normally takes tens of microseconds; this is long enough that a home busy
/// on a loaded machine is not asked twice for nothing, short enough that a
/// lost message costs little.
const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(20);
/// The longest wait between two tries (the wait doubles from REPLY_TIMEOUT).
const REPLY_TIMEOUT_MAX: std::time::Duration = std::time::Duration::from_millis(640);
/// When a fetch gives up and the node fails.
const FETCH_GIVE_UP: std::time::Duration = std::time::Duration::from_secs(120);

impl Node {
    fn ps(&self) -> usize {
        self.page_size as usize
    }

    fn set_prot(&self, p: u32, prot: Prot) -> Result<(), CsmError> {
        let ps = self.ps();
        self.heap.protect(p as usize * ps, ps, prot)?;
        self.faults.prot[p as usize].store(prot as u8, Ordering::Release);
        Ok(())
    }

    fn home_of(&self, st: &mut State, p: u32) -> Result<u32, CsmError> {
        if let Some(h) = st.pages[p as usize].home {
            return Ok(h);
        }
        let h = match self.meta.home(p) {
            Some(h) => h,
            None => self.meta.claim_home(p)?,
        };
        st.pages[p as usize].home = Some(h);
        Ok(h)
    }

    /// Resolve one fault handed over by the SIGSEGV handler.
    pub(crate) fn handle_fault(&self, st: &mut State, f: &Fault) -> Result<(), CsmError> {
        let p = (f.offset / self.ps()) as u32;
        let now = match st.pages[p as usize].state {
            PageState::Invalid => Prot::None,
            PageState::Read => Prot::Read,
            PageState::ReadWrite | PageState::Exclusive => Prot::ReadWrite,
        };
        if now == Prot::ReadWrite || now as u8 > f.prot {
            // Another thread's fault already upgraded the page: just retry.
            // (The protection a fault records can be stale by a moment: it is
            // stored just after the mprotect, so a thread that faulted while
            // a release was downgrading the page may report read-write.)
            return Ok(());
        }
        if now == Prot::None {
            // A write to an invalid page faults again once readable.
            self.read_fault(st, p)
        } else {
            self.write_fault(st, p)
        }
    }

    fn read_fault(&self, st: &mut State, p: u32) -> Result<(), CsmError> {
        st.clock += 1;
        st.stats.read_faults += 1;
        // The copy is at least as new as this moment. Notices taken while the
        // request is in flight get a later stamp, so the acquire that follows
        // still invalidates the page: the home may have read its master copy
        // before the diff those notices announce arrived.
        let stamp = st.clock;
        st.clock += 1;
        self.meta.set_state(p, DirectoryState::Read)?;
        let buf = self.home_copy(st, p)?;
        self.heap.write_bytes(p as usize * self.ps(), &buf);
        st.pages[p as usize].fetched_at = stamp;
        st.pages[p as usize].state = PageState::Read;
        self.set_prot(p, Prot::Read)
    }

    fn write_fault(&self, st: &mut State, p: u32) -> Result<(), CsmError> {
        st.clock += 1;
        st.stats.write_faults += 1;
        let home = self.home_of(st, p)?;
        let alone = (0..self.nodes)
            .filter(|&n| n != self.me)
            .all(|n| self.meta.state_of(p, n) == DirectoryState::Invalid);
        self.meta.set_state(p, DirectoryState::ReadWrite)?;
        if home == self.me && alone && self.exclusive_mode {
            // In Read state every local write has been flushed, so the master
            // copy holds all the working copy does, and maybe diffs that a
            // former sharer flushed as it invalidated (their notices come at
            // its next release). Take them now: leaving Exclusive publishes
            // the whole working copy.
            let mut buf = vec![0u8; self.ps()];
            self.data.read_master(p, &mut buf)?;
            self.heap.write_bytes(p as usize * self.ps(), &buf);
            st.stats.home_refreshes += 1;
            self.meta.set_exclusive(p, self.me, true)?;
            st.stats.exclusive_entries += 1;
            st.pages[p as usize].state = PageState::Exclusive;
        } else {
            let words = self.ps() / 4;
            let mut twin = st.twins.take(words);
            self.heap.read_words(p as usize * self.ps(), &mut twin);
            st.stats.twins += 1;
            let pg = &mut st.pages[p as usize];
            pg.twin = Some(twin);
            pg.state = PageState::ReadWrite;
            if !pg.dirty {
                pg.dirty = true;
                st.dirty.push(p);
            }
        }
        self.set_prot(p, Prot::ReadWrite)
    }

    /// The master copy of a page: read locally at its home, fetched from a
    /// remote home.
    fn home_copy(&self, st: &mut State, p: u32) -> Result<Vec<u8>, CsmError> {
        let home = self.home_of(st, p)?;
        let mut buf = vec![0u8; self.ps()];
        if home == self.me {
            self.data.read_master(p, &mut buf)?;
            st.stats.home_refreshes += 1;
        } else {
            self.fetch(st, home, p, &mut buf)?;
        }
        Ok(buf)
    }

    /// Request/reply with the home, answering other nodes while waiting.
    ///
    /// The message layer checks every reply end to end (sequence, page and a
    /// checksum over the data, `dms_data`) and asks again, with a new
    /// sequence number, when the reply is damaged (a packet of it was lost or
    /// discarded by the CRC) or does not come within [`REPLY_TIMEOUT`] (the
    /// request or the whole reply was lost), doubling the wait each time. A
    /// request is idempotent at the home, so asking twice is harmless.
    pub(crate) fn fetch(
        &self,
        st: &mut State,
        home: u32,
        p: u32,
        buf: &mut [u8],
    ) -> Result<(), CsmError> {
        let start = std::time::Instant::now();
        let mut wait = REPLY_TIMEOUT;
        'ask: loop {
            st.fetch_seq = st.fetch_seq.wrapping_add(1).max(1);
            let seq = st.fetch_seq;
            self.data.send_request(home, seq, p)?;
            st.stats.messages_sent += 1;
            let sent = std::time::Instant::now();
            let mut backoff = Backoff::with_policy(WAIT_POLICY);
            loop {
                if self.data.reply_seq() == seq {
                    // A null request's `buf` is empty: only the header is checked.
                    if self.data.read_reply(seq, p, buf)? {
                        break 'ask;
                    }
                    st.stats.damaged_replies += 1;
                    log::debug!(
                        "node{}: reply {seq} from node {home} for page {p} damaged; asking again",
                        self.me
                    );
                    continue 'ask;
                }
                if let Some(n) = self.sync.aborted() {
                    return Err(CsmError::Protocol(format!(
                        "node {n} failed or left the cluster"
                    )));
                }
                if start.elapsed() > FETCH_GIVE_UP {
                    return Err(CsmError::Protocol(format!(
                        "no reply from node {home} for page {p} in {FETCH_GIVE_UP:?} \
                         ({} timeouts, {} damaged replies so far)",
                        st.stats.request_timeouts, st.stats.damaged_replies
                    )));
                }
                if sent.elapsed() > wait {
                    st.stats.request_timeouts += 1;
                    log::debug!(
                        "node{}: no reply {seq} from node {home} for page {p} in {wait:?}; asking again",
                        self.me
                    );
                    wait = (wait * 2).min(REPLY_TIMEOUT_MAX);
                    continue 'ask;
                }
                self.poll_others(st)?;
                backoff.snooze();
            }
        }
        if p != u32::MAX {
            st.stats.page_transfers += 1;
        }
        Ok(())
    }

    /// What a node does whenever it waits: answer requests, drain notices.
    pub(crate) fn poll_others(&self, st: &mut State) -> Result<(), CsmError> {
        self.serve_requests(st)?;
        self.drain_notices(st)
    }

    pub(crate) fn serve_requests(&self, st: &mut State) -> Result<(), CsmError> {
        for r in 0..self.nodes {
            if r == self.me {
                continue;
            }
            let Some((seq, p)) = self.data.poll_request(r) else {
                continue;
            };
            if seq == st.served[r as usize] {
                continue;
            }
            st.served[r as usize] = seq;
            st.stats.messages_served += 1;
            if p == u32::MAX {
                self.data.send_reply(r, seq, p, None)?;
                continue;
            }
            if p as usize >= st.pages.len() {
                return Err(CsmError::Protocol(format!("node {r} asked for page {p}")));
            }
            if st.pages[p as usize].state == PageState::Exclusive {
                self.leave_exclusive(st, p)?;
            }
            let mut buf = vec![0u8; self.ps()];
            self.data.read_master(p, &mut buf)?;
            self.data.send_reply(r, seq, p, Some(&buf))?;
        }
        Ok(())
    }

    /// Another node wants a page this home holds exclusively: stop local
    /// writers, publish the working copy as the master copy, go to Read.
    fn leave_exclusive(&self, st: &mut State, p: u32) -> Result<(), CsmError> {
        self.set_prot(p, Prot::Read)?;
        let mut buf = vec![0u8; self.ps()];
        self.heap.read_bytes(p as usize * self.ps(), &mut buf);
        self.data.write_page(p, &buf)?;
        self.meta.set_exclusive(p, self.me, false)?;
        self.meta.set_state(p, DirectoryState::Read)?;
        st.pages[p as usize].state = PageState::Read;
        st.stats.exclusive_exits += 1;
        Ok(())
    }

    pub(crate) fn drain_notices(&self, st: &mut State) -> Result<(), CsmError> {
        let mut got = Vec::new();
        self.meta.drain_notices(&mut got)?;
        st.stats.write_notices_received += got.len() as u64;
        for p in got {
            let pg = &mut st.pages[p as usize];
            if pg.notice_at == 0 {
                st.pending.push(p);
            }
            pg.notice_at = st.clock;
        }
        Ok(())
    }

    /// Diff a twinned page against its twin and write the diff to the home.
    /// The caller has already taken write permission away.
    fn flush(&self, st: &mut State, p: u32) -> Result<(), CsmError> {
        let Some(mut twin) = st.pages[p as usize].twin.take() else {
            return Ok(());
        };
        let home = self.home_of(st, p)?;
        let mut cur = vec![0u32; twin.len()];
        self.heap.read_words(p as usize * self.ps(), &mut cur);
        let runs = diff(&cur, &mut twin);
        if !runs.is_empty() {
            let bytes = self.data.write_diff(home, p, &runs)?;
            st.stats.diffs += 1;
            st.stats.diff_bytes += bytes as u64;
        }
        st.twins.give(twin);
        Ok(())
    }

    /// Release (seed 002 s.3.3): flush every dirty page to its home, then send
    /// write notices to the other sharers. Total order makes each diff visible
    /// before the notices and before the synchronisation write that follows.
    pub(crate) fn release(&self, st: &mut State) -> Result<(), CsmError> {
        st.clock += 1;
        st.stats.releases += 1;
        let dirty = std::mem::take(&mut st.dirty);
        let mut notices: Vec<Vec<u32>> = vec![Vec::new(); self.nodes as usize];
        for &p in &dirty {
            if st.pages[p as usize].twin.is_some() {
                self.set_prot(p, Prot::Read)?;
                self.flush(st, p)?;
                st.pages[p as usize].state = PageState::Read;
                self.meta.set_state(p, DirectoryState::Read)?;
            }
            st.pages[p as usize].dirty = false;
            for n in 0..self.nodes {
                if n != self.me && self.meta.state_of(p, n) != DirectoryState::Invalid {
                    notices[n as usize].push(p);
                }
            }
        }
        for (n, list) in notices.iter().enumerate() {
            let mut sent = 0;
            let mut backoff = Backoff::with_policy(WAIT_POLICY);
            while sent < list.len() {
                let k = self.meta.send_notices(n as u32, &list[sent..])?;
                sent += k;
                st.stats.write_notices_sent += k as u64;
                if k == 0 {
                    // The receiver's bin is full: keep answering while it drains.
                    self.poll_others(st)?;
                    backoff.snooze();
                }
            }
        }
        Ok(())
    }

    /// Acquire (seed 002 s.3.2): take the notices that have arrived and
    /// invalidate those pages, flushing a dirty one first. A notice older than
    /// the page's last fetch is already reflected in it and is skipped (the
    /// timestamps of seed 000 s.2.1).
    pub(crate) fn acquire(&self, st: &mut State) -> Result<(), CsmError> {
        st.clock += 1;
        st.stats.acquires += 1;
        self.drain_notices(st)?;
        let pending = std::mem::take(&mut st.pending);
        for p in pending {
            let pg = &mut st.pages[p as usize];
            let noticed = pg.notice_at;
            pg.notice_at = 0;
            if pg.fetched_at > noticed {
                continue;
            }
            match pg.state {
                PageState::Invalid | PageState::Exclusive => continue,
                PageState::ReadWrite if self.incoming_diffs && pg.twin.is_some() => {
                    // Other threads of this node may be writing the page
                    // right now: update it in place rather than stop them.
                    self.incoming_diff(st, p)?;
                    continue;
                }
                PageState::Read | PageState::ReadWrite => {}
            }
            self.set_prot(p, Prot::None)?;
            self.flush(st, p)?;
            st.pages[p as usize].state = PageState::Invalid;
            self.meta.set_state(p, DirectoryState::Invalid)?;
            st.stats.invalidations += 1;
        }
        Ok(())
    }

    /// The incoming-diff page update (seed 000 s.2.1): fetch the page and
    /// write into the working copy and the twin only the words where the
    /// home's copy differs from the twin, which for a data-race-free program
    /// are the remote writes this acquire must make visible. The page keeps
    /// its protection and its place on the dirty list; local threads go on
    /// writing throughout, and their words are flushed at the next release.
    ///
    /// With one shared mapping per node this happens at the acquire, not at
    /// the next access: the page is never made inaccessible, so there is no
    /// fault to defer it to.
    fn incoming_diff(&self, st: &mut State, p: u32) -> Result<(), CsmError> {
        st.clock += 1;
        let stamp = st.clock;
        st.clock += 1;
        let buf = self.home_copy(st, p)?;
        let incoming: Vec<u32> = buf
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let base = p as usize * self.ps();
        let pg = &mut st.pages[p as usize];
        let Some(twin) = pg.twin.as_mut() else {
            return Err(CsmError::Protocol(format!(
                "incoming diff for page {p}, which has no twin"
            )));
        };
        let words = twin::apply_incoming(&incoming, twin, |i, w| {
            self.heap.write_word(base + 4 * i, w)
        });
        pg.fetched_at = stamp;
        st.stats.incoming_diffs += 1;
        st.stats.incoming_diff_words += words as u64;
        Ok(())
    }

    pub(crate) fn lock_state(&self) -> StateGuard<'_> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How the protocol waits for other nodes: a short spin, then yielding, then
/// short sleeps.
pub(crate) const WAIT_POLICY: BackoffPolicy = BackoffPolicy {
    spins: 64,
    yields: 1_936,
    max_sleep: std::time::Duration::from_micros(20),
};
