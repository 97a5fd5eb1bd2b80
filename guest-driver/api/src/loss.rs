//! Evidence of packets lost without trace, for waits on other nodes.
//!
//! Memory Channel does not retransmit (seed 004, Error Management), and a
//! dropped packet is detected by nobody: the emulator's drop fault counts
//! no network error (docs/device.md, faults). A node that waits for
//! another node's store (a lock holder's release, a barrier arrival, a
//! directory change) cannot tell a lost store from a slow writer by
//! waiting: the wait would run to its full timeout (the cluster spinlock's
//! is 120 s) before anything is said. The emulated adapter counts every
//! packet lost on its link, in either direction, on its status page
//! (`drops`, docs/device.md section 16). A wait that has lasted
//! [`LOSS_WAIT`] while that count moved, or [`LOSS_WAIT_EARLIER`] with
//! drops counted at this node since the API opened, gives up, naming the
//! packet whose loss explains it. Without drops (or, for an API that is
//! not reliable, network errors) a wait keeps its own timeout: a slow
//! holder is not an error.
//!
//! A real adapter has no drop count: its link checks every packet's CRC,
//! and a packet it discards counts a network error (seed 004: "the
//! hardware detects all errors"), which this evidence takes too. Packets
//! that vanish without a detected error are the emulator's fault model,
//! and only its status page can count them.

use std::fmt;
use std::time::{Duration, Instant};

use firmware_model::NodeSet;

use crate::node::Node;
use crate::port::McPort;

/// How long a wait goes on, once drops were counted at this node while it
/// waited, before it blames a lost packet.
pub const LOSS_WAIT: Duration = Duration::from_secs(2);
/// ... and once drops were counted at this node before it began (since
/// the API opened): the lost packet may be older than the wait, so the
/// wait gives a slow writer longer.
pub const LOSS_WAIT_EARLIER: Duration = Duration::from_secs(5);
/// How often a wait reads the status page for evidence.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// What this node's adapter has counted of packets lost on its link, and
/// of network errors it detected, since the API opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LossCounts {
    pub(crate) drops: u64,
    pub(crate) errors: u64,
}

impl Node {
    /// The adapter's counts from its status page.
    pub(crate) fn loss_counts(&self) -> LossCounts {
        let s = self.port().status();
        LossCounts {
            drops: s.drops,
            errors: s.errors,
        }
    }

    /// Packets lost on this node's link since the API opened that its
    /// stores cannot have survived. An API opened reliable checks every
    /// store and sends it again until it went through clean, which repairs
    /// what a network error (a CRC discard, a link down) lost: only drops
    /// beyond the errors counted are evidence there. (A rejoined adapter
    /// starts its counts again: they saturate at 0.)
    pub(crate) fn losses_since_open(&self) -> u64 {
        let now = self.loss_counts();
        let drops = now.drops.saturating_sub(self.loss_base.drops);
        let errors = now.errors.saturating_sub(self.loss_base.errors);
        if self.reliable {
            drops.saturating_sub(errors)
        } else {
            drops + errors
        }
    }
}

/// Why a wait on another node blames a lost packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LossEvidence {
    /// How long it had waited.
    pub waited: Duration,
    /// Packets lost on this node's link since the API opened (drops, and
    /// for an API that is not reliable network errors too).
    pub since_open: u64,
    /// ... of them while it waited.
    pub while_waiting: u64,
}

impl fmt::Display for LossEvidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "nothing came for {:.1} s and this node's adapter has counted {} packets lost on its link \
             since the Memory Channel API opened ({} while it waited)",
            self.waited.as_secs_f64(),
            self.since_open,
            self.while_waiting
        )
    }
}

/// Which packet's loss explains a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostPacket {
    /// A holder's release of a cluster spinlock: its entry in the lock's
    /// array is still set in this node's copy.
    LockRelease { holders: NodeSet },
    /// Arrivals at a barrier of these nodes.
    BarrierArrival { missing: NodeSet },
    /// The start-up announcements of these nodes (the rendezvous), which
    /// they make no more once they have heard from every member.
    Hello { missing: NodeSet },
}

impl fmt::Display for LostPacket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostPacket::LockRelease { holders } => {
                match holders.iter().next() {
                    Some(n) if holders.len() == 1 => write!(
                        f,
                        "{n}'s release of the lock (its entry in the lock's array is still set here)"
                    ),
                    _ => write!(
                        f,
                        "the release of the lock by nodes {holders} (their entries in the lock's array are still set here)"
                    ),
                }
            }
            LostPacket::BarrierArrival { missing } => {
                write!(f, "the arrival of nodes {missing} at the barrier")
            }
            LostPacket::Hello { missing } => write!(
                f,
                "the last start-up announcement of nodes {missing} (that they had heard from every member)"
            ),
        }
    }
}

/// One wait's watch for evidence of loss.
pub struct LossWatch<'a> {
    node: &'a Node,
    start: Instant,
    at_start: u64,
    checked: Instant,
}

impl<'a> LossWatch<'a> {
    pub(crate) fn new(node: &'a Node) -> LossWatch<'a> {
        let now = Instant::now();
        LossWatch {
            node,
            start: now,
            at_start: node.losses_since_open(),
            checked: now,
        }
    }

    /// The evidence once the wait has lasted long enough that a lost
    /// packet explains it ([`LOSS_WAIT`] with losses counted while it
    /// waited, [`LOSS_WAIT_EARLIER`] with losses since the API opened);
    /// None otherwise (the status page is read at most every 50 ms).
    pub fn check(&mut self) -> Option<LossEvidence> {
        let waited = self.start.elapsed();
        if waited < LOSS_WAIT || self.checked.elapsed() < CHECK_EVERY {
            return None;
        }
        self.checked = Instant::now();
        let since_open = self.node.losses_since_open();
        let while_waiting = since_open.saturating_sub(self.at_start);
        let enough = (while_waiting > 0) || (since_open > 0 && waited >= LOSS_WAIT_EARLIER);
        enough.then_some(LossEvidence {
            waited,
            since_open,
            while_waiting,
        })
    }
}
