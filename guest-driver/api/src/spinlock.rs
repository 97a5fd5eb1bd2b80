//! Cluster spinlocks built from remote writes, broadcast, loopback and total
//! order, as Cashmere's locks are (seed 000 s.2.3.1.1): a lock is an array with
//! one entry per node in a broadcast + loopback page. To acquire, a node writes
//! a fresh ticket into its own entry, waits for the write to come back, then
//! reads the whole array; if any other member's entry is set it clears its own,
//! backs off and tries again. Total order makes this safe: of two contenders,
//! the later writer sees the earlier one's entry when its own write lands.
//!
//! This is the cluster half of every lock: the lock sets programs allocate
//! (`lock`), the meta lock over the tables (`table`) and the serve lock of the
//! late join (`join`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mc_driver::vclock;

use crate::error::{McError, WaitFor};
use crate::node::{wait_for_loopback, Node, OP_TIMEOUT};

static TICKET: AtomicU32 = AtomicU32::new(1);

fn ticket() -> u32 {
    loop {
        let t = TICKET.fetch_add(1, Ordering::Relaxed);
        if t != 0 {
            return t;
        }
    }
}

/// One lock's array, at `offset` in the control pages.
pub(crate) struct ClusterLock {
    pub(crate) offset: usize,
}

impl ClusterLock {
    fn my_entry(&self, node: &Node) -> (usize, u64) {
        let me = node.me as usize;
        let off = self.offset + 4 * me;
        (off, node.layout.page_addr(0) + off as u64)
    }

    /// The cluster half of acquiring: returns false only for `try_once` on
    /// contention.
    ///
    /// In virtual time the whole acquire is a wait, not the host's back-off:
    /// uncontended, the thread resumes when its own entry is back (one
    /// round to the hub, from the time it wrote it: exact); contended, at
    /// the latest arrival into the lock's array (the holder's release; the
    /// arrival table's granule holds other locks' arrays too, so this may
    /// be later than the release).
    pub(crate) fn acquire(&self, node: &Node, try_once: bool) -> Result<bool, McError> {
        vclock::wait_begin();
        let posted_at = vclock::stamp();
        let mut attempts = 0u32;
        let r = self.acquire_entry(node, try_once, &mut attempts);
        let at = if attempts <= 1 {
            Some(vclock::one_way(posted_at, 4))
        } else {
            let len = 4 * u64::from(node.layout.nodes);
            node.arrival(node.control_addr(self.offset), len)
        };
        vclock::wait_end(at.filter(|_| vclock::enabled()));
        r
    }

    fn acquire_entry(
        &self,
        node: &Node,
        try_once: bool,
        attempts: &mut u32,
    ) -> Result<bool, McError> {
        let c = &node.control;
        let me = node.me;
        let (mine, addr) = self.my_entry(node);
        let mut backoff_us: u64 = 2;
        let mut rng = (u64::from(me) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ Instant::now().elapsed().as_nanos() as u64;
        let start = Instant::now();
        loop {
            // After a rejoin this node's copy of the arrays is stale until it
            // has caught up; a thread that got past here before the crash
            // sees the generation move and starts over.
            node.coherence.gate(OP_TIMEOUT)?;
            let generation = node.coherence.generation();
            let t = ticket();
            *attempts += 1;
            node.store(addr, &t.to_le_bytes())?;
            // The entry is read back from this node's own copy: its store is
            // posted, and only its loopback, ordered after every store before
            // it, says what the others had written first. A node that leaves
            // the cluster meanwhile never sees it come back (the store was
            // refused): it stops waiting and starts over below.
            let back = wait_for_loopback(
                node,
                WaitFor::LockEntry,
                || {
                    if c.load_u32(mine) == t {
                        Some(true)
                    } else {
                        (node.coherence.generation() != generation).then_some(false)
                    }
                },
                // The acquire as a whole resumes at its arrival (above).
                || None,
            )?;
            let members = node.members_mask();
            let contended = back
                && (0..node.layout.nodes)
                    .filter(|&n| n != me && members & (1 << n) != 0)
                    .any(|n| c.load_u32(self.offset + 4 * n as usize) != 0);
            let stale =
                !back || node.coherence.generation() != generation || !node.coherence.is_coherent();
            if !contended && !stale {
                return Ok(true);
            }
            node.store(addr, &0u32.to_le_bytes())?;
            if stale {
                continue;
            }
            if try_once {
                return Ok(false);
            }
            if start.elapsed() > OP_TIMEOUT * 4 {
                return Err(McError::Timeout {
                    after: OP_TIMEOUT * 4,
                    waiting_for: WaitFor::ClusterSpinlock,
                });
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

    pub(crate) fn release(&self, node: &Node) -> Result<(), McError> {
        let (_, addr) = self.my_entry(node);
        node.store(addr, &0u32.to_le_bytes())
    }
}
