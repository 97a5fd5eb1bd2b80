//! Late join: a node whose adapter crashed and rejoined catches up with the
//! cluster's coherent state (seed 004, "Late Join and Failure Resilience":
//! "The thread that has been designated to manage clusterwide updates is
//! responsible for providing the late-joining node with an up-to-date copy of
//! the cluster data structures. When triggered by the new node, the thread
//! retransmits the contents ...").
//!
//! A management thread on every node polls the status page. When the
//! membership epoch moves it probes its own PCT with a store to its marker
//! word: a rejoined adapter is a fresh one, its PCT empty, so the store is
//! refused with `TransmitDisabled` (a crash and rejoin between two polls still
//! moves the epoch, so it is never missed). The joiner then
//!
//! 1. programs its PCT again from the record of every entry the API set
//!    (`pct_log`), so it receives live writes again from here on;
//! 2. maps the resync window (an alias of the control pages and the arena at
//!    the top of the address space) for receive onto the same frames;
//! 3. broadcasts a join request (`JOIN_REQUEST`) and waits for the answer
//!    (`JOIN_DONE`).
//!
//! Members that are coherent see the request; the first to take the serve
//! lock (a cluster spinlock, as the seed elects its manager; lower-numbered
//! members try first) maps the window for point-to-point transmit to the
//! joiner and retransmits control pages and arena through it, then answers.
//! Nothing goes to other nodes: a broadcast would overwrite newer values there.
//!
//! The cluster keeps running meanwhile. The server's copy may miss a write that
//! is ordered before its retransmission, and the joiner would keep the stale
//! value. Total order fixes that: after sending, the server stores a marker with
//! broadcast and loopback and waits for it to come back, then reads its copy
//! again. Per 8-byte word: if the value read equals what was sent, the joiner
//! holds the right value (had the last write before the marker come before the
//! retransmission, the copy would show it; had it come after, the joiner got it
//! live). If it changed again after the marker, a write ordered after the
//! retransmission exists and the joiner receives it too. This holds per byte
//! (stores may be a single byte), so a word is sent again if one of its bytes
//! differs and then stays put; rounds wait a little longer each time, so a
//! byte written continuously is soon seen to change again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, TryLockError};
use std::time::{Duration, Instant};

use firmware_model::abi::{Status, StatusPage};
use firmware_model::{AdapterErrorStatus, NodeId, PctEntry};
use log::{debug, info, warn};

use super::layout::{
    Layout, CONTROL_PAGES, JOIN_DONE, JOIN_MARK, JOIN_REQUEST, META_LOCK, SERVE_LOCK,
};
use super::lock::ClusterLock;
use super::{wait_for, Inner, McError, McPort, MemoryChannel, ReceiveMemory, OP_TIMEOUT};

/// Where this node stands with the cluster's coherent state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coherence {
    /// Control pages and arena are up to date.
    Coherent,
    /// The adapter crashed: the node is out of the cluster until it rejoins.
    Offline,
    /// Rejoined; a member is retransmitting the coherent state.
    CatchingUp,
}

/// What the last catch-up after a rejoin did, as the joiner saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resync {
    /// The membership epoch at which this node found it had rejoined.
    pub epoch: u64,
    /// The member that retransmitted; `None` if this node was alone.
    pub server: Option<NodeId>,
    /// From noticing the rejoin to coherent again.
    pub elapsed: Duration,
    /// Bytes of coherent state (control pages and arena).
    pub bytes: u64,
}

/// A node's coherence, shared by its threads and its management thread.
pub(crate) struct JoinState {
    state: Mutex<Coherence>,
    changed: Condvar,
    coherent: AtomicBool,
    /// Bumped whenever the node stops being coherent: a cluster lock taken
    /// across it is taken again.
    generation: AtomicU64,
    rejoins: AtomicU64,
    last: Mutex<Option<Resync>>,
}

impl JoinState {
    pub(crate) fn new() -> Self {
        JoinState {
            state: Mutex::new(Coherence::Coherent),
            changed: Condvar::new(),
            coherent: AtomicBool::new(true),
            generation: AtomicU64::new(0),
            rejoins: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }

    pub(crate) fn coherence(&self) -> Coherence {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn is_coherent(&self) -> bool {
        self.coherent.load(Ordering::Acquire)
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(crate) fn rejoins(&self) -> u64 {
        self.rejoins.load(Ordering::Acquire)
    }

    pub(crate) fn last(&self) -> Option<Resync> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Move to `s`; returns the state before.
    fn set(&self, s: Coherence) -> Coherence {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let old = *st;
        if old != s {
            if old == Coherence::Coherent {
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
            *st = s;
            self.coherent
                .store(s == Coherence::Coherent, Ordering::Release);
            self.changed.notify_all();
        }
        old
    }

    fn finish(&self, report: Resync) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(report);
        self.rejoins.fetch_add(1, Ordering::AcqRel);
        self.set(Coherence::Coherent);
    }

    /// For the API's own cluster operations (locks, tables): go on when
    /// coherent, wait while catching up, fail at once while offline.
    pub(crate) fn gate(&self, timeout: Duration) -> Result<(), McError> {
        if self.is_coherent() {
            return Ok(());
        }
        self.wait(timeout, false)
    }

    /// Wait until coherent; with `through_offline`, also while the adapter is
    /// down (for a rejoin that is yet to come).
    pub(crate) fn wait(&self, timeout: Duration, through_offline: bool) -> Result<(), McError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match *st {
                Coherence::Coherent => return Ok(()),
                Coherence::Offline if !through_offline => return Err(McError::Offline),
                _ => {}
            }
            let now = Instant::now();
            if now >= deadline {
                let what = match *st {
                    Coherence::Offline => {
                        "this node's adapter to rejoin the cluster and catch up (it is offline)"
                    }
                    _ => "this node to catch up with the cluster after rejoining (a member retransmits the coherent state)",
                };
                return Err(McError::Timeout(timeout, what.into()));
            }
            st = self
                .changed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// How long the joiner waits for an answer before it posts its request again.
const REPOST: Duration = Duration::from_secs(5);
/// How much later than the member below it a member offers to serve.
const RANK_DELAY: Duration = Duration::from_millis(20);
/// Rounds of retransmission before the server gives up (and tries again later).
const MAX_ROUNDS: u32 = 48;
/// The largest record a retransmission sends.
const RECORD: usize = 4096;
/// Records per transmit batch: the port is free for the node's own threads in
/// between.
const BATCH: usize = 32;
/// How long to back off after a failed join or serve.
const RETRY: Duration = Duration::from_millis(100);

/// Poll intervals of the management thread: short for a while after anything
/// happened, longer when all is quiet. Never a spin: two cores here.
const POLL_BUSY: Duration = Duration::from_millis(1);
const POLL_IDLE: Duration = Duration::from_millis(2);
const BUSY_FOR: Duration = Duration::from_secs(1);

/// Start the management thread of a node whose API just opened. It holds only
/// a weak reference and ends when the last handle is dropped.
pub(crate) fn start(mc: &MemoryChannel) -> Result<(), McError> {
    let weak = Arc::downgrade(&mc.inner);
    let me = mc.inner.me;
    let epoch = mc.port().status().membership_epoch;
    std::thread::Builder::new()
        .name(format!("mc-join{me}"))
        .spawn(move || {
            let mut m = Manager::new(me, epoch);
            loop {
                let Some(inner) = weak.upgrade() else { break };
                let mc = MemoryChannel { inner };
                m.step(&mc);
                drop(mc);
                std::thread::sleep(if m.last_activity.elapsed() < BUSY_FOR {
                    POLL_BUSY
                } else {
                    POLL_IDLE
                });
            }
            debug!("node{me}: late-join thread ends: the API was closed");
        })
        .map_err(|e| McError::Device(format!("cannot start the late-join thread: {e}")))?;
    Ok(())
}

/// The management thread's own state.
struct Manager {
    me: u32,
    epoch: u64,
    probe_pending: bool,
    /// Marker values: unique for the life of the process.
    mark: u64,
    /// The last join request this node posted.
    seq: u64,
    /// When this node first saw each pending request (node, seq, when).
    seen: Vec<(u32, u64, Instant)>,
    last_activity: Instant,
    not_before: Instant,
}

impl Manager {
    fn new(me: u32, epoch: u64) -> Self {
        let now = Instant::now();
        Manager {
            me,
            epoch,
            probe_pending: false,
            mark: 0,
            seq: 0,
            seen: Vec::new(),
            last_activity: now,
            not_before: now,
        }
    }

    fn meta_addr(l: &Layout, offset: usize) -> u64 {
        l.page_addr(0) + offset as u64
    }

    fn step(&mut self, mc: &MemoryChannel) {
        let inner = &*mc.inner;
        let me = self.me;
        let Some(st) = status(mc) else { return };
        if !AdapterErrorStatus::from_word(st.error_status).online {
            if inner.join.set(Coherence::Offline) != Coherence::Offline {
                warn!("node{me}: adapter offline: out of the cluster until it rejoins");
                self.last_activity = Instant::now();
            }
            self.probe_pending = true;
            return;
        }
        if st.membership_epoch != self.epoch {
            debug!(
                "node{me}: membership epoch {} -> {} (members {:#x})",
                self.epoch, st.membership_epoch, st.members
            );
            self.epoch = st.membership_epoch;
            self.probe_pending = true;
            self.last_activity = Instant::now();
        }
        let now = Instant::now();
        if (self.probe_pending || !inner.join.is_coherent()) && now >= self.not_before {
            let rejoined = match self.probe(mc) {
                Ok(_) => !inner.join.is_coherent(),
                Err(McError::Refused {
                    status: Status::TransmitDisabled,
                    ..
                }) => true,
                Err(McError::Refused {
                    status: Status::Offline,
                    ..
                }) => {
                    inner.join.set(Coherence::Offline);
                    return;
                }
                Err(e) => {
                    warn!("node{me}: probing this node's PCT after a membership change: {e}");
                    self.not_before = now + RETRY;
                    return;
                }
            };
            self.probe_pending = false;
            if rejoined {
                self.last_activity = Instant::now();
                if let Err(e) = self.join(mc) {
                    warn!("node{me}: catching up after rejoining: {e}; trying again");
                    self.probe_pending = true;
                    self.not_before = Instant::now() + RETRY;
                }
                return;
            }
        }
        if inner.join.is_coherent() && now >= self.not_before {
            self.serve_pending(mc);
        }
    }

    /// A store to this node's marker word (page 0: broadcast, loopback).
    fn probe(&mut self, mc: &MemoryChannel) -> Result<u64, McError> {
        self.mark += 1;
        let l = mc.inner.layout;
        let off = JOIN_MARK + 8 * self.me as usize;
        mc.store(Self::meta_addr(&l, off), &self.mark.to_le_bytes())?;
        Ok(self.mark)
    }

    /// Store a marker and wait until it comes back: everything ordered before
    /// it is then in this node's copy.
    fn marker(&mut self, mc: &MemoryChannel) -> Result<(), McError> {
        let v = self.probe(mc)?;
        let off = JOIN_MARK + 8 * self.me as usize;
        let c = &mc.inner.control;
        wait_for("this node's join marker to loop back", OP_TIMEOUT, || {
            (c.load_u64(off) == v).then_some(())
        })
    }

    // ---- the joiner ----------------------------------------------------

    fn join(&mut self, mc: &MemoryChannel) -> Result<(), McError> {
        let inner = &*mc.inner;
        let (me, l) = (self.me, inner.layout);
        let t0 = Instant::now();
        if inner.join.set(Coherence::CatchingUp) == Coherence::Coherent {
            warn!(
                "node{me}: the adapter crashed and rejoined (epoch {}): catching up",
                self.epoch
            );
        } else {
            info!("node{me}: rejoined (epoch {}): catching up", self.epoch);
        }
        // 1. Receive again, as before the crash.
        mc.port().replay()?;
        // This node serves nobody while it catches up; a serve lock entry it
        // left set when it crashed would block every member.
        mc.store(
            Self::meta_addr(&l, SERVE_LOCK + 4 * me as usize),
            &0u32.to_le_bytes(),
        )?;
        let bytes = u64::from(l.resync_pages()) * u64::from(l.page_size);
        let others = mc.members_mask() & !(1u64 << me);
        let server = if others == 0 {
            warn!("node{me}: no other member to catch up from: keeping this node's copy");
            None
        } else {
            // 2. The window aliases control pages and arena here.
            let mut frames = inner.control.frames();
            frames.extend(inner.arena.frames());
            mc.port().set_pct_transient(
                l.resync_first(),
                l.resync_pages(),
                PctEntry::receive(),
                &frames,
            )?;
            let r = self.request_and_wait(mc);
            if let Err(e) = mc.port().set_pct_transient(
                l.resync_first(),
                l.resync_pages(),
                PctEntry::DISABLED,
                &[],
            ) {
                warn!("node{me}: unmapping the resync window: {e}");
            }
            r?
        };
        repair_own_lock_entries(mc)?;
        let report = Resync {
            epoch: self.epoch,
            server,
            elapsed: t0.elapsed(),
            bytes,
        };
        info!(
            "node{me}: coherent again after rejoining: {bytes} bytes from {} in {:?}",
            server.map_or("nobody".to_string(), |s| format!("node {}", s.0)),
            report.elapsed
        );
        inner.join.finish(report);
        Ok(())
    }

    /// 3. Post the request; wait for the answer. Returns the server.
    fn request_and_wait(&mut self, mc: &MemoryChannel) -> Result<Option<NodeId>, McError> {
        let inner = &*mc.inner;
        let (me, l) = (self.me, inner.layout);
        let c = &inner.control;
        let req_off = JOIN_REQUEST + 8 * me as usize;
        let done_off = JOIN_DONE + 8 * me as usize;
        // Above anything this node asked for, even answers it missed.
        self.seq = self
            .seq
            .max(c.load_u64(req_off))
            .max(c.load_u64(done_off) >> 8)
            + 1;
        let seq = self.seq;
        let post = || mc.store(Self::meta_addr(&l, req_off), &seq.to_le_bytes());
        post()?;
        debug!("node{me}: join request {seq} posted");
        let start = Instant::now();
        let mut posted = start;
        loop {
            let done = c.load_u64(done_off);
            if done >> 8 >= seq {
                return Ok(Some(NodeId((done & 0xff) as u8)));
            }
            if Arc::strong_count(&mc.inner) <= 1 {
                return Err(McError::Busy {
                    what: "the late join".into(),
                    reason: "the API was closed".into(),
                });
            }
            if let Some(st) = status(mc) {
                if !AdapterErrorStatus::from_word(st.error_status).online {
                    return Err(McError::Offline);
                }
                if st.members & !(1u64 << me) == 0 {
                    warn!("node{me}: every other member left while catching up: keeping this node's copy");
                    return Ok(None);
                }
                if posted.elapsed() > REPOST {
                    warn!(
                        "node{me}: join request {seq} unanswered for {:?} (members {:#x}): posting it again",
                        start.elapsed(),
                        st.members
                    );
                    post()?;
                    posted = Instant::now();
                }
            }
            std::thread::sleep(POLL_BUSY);
        }
    }

    // ---- the server ----------------------------------------------------

    /// Serve one pending join request, if this node is elected for it.
    fn serve_pending(&mut self, mc: &MemoryChannel) {
        let inner = &*mc.inner;
        let me = self.me;
        let c = &inner.control;
        let members = mc.members_mask();
        let nodes = inner.regs.nodes.min(64);
        let pending = |n: u32| {
            c.load_u64(JOIN_REQUEST + 8 * n as usize) > c.load_u64(JOIN_DONE + 8 * n as usize) >> 8
        };
        let now = Instant::now();
        let mut seen = Vec::new();
        let mut chosen = None;
        for j in 0..nodes {
            if j == me || members & (1 << j) == 0 || !pending(j) {
                continue;
            }
            let seq = c.load_u64(JOIN_REQUEST + 8 * j as usize);
            let since = self
                .seen
                .iter()
                .find(|(n, s, _)| *n == j && *s == seq)
                .map_or(now, |e| e.2);
            seen.push((j, seq, since));
            // Coherent members below this one offer first.
            let rank = (0..me)
                .filter(|&m| m != j && members & (1 << m) != 0 && !pending(m))
                .count() as u32;
            if chosen.is_none() && now.duration_since(since) >= RANK_DELAY * rank {
                chosen = Some((j, seq));
            }
        }
        self.seen = seen;
        let Some((j, seq)) = chosen else { return };
        self.last_activity = now;
        let lock = ClusterLock { offset: SERVE_LOCK };
        match lock.acquire(mc, true) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                warn!("node{me}: the serve lock: {e}");
                self.not_before = now + RETRY;
                return;
            }
        }
        // Another member may have served it just before we got the lock.
        let r = if pending(j) && c.load_u64(JOIN_REQUEST + 8 * j as usize) == seq {
            self.serve(mc, j, seq)
        } else {
            Ok(())
        };
        if let Err(e) = &r {
            warn!("node{me}: serving join request {seq} of node {j}: {e}");
            self.not_before = Instant::now() + RETRY;
        }
        if let Err(e) = lock.release(mc) {
            warn!("node{me}: releasing the serve lock: {e}");
        }
    }

    fn serve(&mut self, mc: &MemoryChannel, j: u32, seq: u64) -> Result<(), McError> {
        let inner = &*mc.inner;
        let (me, l) = (self.me, inner.layout);
        let t0 = Instant::now();
        info!("node{me}: serving join request {seq} of node {j}");
        mc.port().set_pct_transient(
            l.resync_first(),
            l.resync_pages(),
            PctEntry::transmit_to(NodeId(j as u8)),
            &[],
        )?;
        let r = self.retransmit(mc, j);
        if let Err(e) =
            mc.port()
                .set_pct_transient(l.resync_first(), l.resync_pages(), PctEntry::DISABLED, &[])
        {
            warn!("node{me}: unmapping the resync window: {e}");
        }
        let (rounds, sent) = r?;
        // Ordered after every retransmission: the joiner sees it last.
        let answer = (seq << 8) | u64::from(me);
        mc.store(
            Self::meta_addr(&l, JOIN_DONE + 8 * j as usize),
            &answer.to_le_bytes(),
        )?;
        info!(
            "node{me}: node {j} is up to date: {sent} bytes in {rounds} round(s), {:?}",
            t0.elapsed()
        );
        Ok(())
    }

    /// Send control pages and arena to `j` through the window until every
    /// word is settled (see the module comment). Returns (rounds, bytes sent).
    fn retransmit(&mut self, mc: &MemoryChannel, j: u32) -> Result<(u32, u64), McError> {
        let inner = &*mc.inner;
        let l = inner.layout;
        let ps = l.page_size as usize;
        let win = Window::of(inner);
        let len = l.resync_pages() as usize * ps;
        let base = l.page_addr(l.resync_first());
        let mut sent = vec![0u8; len];
        win.read(0, &mut sent);
        let mut cur = vec![0u8; len];
        let mut pending = vec![(0, len / 8)];
        let mut bytes = 0u64;
        for round in 0..MAX_ROUNDS {
            bytes += send_runs(mc, base, &sent, &pending)?;
            self.marker(mc)?;
            if mc.members_mask() & (1 << j) == 0 {
                return Err(McError::Busy {
                    what: format!("the resync of node {j}"),
                    reason: "it left the cluster".into(),
                });
            }
            for &(w, n) in &pending {
                win.read(8 * w, &mut cur[8 * w..8 * (w + n)]);
            }
            // The marker is itself a write ordered after the retransmission:
            // the joiner has it, whatever was sent.
            let mark_word = (JOIN_MARK + 8 * self.me as usize) / 8;
            let suspects: Vec<usize> = differing_words(&sent, &cur, &pending)
                .into_iter()
                .filter(|&w| w != mark_word)
                .collect();
            if suspects.is_empty() {
                return Ok((round + 1, bytes));
            }
            std::thread::sleep(observe_delay(round));
            let mut again = Vec::with_capacity(suspects.len());
            for &w in &suspects {
                let mut b = [0u8; 8];
                win.read(8 * w, &mut b);
                if unsettled(&sent[8 * w..8 * w + 8], &cur[8 * w..8 * w + 8], &b) {
                    sent[8 * w..8 * w + 8].copy_from_slice(&b);
                    again.push(w);
                }
            }
            debug!(
                "node{}: resync round {round}: {} word(s) differ, {} to send again",
                self.me,
                suspects.len(),
                again.len()
            );
            if again.is_empty() {
                return Ok((round + 1, bytes));
            }
            pending = runs(&again);
        }
        Err(McError::Busy {
            what: format!("the resync of node {j}"),
            reason: format!("words kept changing for {MAX_ROUNDS} rounds"),
        })
    }
}

/// The status page, or None when it could not be read whole this time (the
/// port then gives an all-zero page, which would read as "offline"; epochs
/// start at 1).
fn status(mc: &MemoryChannel) -> Option<StatusPage> {
    let st = mc.port().status();
    (st.membership_epoch != 0).then_some(st)
}

/// Control pages then arena, as one byte range.
pub(crate) struct Window<'a> {
    control: &'a dyn ReceiveMemory,
    arena: &'a dyn ReceiveMemory,
    split: usize,
}

impl<'a> Window<'a> {
    pub(crate) fn of(inner: &'a Inner) -> Window<'a> {
        Window {
            control: &*inner.control,
            arena: &*inner.arena,
            split: CONTROL_PAGES as usize * inner.layout.page_size as usize,
        }
    }

    pub(crate) fn read(&self, off: usize, buf: &mut [u8]) {
        let end = off + buf.len();
        if end <= self.split {
            self.control.read(off, buf);
        } else if off >= self.split {
            self.arena.read(off - self.split, buf);
        } else {
            let (a, b) = buf.split_at_mut(self.split - off);
            self.control.read(off, a);
            self.arena.read(0, b);
        }
    }
}

/// Send the word runs of `data` to the window at `base`; returns bytes sent.
fn send_runs(
    mc: &MemoryChannel,
    base: u64,
    data: &[u8],
    runs: &[(usize, usize)],
) -> Result<u64, McError> {
    let mut records: Vec<(u64, &[u8])> = Vec::new();
    let mut bytes = 0u64;
    for &(w, n) in runs {
        let (start, end) = (8 * w, 8 * (w + n));
        let mut at = start;
        while at < end {
            let to = (at + RECORD).min(end);
            records.push((base + at as u64, &data[at..to]));
            bytes += (to - at) as u64;
            at = to;
        }
    }
    for batch in records.chunks(BATCH) {
        mc.store_batch(batch)?;
    }
    Ok(bytes)
}

/// Indices of the 8-byte words in `runs` where `a` and `b` differ.
fn differing_words(a: &[u8], b: &[u8], runs: &[(usize, usize)]) -> Vec<usize> {
    const BLOCK: usize = 64;
    let mut out = Vec::new();
    for &(w, n) in runs {
        let mut i = w;
        while i < w + n {
            let k = BLOCK.min(w + n - i);
            if a[8 * i..8 * (i + k)] != b[8 * i..8 * (i + k)] {
                out.extend((i..i + k).filter(|&x| a[8 * x..8 * x + 8] != b[8 * x..8 * x + 8]));
            }
            i += k;
        }
    }
    out
}

/// Whether a word must be sent again, given what was `sent`, what the copy
/// held `after` the marker, and what it holds `now`, a while later. Per byte
/// (stores may write single bytes): a byte is settled if it was sent as it
/// was after the marker, or if it changed again since: a write ordered after
/// the retransmission, which the joiner receives too.
fn unsettled(sent: &[u8], after: &[u8], now: &[u8]) -> bool {
    sent.iter()
        .zip(after)
        .zip(now)
        .any(|((s, a), n)| s != a && n == a)
}

/// Sorted word indices as (first, count) runs.
fn runs(words: &[usize]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &w in words {
        match out.last_mut() {
            Some((f, n)) if *f + *n == w => *n += 1,
            _ => out.push((w, 1)),
        }
    }
    out
}

/// How long the server watches differing words before it sends them again:
/// longer each round, so a word written continuously shows a later write.
fn observe_delay(round: u32) -> Duration {
    Duration::from_micros((200u64 << round.min(7)).min(20_000))
}

/// After catching up: clear this node's entries in lock arrays that no thread
/// of this node holds or is acquiring. Members ignored them while it was out;
/// now it is a member again, an entry left set when it crashed would block the
/// lock forever. Runs before the node is coherent again, so no thread of this
/// node is in the lock protocol past the entry check (see `lock.rs`).
fn repair_own_lock_entries(mc: &MemoryChannel) -> Result<(), McError> {
    let inner = &*mc.inner;
    let (me, l) = (inner.me as usize, inner.layout);
    let c = &inner.control;
    let mut offsets = Vec::new();
    // The meta lock is held only inside a table update, under `meta`.
    let meta = match inner.meta.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    };
    if meta.is_some() && c.load_u32(META_LOCK + 4 * me) != 0 {
        offsets.push(META_LOCK + 4 * me);
    }
    for i in 0..l.lock_capacity() {
        let off = l.lock_offset(i);
        if c.load_u32(off + 4 * me) != 0 && !inner.lock_state.held(off) {
            offsets.push(off + 4 * me);
        }
    }
    if !offsets.is_empty() {
        info!(
            "node{me}: clearing {} lock entries this node left set when it crashed",
            offsets.len()
        );
        let zero = 0u32.to_le_bytes();
        let records: Vec<(u64, &[u8])> = offsets
            .iter()
            .map(|&o| (l.page_addr(0) + o as u64, &zero[..]))
            .collect();
        for batch in records.chunks(BATCH) {
            mc.store_batch(batch)?;
        }
    }
    drop(meta);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differing_words_and_runs() {
        let a = vec![0u8; 8 * 200];
        let mut b = a.clone();
        for w in [3usize, 4, 5, 70, 199] {
            b[8 * w + 7] = 1;
        }
        // Word 70 is outside the runs looked at.
        let d = differing_words(&a, &b, &[(0, 64), (100, 100)]);
        assert_eq!(d, vec![3, 4, 5, 199]);
        assert_eq!(runs(&d), vec![(3, 3), (199, 1)]);
        assert!(differing_words(&a, &a, &[(0, 200)]).is_empty());
        assert_eq!(runs(&[]), vec![]);
    }

    #[test]
    fn a_byte_is_settled_by_a_later_write_to_it_only() {
        let sent = [0u8; 8];
        // Same as sent: nothing to do.
        assert!(!unsettled(&sent, &sent, &[9; 8]));
        // Byte 0 differs after the marker and stays: send again.
        let after = [1, 0, 0, 0, 0, 0, 0, 0];
        assert!(unsettled(&sent, &after, &after));
        // It changed again since: a later write the joiner also gets.
        assert!(!unsettled(&sent, &after, &[2, 0, 0, 0, 0, 0, 0, 0]));
        // A later write to another byte of the word does not settle byte 0.
        assert!(unsettled(&sent, &after, &[1, 5, 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn observation_grows_and_is_bounded() {
        assert!(observe_delay(1) > observe_delay(0));
        assert_eq!(observe_delay(40), Duration::from_millis(20));
    }

    #[test]
    fn gate_and_wait() {
        let s = JoinState::new();
        assert!(s.gate(Duration::ZERO).is_ok());
        s.set(Coherence::Offline);
        assert_eq!(s.generation(), 1);
        assert!(matches!(s.gate(Duration::ZERO), Err(McError::Offline)));
        let e = s.wait(Duration::from_millis(1), true).unwrap_err();
        assert!(e.to_string().contains("rejoin"), "{e}");
        s.set(Coherence::CatchingUp);
        assert_eq!(s.generation(), 1, "only leaving coherence counts");
        assert!(matches!(
            s.gate(Duration::from_millis(1)),
            Err(McError::Timeout(..))
        ));
        let s = Arc::new(s);
        let s2 = s.clone();
        let t = std::thread::spawn(move || s2.gate(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(10));
        s.finish(Resync {
            epoch: 3,
            server: Some(NodeId(0)),
            elapsed: Duration::from_millis(1),
            bytes: 8,
        });
        assert!(t.join().unwrap().is_ok());
        assert_eq!((s.rejoins(), s.coherence()), (1, Coherence::Coherent));
        assert_eq!(s.last().map(|r| r.epoch), Some(3));
    }
}
