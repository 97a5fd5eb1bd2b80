//! Cluster spinlocks built from remote writes, broadcast, loopback and total
//! order, as Cashmere's locks are (seed 000 s.2.3.1.1): a lock is an array with
//! one entry per node in a broadcast + loopback page. To acquire, a node writes
//! a fresh ticket into its own entry, waits for the write to come back, then
//! reads the whole array; if any other member's entry is set it clears its own,
//! backs off and tries again. Total order makes this safe: of two contenders,
//! the later writer sees the earlier one's entry when its own write lands.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::table::LockSetEntry;
use super::{wait_for, McError, MemoryChannel, OP_TIMEOUT};

static TICKET: AtomicU32 = AtomicU32::new(1);

fn ticket() -> u32 {
    loop {
        let t = TICKET.fetch_add(1, Ordering::Relaxed);
        if t != 0 {
            return t;
        }
    }
}

/// Threads of this node that hold (or are acquiring) each lock: the local
/// test-and-set that comes before the cluster protocol.
#[derive(Default)]
pub(crate) struct LocalLocks {
    owners: Mutex<HashMap<usize, ThreadId>>,
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
        self.owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&offset);
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

/// One lock's array, at `offset` in the control pages.
pub(crate) struct ClusterLock {
    pub(crate) offset: usize,
}

impl ClusterLock {
    fn my_entry(&self, mc: &MemoryChannel) -> (usize, u64) {
        let me = mc.inner().me() as usize;
        let off = self.offset + 4 * me;
        (off, mc.inner().layout().page_addr(0) + off as u64)
    }

    /// The cluster half of acquiring: returns false only for `try_once` on
    /// contention.
    pub(crate) fn acquire(&self, mc: &MemoryChannel, try_once: bool) -> Result<bool, McError> {
        let inner = mc.inner();
        let c = inner.control();
        let me = inner.me();
        let (mine, addr) = self.my_entry(mc);
        let mut backoff_us: u64 = 2;
        let mut rng = (u64::from(me) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ Instant::now().elapsed().as_nanos() as u64;
        let start = Instant::now();
        loop {
            // After a rejoin this node's copy of the arrays is stale until it
            // has caught up; a thread that got past here before the crash
            // sees the generation move and starts over.
            inner.join.gate(OP_TIMEOUT)?;
            let generation = inner.join.generation();
            let t = ticket();
            mc.store(addr, &t.to_le_bytes())?;
            wait_for("a lock entry to loop back", OP_TIMEOUT, || {
                (c.load_u32(mine) == t).then_some(())
            })?;
            let members = mc.members_mask();
            let contended = (0..inner.layout().nodes)
                .filter(|&n| n != me && members & (1 << n) != 0)
                .any(|n| c.load_u32(self.offset + 4 * n as usize) != 0);
            let stale = inner.join.generation() != generation || !inner.join.is_coherent();
            if !contended && !stale {
                return Ok(true);
            }
            mc.store(addr, &0u32.to_le_bytes())?;
            if stale {
                continue;
            }
            if try_once {
                return Ok(false);
            }
            if start.elapsed() > OP_TIMEOUT * 4 {
                return Err(McError::Timeout(
                    OP_TIMEOUT * 4,
                    "a cluster spinlock".into(),
                ));
            }
            // Randomised exponential back-off so contenders do not collide forever.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let wait = backoff_us / 2 + rng % (backoff_us / 2 + 1);
            let until = Instant::now() + Duration::from_micros(wait);
            while Instant::now() < until {
                std::thread::yield_now();
            }
            backoff_us = (backoff_us * 2).min(64);
        }
    }

    pub(crate) fn release(&self, mc: &MemoryChannel) -> Result<(), McError> {
        let (_, addr) = self.my_entry(mc);
        mc.store(addr, &0u32.to_le_bytes())
    }
}

/// A set of cluster spinlocks (imc_lkalloc). Cheap to share between threads.
pub struct LockSet {
    mc: MemoryChannel,
    entry: LockSetEntry,
}

impl LockSet {
    pub(crate) fn new(mc: MemoryChannel, entry: LockSetEntry) -> Self {
        LockSet { mc, entry }
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
                .mc
                .inner()
                .layout()
                .lock_offset(self.entry.first_lock + index),
        })
    }

    pub(crate) fn mark_held(&self, index: u32) {
        if let Ok(l) = self.lock(index) {
            self.mc.inner().lock_state.set_owner(l.offset);
        }
    }

    /// Whether this node holds lock `index` (after creating the set with
    /// `creator`, lock 0 is held).
    pub fn holds(&self, index: u32) -> bool {
        self.lock(index)
            .is_ok_and(|l| self.mc.inner().lock_state.held(l.offset))
    }

    /// Acquire lock `index`, spinning until it is free (imc_lkacquire).
    pub fn acquire(&self, index: u32) -> Result<(), McError> {
        let l = self.lock(index)?;
        let local = &self.mc.inner().lock_state;
        loop {
            match local.try_take(l.offset) {
                Err(()) => {
                    return Err(McError::AlreadyHeld {
                        set: self.entry.id,
                        index,
                    })
                }
                Ok(true) => break,
                Ok(false) => std::thread::yield_now(),
            }
        }
        match l.acquire(&self.mc, false) {
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
        let local = &self.mc.inner().lock_state;
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
        match l.acquire(&self.mc, true) {
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
        let local = &self.mc.inner().lock_state;
        if !local.held(l.offset) {
            return Err(McError::NotHeld {
                set: self.entry.id,
                index,
            });
        }
        l.release(&self.mc)?;
        local.give_back(l.offset);
        Ok(())
    }

    /// Deallocate the set (imc_lkdealloc): it disappears when the last node
    /// that allocated it deallocates it.
    pub fn dealloc(self) -> Result<(), McError> {
        self.mc.dealloc_lockset(self.entry.id)
    }
}
