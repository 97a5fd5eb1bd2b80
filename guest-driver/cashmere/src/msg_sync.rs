//! Synchronisation by explicit messages, CSM-None (seed 000 s.2.3.1.4;
//! seed 002 s.6.1, "the explicit messages version"): no broadcast, no total
//! order, no remote-write lock arrays.
//!
//! The messages travel in a queue per (sender, receiver) in the receiver's
//! mailbox (seed 002 s.5: "the link endpoints are actually buffers in
//! Memory Channel space that are accessed through remote write"): the
//! sender writes an entry (16 bytes, one packet), then its SendIdx; the
//! receiver that sees SendIdx has the entries before it (per-source FIFO,
//! packet by packet). The receiver's handler (its protocol thread, or a
//! thread of it waiting for a synchronisation message) takes them and, for
//! the sender's flow control, writes back how far it has taken.
//!
//! - **Locks** are seed 002's queue locks (borrowed from TreadMarks): lock
//!   l's manager is node `l mod nodes`, which keeps the tail of the queue of
//!   requesters. A requester sends its request to the manager (REQ_QLOCK),
//!   which makes it the tail and tells the old tail (a FWD message) that it
//!   is next; the old tail hands the lock over (ANS_QLOCK, here GRANT) when
//!   it releases, at once if it already has. The lock starts at its
//!   manager. As the seed's steps say, every acquire goes through the
//!   manager, including one by the node that released the lock last. A
//!   node-level lock first, so one thread per node takes part.
//! - **Barriers**: each node's arrival is a message to the master (node 0),
//!   which answers every node with a release message once all have
//!   arrived (CSM_DMSG_BARRIER_ARRIVAL and _SENSE).
//! - **Flags**: the value is sent to every other node, whose handler keeps
//!   it ("the broadcast is accomplished via explicit messages").
//! - **Failure**: an abort is a message to every node; a lost member is
//!   seen in the cluster's membership, as in CSM-DMS.
//!
//! What it relies on: per-source FIFO only. A release (the diffs and the
//! write notices, each acknowledged, `msg_meta`) is complete before the
//! lock's handoff, the barrier arrival or the flag message leaves, so the
//! node that takes the handoff, the barrier's release or the flag has the
//! notices on its pending list. The start-up barrier, before the
//! mailboxes may be used, stays on Memory Channel (`DmsSync`), as seed 002
//! s.4.1 keeps initialisation there.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mc_api::MemoryChannel;

use super::dms_sync::{check_wait, DmsSync, NodeLocks};
use super::mailbox::Mailboxes;
use super::seams::Synchronization;
use super::site::Site;
use super::space::{CsmSpace, SYNC_QUEUE_ENTRIES};
use super::wait::{FutexBell, WaitKind};
use super::{BarrierWait, CsmError};

/// The receiver writes back how far it has taken a queue every this many
/// entries (the sender's view of the room may lag by as much).
const TAKEN_EVERY: u64 = SYNC_QUEUE_ENTRIES as u64 / 8;
/// No node aborted.
const NONE: u32 = u32::MAX;
/// A queue index word: the run's epoch above these bits, the index below.
const INDEX_BITS: u32 = 40;
const INDEX: u64 = (1 << INDEX_BITS) - 1;

/// A synchronisation message's kind (the first word of its entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
enum Kind {
    /// To the lock's manager: node `b` wants lock `a`.
    LockRequest = 1,
    /// To the old tail of lock `a`'s queue: node `b` is next.
    LockForward = 2,
    /// To the next holder: lock `a` is yours.
    LockGrant = 3,
    /// To the master: this node has arrived at barrier episode `b`.
    Arrival = 4,
    /// From the master: barrier episode `b` is complete.
    Release = 5,
    /// Flag `a` has value `b`.
    Flag = 6,
    /// Node `b` has failed.
    Abort = 7,
}

impl Kind {
    fn decode(w: u32) -> Option<Kind> {
        Some(match w {
            1 => Kind::LockRequest,
            2 => Kind::LockForward,
            3 => Kind::LockGrant,
            4 => Kind::Arrival,
            5 => Kind::Release,
            6 => Kind::Flag,
            7 => Kind::Abort,
            _ => return None,
        })
    }
}

/// One lock as this node sees it.
#[derive(Clone, Copy, Debug)]
struct QueueLock {
    /// At the manager: the last requester (the queue's tail).
    tail: u32,
    /// This node has the lock (held, or released with nobody next).
    token: bool,
    /// A thread of this node holds it.
    held: bool,
    /// The node to hand it to at the release.
    next: Option<u32>,
}

struct SyncState {
    locks: Vec<QueueLock>,
    /// At the master: the newest episode each node has arrived at.
    arrivals: Vec<u64>,
    /// The newest barrier episode the master has released.
    released: u64,
    flags: Vec<u64>,
    /// The latest virtual arrival of a message taken (virtual time on): a
    /// waiter resumes no earlier than the messages it took while waiting.
    last_arrival: u64,
    /// SendIdx per receiver.
    sent: Vec<u64>,
    /// RecvIdx per sender, and what was last written back.
    taken: Vec<u64>,
    taken_told: Vec<u64>,
}

pub struct MsgSync {
    me: u32,
    nodes: u32,
    flags: u32,
    /// The start barrier and the membership (Memory Channel, start-up and
    /// failure detection only).
    start: DmsSync,
    node_locks: NodeLocks,
    state: Mutex<SyncState>,
    aborted: AtomicU32,
    /// This run's start-barrier episode (0 before it): the queues' indices
    /// carry it, so what an earlier run left in a mailbox found again is
    /// not taken for this run's messages.
    epoch: AtomicU64,
    mail: Arc<Mailboxes>,
    bell: Arc<FutexBell>,
}

impl MsgSync {
    pub fn new(
        mc: &MemoryChannel,
        space: CsmSpace,
        locks: u32,
        mail: Arc<Mailboxes>,
        bell: Arc<FutexBell>,
        site: &Site,
    ) -> Result<MsgSync, CsmError> {
        let me = site.me;
        let n = space.nodes;
        let locks = locks.max(1);
        let st = SyncState {
            locks: (0..locks)
                .map(|l| QueueLock {
                    tail: l % n,
                    token: l % n == me,
                    held: false,
                    next: None,
                })
                .collect(),
            arrivals: vec![0; n as usize],
            released: 0,
            flags: vec![0; space.flags as usize],
            last_arrival: 0,
            sent: vec![0; n as usize],
            taken: vec![0; n as usize],
            taken_told: vec![0; n as usize],
        };
        Ok(MsgSync {
            me,
            nodes: n,
            flags: space.flags,
            start: DmsSync::new(mc, space, 1, mail.clone(), bell.clone(), site)?,
            node_locks: NodeLocks::new(locks),
            state: Mutex::new(st),
            aborted: AtomicU32::new(NONE),
            epoch: AtomicU64::new(0),
            mail,
            bell,
        })
    }

    /// The latest virtual arrival of a message taken so far.
    fn last_arrival(&self) -> Option<u64> {
        Some(self.lock_state().last_arrival).filter(|&a| a != 0)
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, SyncState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Post message (`kind`, `a`, `b`) to node `to`: the entry, then
    /// SendIdx. Waits for room if the receiver has not taken enough.
    fn send(
        &self,
        st: &mut SyncState,
        to: u32,
        kind: Kind,
        a: u32,
        b: u64,
    ) -> Result<(), CsmError> {
        let at = *self.mail.at();
        let idx = st.sent[to as usize];
        let epoch = self.epoch.load(Ordering::Acquire);
        let start = Instant::now();
        while idx - self.index(at.sync_taken(to), epoch).min(idx) >= SYNC_QUEUE_ENTRIES as u64 {
            self.check(start, BarrierWait::QueueRoom)?;
            std::thread::sleep(Duration::from_micros(50));
        }
        let mut e = [0u8; 16];
        e[..4].copy_from_slice(&(kind as u32).to_le_bytes());
        e[4..8].copy_from_slice(&a.to_le_bytes());
        e[8..].copy_from_slice(&b.to_le_bytes());
        // Entry first, then SendIdx: a receiver that sees the index has the
        // entry (per-source FIFO, packet by packet).
        self.mail.post(to, at.sync_entry(self.me, idx), &e)?;
        self.mail
            .post_u64(to, at.sync_sent(self.me), epoch << INDEX_BITS | (idx + 1))?;
        st.sent[to as usize] = idx + 1;
        Ok(())
    }

    /// The queue index at `offset` of this node's mailbox, if written in
    /// this run (`epoch`); 0 otherwise.
    fn index(&self, offset: usize, epoch: u64) -> u64 {
        let w = self.mail.load_u64(offset);
        if w >> INDEX_BITS == epoch {
            w & INDEX
        } else {
            0
        }
    }

    /// Take every message that has arrived (the handler).
    fn take_messages(&self, st: &mut SyncState) -> Result<(), CsmError> {
        let at = *self.mail.at();
        let epoch = self.epoch.load(Ordering::Acquire);
        if epoch == 0 {
            return Ok(());
        }
        let mut woke = false;
        for s in (0..self.nodes).filter(|&s| s != self.me) {
            let sent = self.index(at.sync_sent(s), epoch);
            let mut i = st.taken[s as usize];
            if sent <= i {
                continue;
            }
            while i < sent {
                let mut e = [0u8; 16];
                self.mail.read(at.sync_entry(s, i), &mut e)?;
                if let Some(a) = self.mail.arrival(at.sync_entry(s, i), e.len()) {
                    st.last_arrival = st.last_arrival.max(a);
                }
                let w = |k: usize| u32::from_le_bytes([e[k], e[k + 1], e[k + 2], e[k + 3]]);
                let b = u64::from(w(8)) | u64::from(w(12)) << 32;
                let kind = Kind::decode(w(0)).ok_or(CsmError::BadRequest {
                    from: s,
                    page: w(0),
                })?;
                woke |= self.handle(st, s, kind, w(4), b)?;
                i += 1;
            }
            st.taken[s as usize] = i;
            if i - st.taken_told[s as usize] >= TAKEN_EVERY {
                self.mail
                    .post_u64(s, at.sync_taken(self.me), epoch << INDEX_BITS | i)?;
                st.taken_told[s as usize] = i;
            }
        }
        if woke {
            self.bell.ring();
        }
        Ok(())
    }

    /// One message from node `from`; returns whether a waiter of this node
    /// may now go on.
    fn handle(
        &self,
        st: &mut SyncState,
        from: u32,
        kind: Kind,
        a: u32,
        b: u64,
    ) -> Result<bool, CsmError> {
        let bad = || CsmError::BadRequest { from, page: a };
        match kind {
            Kind::LockRequest | Kind::LockForward | Kind::LockGrant
                if a as usize >= st.locks.len() =>
            {
                Err(bad())
            }
            Kind::LockRequest => self
                .queue_request(st, a, u32::try_from(b).unwrap_or(u32::MAX))
                .map(|()| false),
            Kind::LockForward => self.forwarded(st, a, u32::try_from(b).unwrap_or(u32::MAX)),
            Kind::LockGrant => {
                let l = &mut st.locks[a as usize];
                l.token = true;
                l.held = true;
                Ok(true)
            }
            Kind::Arrival => {
                let n = st.arrivals.get_mut(from as usize).ok_or_else(bad)?;
                *n = (*n).max(b);
                Ok(true)
            }
            Kind::Release => {
                st.released = st.released.max(b);
                Ok(true)
            }
            Kind::Flag => {
                *st.flags.get_mut(a as usize).ok_or_else(bad)? = b;
                Ok(true)
            }
            Kind::Abort => {
                let _ = self.aborted.compare_exchange(
                    NONE,
                    u32::try_from(b).unwrap_or(u32::MAX),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                );
                Ok(true)
            }
        }
    }

    /// At lock `l`'s manager: node `r` joins the queue; its old tail
    /// learns that `r` is next.
    fn queue_request(&self, st: &mut SyncState, l: u32, r: u32) -> Result<(), CsmError> {
        let old = std::mem::replace(&mut st.locks[l as usize].tail, r);
        if old == self.me {
            self.forwarded(st, l, r).map(drop)
        } else {
            self.send(st, old, Kind::LockForward, l, u64::from(r))
        }
    }

    /// At lock `l`'s old tail: node `r` is next. Hand the lock over now if
    /// this node has it and no thread holds it; otherwise at the release.
    /// Returns whether this node's own waiter got it.
    fn forwarded(&self, st: &mut SyncState, l: u32, r: u32) -> Result<bool, CsmError> {
        let q = &mut st.locks[l as usize];
        if !q.token || q.held {
            q.next = Some(r);
            return Ok(false);
        }
        if r == self.me {
            q.held = true;
            return Ok(true);
        }
        q.token = false;
        self.send(st, r, Kind::LockGrant, l, 0)?;
        Ok(false)
    }

    /// Fails a wait when a node failed or it took too long.
    fn check(&self, start: Instant, waiting_for: BarrierWait) -> Result<(), CsmError> {
        check_wait(self.aborted(), start, waiting_for)
    }

    /// Wait until `done` holds of the state, taking messages meanwhile
    /// and running `meanwhile`.
    fn wait_for(
        &self,
        waiting_for: BarrierWait,
        meanwhile: &mut dyn FnMut() -> Result<(), CsmError>,
        done: impl Fn(&SyncState) -> bool,
    ) -> Result<(), CsmError> {
        let start = Instant::now();
        self.bell.wait(
            WaitKind::Remote,
            || {
                {
                    let mut st = self.lock_state();
                    self.take_messages(&mut st)?;
                    if done(&st) {
                        return Ok(Some(()));
                    }
                }
                meanwhile()?;
                self.check(start, waiting_for).map(|()| None)
            },
            || self.last_arrival(),
        )
    }

    fn check_flag(&self, flag: u32) -> Result<(), CsmError> {
        if flag >= self.flags {
            return Err(CsmError::NoSuchFlag {
                flag,
                flags: self.flags,
            });
        }
        Ok(())
    }
}

impl Synchronization for MsgSync {
    fn lock_acquire(&self, lock: u32) -> Result<(), CsmError> {
        let l = lock as usize;
        if !self.node_locks.take(lock) {
            return Err(CsmError::NoSuchLock {
                lock,
                locks: u32::try_from(self.lock_state().locks.len()).expect("at most 4096 locks"),
            });
        }
        let r = (|| {
            {
                let mut st = self.lock_state();
                let manager = lock % self.nodes;
                if manager == self.me {
                    self.queue_request(&mut st, lock, self.me)?;
                } else {
                    self.send(
                        &mut st,
                        manager,
                        Kind::LockRequest,
                        lock,
                        u64::from(self.me),
                    )?;
                }
            }
            self.wait_for(BarrierWait::LockHandoff, &mut || Ok(()), |st| {
                st.locks[l].held
            })
        })();
        if r.is_err() {
            self.node_locks.give_back(lock);
        }
        r
    }

    fn lock_release(&self, lock: u32) -> Result<(), CsmError> {
        let r = (|| {
            let mut st = self.lock_state();
            let locks = u32::try_from(st.locks.len()).expect("at most 4096 locks");
            let q = st
                .locks
                .get_mut(lock as usize)
                .ok_or(CsmError::NoSuchLock { lock, locks })?;
            q.held = false;
            if let Some(n) = q.next.take() {
                q.token = false;
                self.send(&mut st, n, Kind::LockGrant, lock, 0)?;
            }
            Ok(())
        })();
        self.node_locks.give_back(lock);
        r
    }

    fn start_barrier(&self) -> Result<(), CsmError> {
        // Known before this node arrives (the master moves on only after
        // every arrival), so set before any node can send in this run.
        self.epoch
            .store(self.start.next_start_episode()?, Ordering::Release);
        self.start.start_barrier()
    }

    fn barrier(
        &self,
        episode: u64,
        meanwhile: &mut dyn FnMut() -> Result<(), CsmError>,
    ) -> Result<(), CsmError> {
        if self.me == 0 {
            let others = 1..self.nodes as usize;
            self.wait_for(BarrierWait::Arrivals, meanwhile, |st| {
                st.arrivals[others.clone()].iter().all(|&a| a >= episode)
            })?;
            let mut st = self.lock_state();
            st.released = episode;
            for n in 1..self.nodes {
                self.send(&mut st, n, Kind::Release, 0, episode)?;
            }
            Ok(())
        } else {
            self.send(&mut self.lock_state(), 0, Kind::Arrival, 0, episode)?;
            self.wait_for(BarrierWait::Master, meanwhile, |st| st.released >= episode)
        }
    }

    fn flag_set(&self, flag: u32, value: u64) -> Result<(), CsmError> {
        self.check_flag(flag)?;
        let mut st = self.lock_state();
        st.flags[flag as usize] = value;
        for n in (0..self.nodes).filter(|&n| n != self.me) {
            self.send(&mut st, n, Kind::Flag, flag, value)?;
        }
        drop(st);
        // This node's own waiters.
        self.bell.ring();
        Ok(())
    }

    fn flag_arrival(&self, _flag: u32) -> Option<u64> {
        self.last_arrival()
    }

    fn flag_get(&self, flag: u32) -> Result<u64, CsmError> {
        self.check_flag(flag)?;
        let mut st = self.lock_state();
        self.take_messages(&mut st)?;
        Ok(st.flags[flag as usize])
    }

    fn abort(&self) {
        if self.aborted().is_none() {
            let _ =
                self.aborted
                    .compare_exchange(NONE, self.me, Ordering::AcqRel, Ordering::Relaxed);
            let mut st = self.lock_state();
            for n in (0..self.nodes).filter(|&n| n != self.me) {
                let _ = self.send(&mut st, n, Kind::Abort, 0, u64::from(self.me));
            }
        }
        self.bell.ring();
    }

    fn aborted(&self) -> Option<u32> {
        match self.aborted.load(Ordering::Acquire) {
            NONE => self.start.aborted(),
            n => Some(n),
        }
    }

    fn refresh_members(&self) -> bool {
        self.start.refresh_members()
    }

    fn serve(&self) -> Result<(), CsmError> {
        let mut st = self.lock_state();
        self.take_messages(&mut st)
    }
}
