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

use firmware_model::NodeSet;

use crate::error::{McError, WaitFor};
use crate::lost::{LostPacket, LostRelease};
use crate::node::{wait_for_loopback, wait_for_others, Node, OP_TIMEOUT};

/// Collisions in a row that still widen the back-off window.
const MAX_DOUBLINGS: u32 = 6;
/// Delays shorter than this are spun; longer ones sleep (a sleep costs a
/// wake-up of some tens of microseconds, and gives the core away).
const SPIN_BELOW: Duration = Duration::from_micros(20);

/// Wait `d` without yielding in a loop: spin if it is short, else sleep.
fn pause(d: Duration) {
    if d < SPIN_BELOW {
        let until = Instant::now() + d;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    } else {
        std::thread::sleep(d);
    }
}

fn lost_releases(node: &Node) -> std::sync::MutexGuard<'_, Vec<LostRelease>> {
    node.lost_releases.lock().unwrap_or_else(|p| p.into_inner())
}

/// The error of a wait on a lock whose holders' release was lost.
fn lost_release_error(r: LostRelease) -> McError {
    McError::LostPacket {
        waiting_for: WaitFor::ClusterSpinlock,
        lost: r.lost,
        evidence: r.evidence,
    }
}

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

    /// Other members whose entry is set in this node's copy of the array.
    fn others_set(&self, node: &Node) -> u32 {
        self.others_mask(node).count_ones()
    }

    /// The error of a wait on this lock whose holders' release this node saw
    /// lost, if they still hold it here.
    fn known_lost(&self, node: &Node) -> Option<McError> {
        let mut known = lost_releases(node);
        let i = known.iter().position(|r| r.offset == self.offset)?;
        if known[i].holders == self.others_mask(node) {
            return Some(lost_release_error(known[i]));
        }
        known.swap_remove(i);
        None
    }

    /// ... as a mask (bit n = node n).
    fn others_mask(&self, node: &Node) -> u64 {
        let me = node.me;
        let members = node.members_mask();
        (0..node.layout.nodes)
            .filter(|&n| n != me && members & (1 << n) != 0)
            .filter(|&n| node.control.load_u32(self.offset + 4 * n as usize) != 0)
            .fold(0, |m, n| m | 1 << n)
    }

    /// The cluster half of acquiring: returns false only for `try_once` on
    /// contention.
    ///
    /// Contention is resolved as Ethernet's CSMA/CD resolves it: a node
    /// listens before it talks (it writes its entry only when its copy of
    /// the array shows the lock free), and one that collided waits, not in
    /// a yield loop but spinning briefly and then sleeping, until the lock
    /// looks free again, then a random delay scaled by the contenders it saw
    /// and by its measured loopback time, and listens again before writing.
    /// With dozens of nodes on a few cores, contenders that yield or retry
    /// at once starve the holder they wait for.
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
        let (mine, addr) = self.my_entry(node);
        let mut rng = (u64::from(node.me) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ u64::from(ticket()).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let start = Instant::now();
        let deadline = OP_TIMEOUT * 4;
        let mut collisions: u32 = 0;
        // The loopback time, measured on every attempt (a smoothed mean):
        // the window in which two writers collide.
        let mut rtt = Duration::from_micros(5);
        loop {
            // After a rejoin this node's copy of the arrays is stale until it
            // has caught up; a thread that got past here before the crash
            // sees the generation move and starts over.
            node.coherence.gate(OP_TIMEOUT)?;
            let generation = node.coherence.generation();
            if !try_once {
                if let Some(e) = self.known_lost(node) {
                    return Err(e);
                }
                // Listen: wait until nobody else holds or wants the lock.
                // A holder's release lost on the way here leaves its entry
                // set for ever: with evidence of loss the wait says so in
                // seconds instead of at the deadline (`loss`).
                let left = deadline.saturating_sub(start.elapsed());
                let seen = wait_for_others(
                    node,
                    WaitFor::ClusterSpinlock,
                    left,
                    || {
                        let n = self.others_set(node);
                        (n == 0 || node.coherence.generation() != generation).then_some(())
                    },
                    || LostPacket::LockRelease {
                        holders: NodeSet(self.others_mask(node)),
                    },
                    // The acquire as a whole resumes at its arrival (above).
                    || None,
                );
                match seen {
                    Ok(()) => {}
                    Err(McError::LostPacket { lost, evidence, .. }) => {
                        let r = LostRelease {
                            offset: self.offset,
                            holders: self.others_mask(node),
                            lost,
                            evidence,
                        };
                        lost_releases(node).push(r);
                        return Err(lost_release_error(r));
                    }
                    Err(McError::Timeout { .. }) => {
                        return Err(McError::Timeout {
                            after: deadline,
                            waiting_for: WaitFor::ClusterSpinlock,
                        })
                    }
                    Err(e) => return Err(e),
                }
            }
            let t = ticket();
            let sent = Instant::now();
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
            )
            .inspect_err(|_| {
                // The entry may have reached the other nodes even though its
                // loopback was lost: withdraw it, or they would wait on a
                // lock nobody holds.
                let _ = node.store(addr, &0u32.to_le_bytes());
            })?;
            rtt = (rtt * 3 + sent.elapsed().min(Duration::from_millis(10))) / 4;
            let contenders = if back { self.others_set(node) } else { 0 };
            let stale =
                !back || node.coherence.generation() != generation || !node.coherence.is_coherent();
            if contenders == 0 && !stale {
                return Ok(true);
            }
            node.store(addr, &0u32.to_le_bytes())?;
            if stale {
                continue;
            }
            if try_once {
                return Ok(false);
            }
            if start.elapsed() > deadline {
                return Err(McError::Timeout {
                    after: deadline,
                    waiting_for: WaitFor::ClusterSpinlock,
                });
            }
            // Collided: a random delay in [0, window), the window the
            // loopback time times the contenders seen, doubling with each
            // collision in a row (bounded), so colliders spread out.
            collisions = collisions.saturating_add(1);
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let window = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX)
                * u64::from(contenders + 1)
                * (1u64 << collisions.min(MAX_DOUBLINGS));
            pause(Duration::from_nanos(rng % window.max(1)));
        }
    }

    pub(crate) fn release(&self, node: &Node) -> Result<(), McError> {
        let (_, addr) = self.my_entry(node);
        node.store(addr, &0u32.to_le_bytes())
    }
}
