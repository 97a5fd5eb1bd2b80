//! Late join: a node whose adapter crashed and rejoined catches up with the
//! cluster's coherent state (seed 004, "Late Join and Failure Resilience":
//! "The thread that has been designated to manage clusterwide updates is
//! responsible for providing the late-joining node with an up-to-date copy of
//! the cluster data structures. When triggered by the new node, the thread
//! retransmits the contents ...").
//!
//! A management thread on every node polls the status page. When the
//! membership epoch moves it probes its own PCT with a store to its marker
//! word: a rejoined adapter is a fresh one, its PCT empty, so the store is
//! refused with `TransmitDisabled` (a crash and rejoin between two polls still
//! moves the epoch, so it is never missed). The joiner then
//!
//! 1. programs its PCT again from the record of every entry the API set
//!    (`pct_log`), so it receives live writes again from here on;
//! 2. maps the resync window (an alias of the control pages and the arena at
//!    the top of the address space) for receive onto the same frames;
//! 3. broadcasts a join request (`JOIN_REQUEST`) and waits for the answer
//!    (`JOIN_DONE`).
//!
//! Members that are coherent see the request; the first to take the serve
//! lock (a cluster spinlock, as the seed elects its manager; lower-numbered
//! members try first) maps the window for point-to-point transmit to the
//! joiner and retransmits control pages and arena through it, then answers.
//! Nothing goes to other nodes: a broadcast would overwrite newer values there.
//!
//! The cluster keeps running meanwhile. The server's copy may miss a write that
//! is ordered before its retransmission, and the joiner would keep the stale
//! value. Total order fixes that: after sending, the server stores a marker with
//! broadcast and loopback and waits for it to come back, then reads its copy
//! again. Per 8-byte word: if the value read equals what was sent, the joiner
//! holds the right value (had the last write before the marker come before the
//! retransmission, the copy would show it; had it come after, the joiner got it
//! live). If it changed again after the marker, a write ordered after the
//! retransmission exists and the joiner receives it too. This holds per byte
//! (stores may be a single byte), so a word is sent again if one of its bytes
//! differs and then stays put; rounds wait a little longer each time, so a
//! byte written continuously is soon seen to change again.
//!
//! Files, by role: `notice` (the management thread: noticing a crash and a
//! rejoin), `joiner` (catching up), `server` (retransmitting to a joiner),
//! `window` (control pages and arena as one byte range). Where a node stands
//! (for its threads) is `crate::coherence`, which the joiner moves.

mod joiner;
mod notice;
mod server;
mod window;

pub use crate::coherence::{Coherence, Resync};
pub(crate) use notice::{adapter_offline, start};
pub(crate) use window::Window;

use crate::host::NodeHost;
use crate::lock::LocalLocks;

/// Records per transmit batch: the port is free for the node's own threads in
/// between.
const BATCH: usize = 32;

/// What the management thread needs of its node: the node, its tables (to
/// forget this node's own writes after a catch-up) and its threads' local
/// locks (to repair lock entries left set by a crash). The thread holds it
/// weakly and ends when the node's last handle is gone.
pub(crate) trait JoinHost: NodeHost {
    fn local_locks(&self) -> &LocalLocks;
}
