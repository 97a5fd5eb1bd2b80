//! CSM-DMS synchronisation (seed 000 s.2.3.1.1 "Synchronization", seed 002
//! s.6.1): locks are the API's cluster spinlocks (one entry per node in a
//! broadcast + loopback page; write, wait for loopback, read the array),
//! taken after a node-level lock so one thread per node contends; barriers
//! are an arrival word per node in the master's (node 0's) mailbox and a
//! sense word the master writes into every other node's mailbox once all
//! have arrived; flags are write-once broadcast words.
//!
//! Every wait is the node's one waiting discipline (`wait`): a barrier
//! waiter sleeps until its mailbox takes a store; a flag setter rings every
//! other node's mailbox so their flag waiters look again.

use mc_api::vclock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use mc_api::backoff::poll_until;
use mc_api::{LockSet, MemoryChannel, RxRegion, TxRegion};

use super::mailbox::Mailboxes;
use super::seams::Synchronization;
use super::site::Site;
use super::space::{CsmSpace, KEY_LOCKS, KEY_SYNC};
use super::wait::{FutexBell, WaitKind};
use super::{BarrierWait, CsmError};

const WAIT: Duration = Duration::from_secs(300);

/// No node lost: the `lost` word's value then.
const NONE_LOST: u32 = u32::MAX;

/// The node-level half of a lock: which of the node's locks a thread holds
/// or is acquiring. Other threads of the node wait here, asleep, instead of
/// contending in the cluster protocol.
///
/// In virtual time a lock carries its releaser's time: a thread that waited
/// for it resumes no earlier (docs/virtual-time.md s.5).
pub(crate) struct NodeLocks {
    held: Mutex<Vec<bool>>,
    freed: Condvar,
    released_at: Mutex<Vec<u64>>,
}

impl NodeLocks {
    pub(crate) fn new(locks: u32) -> NodeLocks {
        NodeLocks {
            held: Mutex::new(vec![false; locks as usize]),
            freed: Condvar::new(),
            released_at: Mutex::new(vec![0; locks as usize]),
        }
    }

    /// Wait until no other thread of the node holds or acquires `lock`,
    /// then take it; `false` (taking nothing) for a lock that does not
    /// exist.
    pub(crate) fn take(&self, lock: u32) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if lock as usize >= held.len() {
            return false;
        }
        if held[lock as usize] {
            vclock::wait_begin();
            while held[lock as usize] {
                held = self.freed.wait(held).unwrap_or_else(|p| p.into_inner());
            }
            let at = self
                .released_at
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(lock as usize)
                .copied();
            vclock::wait_end(at);
        }
        held[lock as usize] = true;
        true
    }

    pub(crate) fn give_back(&self, lock: u32) {
        if vclock::enabled() {
            let now = vclock::tick();
            if let Some(t) = self
                .released_at
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_mut(lock as usize)
            {
                *t = now;
            }
        }
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = held.get_mut(lock as usize) {
            *h = false;
        }
        drop(held);
        self.freed.notify_all();
    }
}

pub struct DmsSync {
    space: CsmSpace,
    me: u32,
    mc: MemoryChannel,
    /// The adapters the program runs on: one that leaves the cluster (its
    /// adapter crashed) ends the run with an error naming its (first)
    /// protocol node.
    members: u64,
    /// Protocol nodes per adapter (1L: processors per machine).
    per_adapter: u32,
    /// The first member found gone (`NONE_LOST` while all are there),
    /// refreshed outside the fault path.
    lost: AtomicU32,
    locks: LockSet,
    node_locks: NodeLocks,
    tx: Arc<TxRegion>,
    rx: Arc<RxRegion>,
    mail: Arc<Mailboxes>,
    bell: Arc<FutexBell>,
}

impl DmsSync {
    pub fn new(
        mc: &MemoryChannel,
        space: CsmSpace,
        locks: u32,
        mail: Arc<Mailboxes>,
        bell: Arc<FutexBell>,
        site: &Site,
    ) -> Result<DmsSync, CsmError> {
        let id = mc.region_alloc(KEY_SYNC, space.sync_bytes(), true)?;
        let locks = locks.max(1);
        Ok(DmsSync {
            space,
            me: site.me,
            mc: mc.clone(),
            // Every adapter of the cluster takes part; one that is not a
            // member (now or later) is lost.
            members: if site.adapters() >= 64 {
                u64::MAX
            } else {
                (1u64 << site.adapters()) - 1
            },
            per_adapter: site.per_adapter,
            lost: AtomicU32::new(NONE_LOST),
            locks: mc.lock_alloc(KEY_LOCKS, locks, false, false)?,
            node_locks: NodeLocks::new(locks),
            tx: site.transmit_all(mc, id)?,
            rx: site.receive(mc, id, false)?,
            mail,
            bell,
        })
    }

    /// Fails the wait of a barrier or flag when a node failed or it took too
    /// long.
    fn check(&self, start: Instant, waiting_for: BarrierWait) -> Result<(), CsmError> {
        check_wait(self.aborted(), start, waiting_for)
    }
}

/// Ends a synchronisation wait (a barrier, a flag, a lock handoff) when a
/// node has failed (`aborted`) or the wait began more than `WAIT` ago.
pub(crate) fn check_wait(
    aborted: Option<u32>,
    start: Instant,
    waiting_for: BarrierWait,
) -> Result<(), CsmError> {
    if let Some(node) = aborted {
        return Err(CsmError::NodeFailed { node });
    }
    if start.elapsed() > WAIT {
        return Err(CsmError::Timeout {
            after: WAIT,
            waiting_for,
        });
    }
    Ok(())
}

impl DmsSync {
    /// The episode of the next start barrier on this cluster: one past the
    /// last one's, which is the same on every node by the time any node
    /// starts (every node arrives before the master writes it).
    pub(crate) fn next_start_episode(&self) -> Result<u64, CsmError> {
        Ok(self.rx.load_u64(self.space.sense())? + 1)
    }
}

impl Synchronization for DmsSync {
    fn lock_acquire(&self, lock: u32) -> Result<(), CsmError> {
        if !self.node_locks.take(lock) {
            // The API names the error.
            self.locks.acquire(lock)?;
            return Ok(());
        }
        let r = self.locks.acquire(lock);
        if r.is_err() {
            self.node_locks.give_back(lock);
        }
        Ok(r?)
    }

    fn lock_release(&self, lock: u32) -> Result<(), CsmError> {
        let r = self.locks.release(lock);
        self.node_locks.give_back(lock);
        Ok(r?)
    }

    fn start_barrier(&self) -> Result<(), CsmError> {
        // The mailboxes are not known to be attached everywhere yet: this
        // one polls the sync region (start-up only). A cluster used before
        // has its last start barrier's sense there, the same on every node
        // by now: go on from it.
        let episode = self.next_start_episode()?;
        self.tx.write_u64(self.space.arrival(self.me), episode)?;
        let failed = |node| CsmError::NodeFailed { node };
        if self.me == 0 {
            poll_until(WAIT, || {
                if let Some(n) = self.aborted() {
                    return Some(Err(failed(n)));
                }
                (0..self.space.nodes)
                    .all(|n| self.rx.load_u64(self.space.arrival(n)).unwrap_or(0) >= episode)
                    .then_some(Ok(()))
            })
            .ok_or(CsmError::Timeout {
                after: WAIT,
                waiting_for: BarrierWait::Arrivals,
            })??;
            self.tx.write_u64(self.space.sense(), episode)?;
        } else {
            poll_until(WAIT, || {
                if let Some(n) = self.aborted() {
                    return Some(Err(failed(n)));
                }
                (self.rx.load_u64(self.space.sense()).unwrap_or(0) >= episode).then_some(Ok(()))
            })
            .ok_or(CsmError::Timeout {
                after: WAIT,
                waiting_for: BarrierWait::Master,
            })??;
        }
        Ok(())
    }

    fn barrier(
        &self,
        episode: u64,
        meanwhile: &mut dyn FnMut() -> Result<(), CsmError>,
    ) -> Result<(), CsmError> {
        let start = Instant::now();
        let s = &self.space;
        let at = *self.mail.at();
        if self.me == 0 {
            // Every other node's arrival is in our mailbox, after its
            // release (its diffs and notices) in its FIFO order: seeing it,
            // we have everything it sent before (total order).
            self.bell.wait(
                WaitKind::Remote,
                || {
                    if (1..s.nodes).all(|n| self.mail.load_u64(at.arrival(n)) >= episode) {
                        return Ok(Some(()));
                    }
                    meanwhile()?;
                    self.check(start, BarrierWait::Arrivals).map(|()| None)
                },
                || {
                    // The latest arrival in virtual time: each node's own
                    // time word (its arrival words share the arrival
                    // table's granules, whose entry is the last to land).
                    (1..s.nodes)
                        .filter_map(|n| {
                            let sent = self.mail.load_u64(at.arrival_time(n));
                            let sent = (sent > 0).then(|| vclock::one_way(sent, 8));
                            sent.max(self.mail.arrival(at.arrival(n), 8))
                        })
                        .max()
                },
            )?;
            for n in 1..s.nodes {
                self.mail.post_u64(n, at.sense(), episode)?;
            }
        } else {
            if vclock::enabled() {
                // Before the arrival word, so the master has it when it sees
                // that (FIFO order).
                self.mail
                    .post_u64(0, at.arrival_time(self.me), vclock::tick())?;
            }
            self.mail.post_u64(0, at.arrival(self.me), episode)?;
            // The sense comes after every arrival in the total order, so a
            // node that sees it has every notice sent to it before them.
            self.bell.wait(
                WaitKind::Remote,
                || {
                    if self.mail.load_u64(at.sense()) >= episode {
                        return Ok(Some(()));
                    }
                    meanwhile()?;
                    self.check(start, BarrierWait::Master).map(|()| None)
                },
                || self.mail.arrival(at.sense(), 8),
            )?;
        }
        Ok(())
    }

    fn abort(&self) {
        if self.aborted().is_none() {
            let _ = self
                .tx
                .post(self.space.abort(), &(u64::from(self.me) + 1).to_le_bytes());
            for n in (0..self.space.nodes).filter(|&n| n != self.me) {
                let _ = self.mail.ring(n);
            }
        }
        self.bell.ring();
    }

    fn aborted(&self) -> Option<u32> {
        match self.rx.load_u64(self.space.abort()).unwrap_or(0) {
            // A crashed adapter cannot write the abort word: the membership
            // change the device reports says it instead.
            0 => match self.lost.load(Ordering::Relaxed) {
                NONE_LOST => None,
                n => Some(n),
            },
            n => Some(u32::try_from(n - 1).unwrap_or(u32::MAX)),
        }
    }

    fn refresh_members(&self) -> bool {
        let lost = self.members & !self.mc.members_mask();
        if lost != 0 {
            let first = lost.trailing_zeros() * self.per_adapter;
            self.lost.store(first, Ordering::Relaxed);
        }
        lost != 0
    }

    fn flag_set(&self, flag: u32, value: u64) -> Result<(), CsmError> {
        if flag >= self.space.flags {
            return Err(CsmError::NoSuchFlag {
                flag,
                flags: self.space.flags,
            });
        }
        if vclock::enabled() {
            // Before the flag, in FIFO order: a waiter that sees the flag
            // sees the time it was set.
            self.tx
                .write_u64(self.space.flag_time(flag), vclock::tick())?;
        }
        self.tx.write_u64(self.space.flag(flag), value)?;
        // After the flag in FIFO order: a woken waiter finds it set.
        for n in (0..self.space.nodes).filter(|&n| n != self.me) {
            self.mail.ring(n)?;
        }
        // This node's own waiters see the flag once it has come back; its
        // echo, after it, wakes them (through the mailbox interrupt).
        self.mail.post_echo()?;
        Ok(())
    }

    fn flag_get(&self, flag: u32) -> Result<u64, CsmError> {
        if flag >= self.space.flags {
            return Err(CsmError::NoSuchFlag {
                flag,
                flags: self.space.flags,
            });
        }
        Ok(self.rx.load_u64(self.space.flag(flag))?)
    }

    fn flag_arrival(&self, flag: u32) -> Option<u64> {
        let set_at = self.rx.load_u64(self.space.flag_time(flag)).ok()?;
        Some(vclock::one_way(set_at, 8))
    }
}
