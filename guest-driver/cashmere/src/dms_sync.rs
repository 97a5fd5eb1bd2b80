//! CSM-DMS synchronisation (seed 000 s.2.3.1.1 "Synchronization", seed 002
//! s.6.1): locks are the API's cluster spinlocks (one entry per node in a
//! broadcast + loopback page; write, wait for loopback, read the array);
//! barriers are one arrival word per node and a sense word that a master
//! (node 0) advances once every node has arrived; flags are write-once
//! broadcast words.

use std::time::Duration;

use mc_api::backoff::poll_until;
use mc_api::{LockSet, MemoryChannel, RxRegion, Sharing, TxRegion};

use super::seams::Synchronization;
use super::space::{CsmSpace, KEY_LOCKS, KEY_SYNC};
use super::{BarrierWait, CsmError};

const WAIT: Duration = Duration::from_secs(300);

pub struct DmsSync {
    space: CsmSpace,
    me: u32,
    mc: MemoryChannel,
    /// The nodes the program runs on: one that leaves the cluster (its
    /// adapter crashed) ends the run with an error naming it.
    members: u64,
    locks: LockSet,
    tx: TxRegion,
    rx: RxRegion,
}

impl DmsSync {
    pub fn new(mc: &MemoryChannel, space: CsmSpace, locks: u32) -> Result<DmsSync, CsmError> {
        let id = mc.region_alloc(KEY_SYNC, space.sync_bytes(), true)?;
        Ok(DmsSync {
            space,
            me: mc.node_id().index() as u32,
            mc: mc.clone(),
            // Every node of the cluster takes part; one that is not a member
            // (now or later) is lost.
            members: if space.nodes >= 64 {
                u64::MAX
            } else {
                (1u64 << space.nodes) - 1
            },
            locks: mc.lock_alloc(KEY_LOCKS, locks.max(1), false, false)?,
            tx: mc.attach_transmit(id, Sharing::Shared, true)?,
            rx: mc.attach_receive(id, Sharing::Shared, false)?,
        })
    }
}

impl Synchronization for DmsSync {
    fn lock_acquire(&self, lock: u32) -> Result<(), CsmError> {
        self.locks.acquire(lock)?;
        Ok(())
    }

    fn lock_release(&self, lock: u32) -> Result<(), CsmError> {
        self.locks.release(lock)?;
        Ok(())
    }

    fn barrier(&self, episode: u64) -> Result<(), CsmError> {
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

    fn abort(&self) {
        if self.aborted().is_none() {
            let _ = self
                .tx
                .write_u64(self.space.abort(), u64::from(self.me) + 1);
        }
    }

    fn aborted(&self) -> Option<u32> {
        match self.rx.load_u64(self.space.abort()).unwrap_or(0) {
            // A crashed adapter cannot write the abort word: the membership
            // change the device reports says it instead.
            0 => {
                let lost = self.members & !self.mc.members_mask();
                (lost != 0).then(|| lost.trailing_zeros())
            }
            n => Some(n as u32 - 1),
        }
    }

    fn flag_set(&self, flag: u32, value: u64) -> Result<(), CsmError> {
        if flag >= self.space.flags {
            return Err(CsmError::NoSuchFlag {
                flag,
                flags: self.space.flags,
            });
        }
        self.tx.write_u64(self.space.flag(flag), value)?;
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
}
