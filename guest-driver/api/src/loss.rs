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

use std::time::{Duration, Instant};

use crate::lost::LossEvidence;

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

impl LossCounts {
    /// Packets lost since `base` (the counts when the API opened) that
    /// the node's stores cannot have survived. An API opened reliable
    /// checks every store and sends it again until it went through clean,
    /// which repairs what a network error (a CRC discard, a link down)
    /// lost: only drops beyond the errors counted are evidence there. (A
    /// rejoined adapter starts its counts again: they saturate at 0.)
    pub(crate) fn since(self, base: LossCounts, reliable: bool) -> u64 {
        let drops = self.drops.saturating_sub(base.drops);
        let errors = self.errors.saturating_sub(base.errors);
        if reliable {
            drops.saturating_sub(errors)
        } else {
            drops + errors
        }
    }
}

/// Where a watch reads the packets lost on this node's link since the API
/// opened (the node, which owns the adapter and the counts it opened with).
pub(crate) trait LossSource {
    /// Packets lost on this node's link since the API opened that its
    /// stores cannot have survived (see [`LossCounts::since`]).
    fn losses_since_open(&self) -> u64;
}

/// One wait's watch for evidence of loss.
pub struct LossWatch<'a> {
    source: &'a dyn LossSource,
    start: Instant,
    at_start: u64,
    checked: Instant,
}

impl<'a> LossWatch<'a> {
    pub(crate) fn new(source: &'a dyn LossSource) -> LossWatch<'a> {
        let now = Instant::now();
        LossWatch {
            source,
            start: now,
            at_start: source.losses_since_open(),
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
        let since_open = self.source.losses_since_open();
        let while_waiting = since_open.saturating_sub(self.at_start);
        let enough = (while_waiting > 0) || (since_open > 0 && waited >= LOSS_WAIT_EARLIER);
        enough.then_some(LossEvidence {
            waited,
            since_open,
            while_waiting,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_count_drops_and_errors_unless_reliable_repairs_the_errors() {
        let base = LossCounts {
            drops: 3,
            errors: 1,
        };
        let now = LossCounts {
            drops: 8,
            errors: 3,
        };
        assert_eq!(now.since(base, false), 5 + 2);
        assert_eq!(now.since(base, true), 5 - 2);
        // A rejoined adapter counts from 0 again.
        assert_eq!(LossCounts::default().since(base, false), 0);
    }
}
