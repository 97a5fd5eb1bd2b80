//! Lock sets (imc_lkalloc, imc_lkacquire, imc_lkrelease, imc_lkdealloc):
//! sets of cluster spinlocks allocated by key in the lock-set table. Threads
//! of one node first take a local lock, so only one of them is in the cluster
//! protocol (`spinlock`) per lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use mc_driver::vclock;

use crate::error::{McError, Shortage};
use mc_driver::backoff::Backoff;

use crate::host::NodeHost;
use crate::node::{wait_policy, Node};
use crate::spinlock::ClusterLock;
use crate::table::{first_fit, LockSetEntry, Tables};

/// Threads of this node that hold (or are acquiring) each lock: the local
/// test-and-set that comes before the cluster protocol.
///
/// In virtual time a local lock carries its releaser's time: the next
/// thread of the node to take it resumes no earlier.
#[derive(Default)]
pub(crate) struct LocalLocks {
    owners: Mutex<HashMap<usize, ThreadId>>,
    released_at: Mutex<HashMap<usize, u64>>,
}

impl LocalLocks {
    fn try_take(&self, offset: usize) -> Result<bool, ()> {
        let me = std::thread::current().id();
        let mut o = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        match o.get(&offset) {
            Some(t) if *t == me => Err(()),
            Some(_) => Ok(false),
            None => {
                o.insert(offset, me);
                Ok(true)
            }
        }
    }

    fn give_back(&self, offset: usize) {
        if vclock::enabled() {
            // A tick, not a sync: the quantum's gate must not hold this
            // thread with `released_at` locked. It did (the clock was read
            // inside the lock's guard): the node's other threads then
            // blocked on the mutex, outside any wait the clock knows of,
            // and held every thread ahead until the board's 250 ms stall
            // rule let them pass (Water-Nsquared at 8:4 spent most of its
            // wall-clock time so).
            let now = vclock::tick();
            self.released_at
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(offset, now);
        }
        self.owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&offset);
    }

    /// When a thread of this node last released the lock at `offset`.
    fn released_at(&self, offset: usize) -> Option<u64> {
        self.released_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&offset)
            .copied()
    }

    /// Held, or being acquired, by a thread of this node.
    pub(crate) fn held(&self, offset: usize) -> bool {
        self.owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&offset)
    }

    fn set_owner(&self, offset: usize) {
        self.owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(offset, std::thread::current().id());
    }
}

/// What lock sets need of the node they belong to: the node, its tables and
/// its threads' local locks (the handle, `MemoryChannel`, provides them; a
/// lock set keeps the node's API open while it lives).
pub(crate) trait LockHost: NodeHost {
    fn local_locks(&self) -> &LocalLocks;
}

/// A set of cluster spinlocks (imc_lkalloc). Cheap to share between threads.
pub struct LockSet {
    host: Arc<dyn LockHost>,
    entry: LockSetEntry,
}

impl LockSet {
    fn new(host: Arc<dyn LockHost>, entry: LockSetEntry) -> Self {
        LockSet { host, entry }
    }

    pub fn id(&self) -> u32 {
        self.entry.id
    }

    pub fn key(&self) -> u32 {
        self.entry.key
    }

    pub fn count(&self) -> u32 {
        self.entry.count
    }

    fn lock(&self, index: u32) -> Result<ClusterLock, McError> {
        if index >= self.entry.count {
            return Err(McError::NoSuchLock {
                set: self.entry.id,
                index,
                count: self.entry.count,
            });
        }
        Ok(ClusterLock {
            offset: self
                .host
                .node()
                .layout
                .lock_offset(self.entry.first_lock + index),
        })
    }

    fn mark_held(&self, index: u32) {
        if let Ok(l) = self.lock(index) {
            self.host.local_locks().set_owner(l.offset);
        }
    }

    /// Whether this node holds lock `index` (after creating the set with
    /// `creator`, lock 0 is held).
    pub fn holds(&self, index: u32) -> bool {
        self.lock(index)
            .is_ok_and(|l| self.host.local_locks().held(l.offset))
    }

    /// Acquire lock `index`, spinning until it is free (imc_lkacquire).
    pub fn acquire(&self, index: u32) -> Result<(), McError> {
        let l = self.lock(index)?;
        let local = &self.host.local_locks();
        // Another thread of this node holds or is taking it: wait as the
        // API's other waits do (spin, then sleep), not in a yield loop.
        let mut backoff = Backoff::with_policy(wait_policy(self.host.node().layout.nodes));
        let mut waited = false;
        loop {
            match local.try_take(l.offset) {
                Err(()) => {
                    if waited {
                        vclock::wait_end(None);
                    }
                    return Err(McError::AlreadyHeld {
                        set: self.entry.id,
                        index,
                    });
                }
                Ok(true) => break,
                Ok(false) => {
                    if !waited {
                        waited = true;
                        vclock::wait_begin();
                    }
                    backoff.snooze()
                }
            }
        }
        if waited {
            vclock::wait_end(local.released_at(l.offset));
        }
        match l.acquire(self.host.node(), false) {
            Ok(_) => Ok(()),
            Err(e) => {
                local.give_back(l.offset);
                Err(e)
            }
        }
    }

    /// One attempt: true if lock `index` is now held.
    pub fn try_acquire(&self, index: u32) -> Result<bool, McError> {
        let l = self.lock(index)?;
        let local = &self.host.local_locks();
        match local.try_take(l.offset) {
            Err(()) => {
                return Err(McError::AlreadyHeld {
                    set: self.entry.id,
                    index,
                })
            }
            Ok(false) => return Ok(false),
            Ok(true) => {}
        }
        match l.acquire(self.host.node(), true) {
            Ok(true) => Ok(true),
            Ok(false) => {
                local.give_back(l.offset);
                Ok(false)
            }
            Err(e) => {
                local.give_back(l.offset);
                Err(e)
            }
        }
    }

    /// Release lock `index` (imc_lkrelease). Releasing a lock this node does not
    /// hold is an error.
    pub fn release(&self, index: u32) -> Result<(), McError> {
        let l = self.lock(index)?;
        let local = &self.host.local_locks();
        if !local.held(l.offset) {
            return Err(McError::NotHeld {
                set: self.entry.id,
                index,
            });
        }
        l.release(self.host.node())?;
        local.give_back(l.offset);
        Ok(())
    }

    /// Deallocate the set (imc_lkdealloc): it disappears when the last node
    /// that allocated it deallocates it.
    pub fn dealloc(self) -> Result<(), McError> {
        dealloc(self.host.node(), self.host.tables(), self.entry.id)
    }
}

/// Allocate (or find) the set of `count` cluster spinlocks under `key`
/// (imc_lkalloc). `exclusive`: fail if it exists. `creator`: if this call
/// creates the set, it returns holding lock 0, so the creator can
/// initialise shared data before anyone else gets in.
pub(crate) fn alloc(
    host: &Arc<dyn LockHost>,
    key: u32,
    count: u32,
    exclusive: bool,
    creator: bool,
) -> Result<LockSet, McError> {
    if count == 0 {
        return Err(McError::EmptyLockSet);
    }
    let node = host.node();
    let l = node.layout;
    let me = node.me;
    let (entry, created) = host.tables().with_locksets(node, |t| {
        if let Some(e) = t.by_key(key).copied() {
            if exclusive {
                return Err(McError::LockSetExists(key));
            }
            if e.count != count {
                return Err(McError::LockSetSize {
                    key,
                    count: e.count,
                    wanted: count,
                });
            }
            let e2 = t.by_id_mut(e.id).map(|x| {
                x.attached |= 1 << me;
                *x
            });
            return Ok(((e2.unwrap_or(e), false), true));
        }
        let mut used: Vec<(u32, u32)> = t.entries.iter().map(|e| (e.first_lock, e.count)).collect();
        let first = first_fit(&mut used, 0, l.lock_capacity(), count)
            .ok_or(McError::NoSpace(Shortage::Locks(count)))?;
        let id = t.next_id;
        t.next_id += 1;
        let e = LockSetEntry {
            key,
            id,
            first_lock: first,
            count,
            creator: crate::node::node_id(me).0,
            attached: 1 << me,
        };
        t.entries.push(e);
        if creator {
            // Taken before the table update is visible: nobody can get in first.
            let lock0 = ClusterLock {
                offset: l.lock_offset(first),
            };
            lock0.acquire(node, false)?;
        }
        Ok(((e, true), true))
    })?;
    let set = LockSet::new(host.clone(), entry);
    if created && creator {
        set.mark_held(0);
    }
    Ok(set)
}

fn dealloc(node: &Node, tables: &Tables, id: u32) -> Result<(), McError> {
    let me = node.me;
    tables.with_locksets(node, |t| {
        let e = t.by_id_mut(id).ok_or(McError::NoSuchLockSet(id))?;
        e.attached &= !(1 << me);
        if e.attached == 0 {
            t.entries.retain(|e| e.id != id);
        }
        Ok(((), true))
    })
}
