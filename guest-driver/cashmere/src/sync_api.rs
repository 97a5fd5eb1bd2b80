//! Cashmere's synchronisation, as programs call it (seed 000 s.2.1): locks,
//! barriers and write-once flags, each a release before and an acquire
//! after the variant's own operation (`seams::Synchronization`), and the
//! final barrier.

use mc_api::vclock;

use crate::error::CsmError;
use crate::handle::Csm;
use crate::times::{self, Activity};
use crate::wait::WaitKind;
use dsm_core::Stats;

impl Csm {
    pub(crate) fn check_failed(&self) -> Result<(), CsmError> {
        if let Some(e) = self.node.control().failure() {
            return Err(CsmError::ProtocolThread(e));
        }
        Ok(())
    }

    pub fn lock_acquire(&self, lock: u32) -> Result<(), CsmError> {
        self.check_failed()?;
        // The lock, the node's state and the acquire are all protocol work
        // (seed 000 s.3.3's Protocol time): under counted work nothing of
        // them may count as the application's (issue 39).
        let r = {
            let _lock = times::enter(Activity::Lock);
            self.node.sync().lock_acquire(lock)?;
            let mut st = self.node.lock_state();
            st.stats.lock_acquires += 1;
            self.node.acquire(&mut st)
        };
        // A safe point for the quantum's gate (no protocol lock held).
        vclock::sync();
        r
    }

    pub fn lock_release(&self, lock: u32) -> Result<(), CsmError> {
        let _lock = times::enter(Activity::Lock);
        {
            let mut st = self.node.lock_state();
            self.node.release(&mut st)?;
        }
        self.node.sync().lock_release(lock)
    }

    /// A barrier of every thread on every node. The last thread of a node to
    /// arrive releases for all of them (they share the frames, so the node's
    /// dirty list holds every thread's writes: the seed's "diff performed
    /// only by the last writer to enter the barrier", seed 002 s.3.3), takes
    /// the node through the cluster barrier and the acquire, then lets its
    /// node's threads go.
    pub fn barrier(&self) -> Result<(), CsmError> {
        self.check_failed()?;
        self.loss.check(self.node.mc())?;
        let barrier = times::enter(Activity::Barrier);
        // Which thread of the node is last to arrive follows the host:
        // both roles leave the activity here, at one point, so that under
        // counted work the application's edges after it are the same.
        let r = self.node_barrier();
        drop(barrier);
        r
    }

    /// [`Csm::barrier`] inside its activity: the node's own barrier, whose
    /// last thread releases, passes the cluster barrier and acquires.
    #[inline(never)]
    fn node_barrier(&self) -> Result<(), CsmError> {
        let n = &self.node;
        n.node_barrier(|| {
            let episode = {
                let mut st = n.lock_state();
                n.release(&mut st)?;
                st.stats.barriers += 1;
                st.next_barrier_episode()
            };
            n.sync().barrier(episode, &mut || n.serve_if_waiting())?;
            let mut st = n.lock_state();
            n.acquire(&mut st)
        })
    }

    /// Write-once flag: release, then broadcast `value` (nonzero).
    pub fn flag_set(&self, flag: u32, value: u64) -> Result<(), CsmError> {
        if value == 0 {
            return Err(CsmError::ZeroFlagValue);
        }
        {
            let mut st = self.node.lock_state();
            self.node.release(&mut st)?;
        }
        self.node.sync().flag_set(flag, value)
    }

    /// Wait until `flag` is set, then acquire; returns its value.
    pub fn flag_wait(&self, flag: u32) -> Result<u64, CsmError> {
        let v = {
            let _flag = times::enter(Activity::Flag);
            self.node.bell().wait(
                WaitKind::Remote,
                || {
                    let v = self.node.sync().flag_get(flag)?;
                    if v != 0 {
                        return Ok::<_, CsmError>(Some(v));
                    }
                    self.check_failed()?;
                    self.node.check_failed()?;
                    self.node.serve_if_waiting()?;
                    Ok(None)
                },
                || self.node.sync().flag_arrival(flag),
            )?
        };
        let mut st = self.node.lock_state();
        st.stats.flag_waits += 1;
        self.node.acquire(&mut st)?;
        Ok(v)
    }

    /// Tell every node this one has failed: their barriers, flag waits and
    /// page fetches then fail instead of waiting for it.
    pub fn abort(&self) {
        self.node.sync().abort();
    }

    /// Final barrier, then stop the protocol thread. Call once, from one
    /// thread per node, after every thread's last access to shared data.
    pub fn finish(&self) -> Result<Stats, CsmError> {
        let episode = {
            let mut st = self.node.lock_state();
            self.node.release(&mut st)?;
            st.next_barrier_episode()
        };
        self.node
            .sync()
            .barrier(episode, &mut || self.node.serve_if_waiting())?;
        self.node.control().stop();
        if let Some(h) = self.server.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
        self.check_failed()?;
        Ok(self.stats())
    }
}
