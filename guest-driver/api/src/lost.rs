//! What a wait on another node says when it blames a lost packet: which
//! packet ([`LostPacket`]) and the evidence ([`LossEvidence`]). Plain
//! values, below both the watch that finds the evidence (`loss`) and the
//! error that carries it (`error`).

use std::fmt;
use std::time::Duration;

use firmware_model::NodeSet;

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

/// A cluster lock whose holders' release was lost on the way to this node
/// (its wait failed with the evidence): their entries stay set here for
/// ever. Kept (`Node::lost_releases`) so that the next wait on it (a
/// program's exit detaches every region, each under the region table's
/// lock) fails at once rather than after the evidence's seconds again; a
/// holder set that changed means the lock moved on, and the record goes
/// (`spinlock`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LostRelease {
    pub(crate) offset: usize,
    pub(crate) holders: u64,
    pub(crate) lost: LostPacket,
    pub(crate) evidence: LossEvidence,
}
