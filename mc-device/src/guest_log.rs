//! Log lines a guest can cause, rate-limited per node.
//!
//! A refused store, a malformed request, a broken queue: each is worth a line,
//! but a guest can cause them as fast as it can post buffers (one guest once
//! wrote 200,000 lines in 5 s). QEMU keeps such guest errors behind
//! `-d guest_errors`; here the first [`BURST`] lines per node in each
//! [`INTERVAL`] are logged, the rest only counted, and one summary line says how
//! many were left out.

use std::time::{Duration, Instant};

use std::fmt;
use std::sync::Mutex;

use firmware_model::NodeId;
use log::{log, warn, Level};

use crate::node_name::Node;

/// Guest-caused lines logged per node in one interval.
pub(crate) const BURST: u32 = 20;
/// The rate-limiting interval.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);

/// One node's allowance.
#[derive(Debug, Default)]
struct GuestLogLimit {
    /// Start of the current interval; `None` before the first line.
    window: Option<Instant>,
    logged: u32,
    suppressed: u64,
}

/// What to do with one guest-caused line.
#[derive(Debug, PartialEq, Eq)]
struct Verdict {
    /// Log the line.
    log: bool,
    /// Lines suppressed in the interval that just ended: report them first.
    suppressed_before: Option<u64>,
}

impl GuestLogLimit {
    /// A guest-caused line at `now`.
    fn admit(&mut self, now: Instant) -> Verdict {
        let mut suppressed_before = None;
        if self
            .window
            .is_none_or(|w| now.saturating_duration_since(w) >= INTERVAL)
        {
            suppressed_before = self.take_suppressed();
            self.window = Some(now);
            self.logged = 0;
        }
        let log = self.logged < BURST;
        if log {
            self.logged += 1;
        } else {
            self.suppressed += 1;
        }
        Verdict {
            log,
            suppressed_before,
        }
    }

    /// Lines suppressed in an interval that has ended, if any: called
    /// periodically so a flood that stops is still reported.
    fn summary_due(&mut self, now: Instant) -> Option<u64> {
        let w = self.window?;
        if self.suppressed == 0 || now.saturating_duration_since(w) < INTERVAL {
            return None;
        }
        self.window = None;
        self.take_suppressed()
    }

    /// Lines are waiting to be reported.
    fn has_suppressed(&self) -> bool {
        self.suppressed > 0
    }

    fn take_suppressed(&mut self) -> Option<u64> {
        let n = std::mem::take(&mut self.suppressed);
        (n > 0).then_some(n)
    }
}

/// One node's guest-caused log lines: its allowance, kept across the
/// guest's reconnects.
#[derive(Debug)]
pub(crate) struct GuestLog {
    node: NodeId,
    limit: GuestLogLimit,
}

impl GuestLog {
    pub(crate) fn new(node: NodeId) -> GuestLog {
        GuestLog {
            node,
            limit: GuestLogLimit::default(),
        }
    }

    /// Log a line this node's guest caused, within its allowance.
    pub(crate) fn log(&mut self, level: Level, what: fmt::Arguments<'_>) {
        let v = self.limit.admit(Instant::now());
        if let Some(k) = v.suppressed_before {
            report_suppressed(self.node, k);
        }
        if v.log {
            log!(level, "{}: {what}", Node(self.node));
        }
    }

    /// Lines are waiting to be reported.
    pub(crate) fn has_suppressed(&self) -> bool {
        self.limit.has_suppressed()
    }

    /// Report the lines left out in an interval that has ended by `now` (a
    /// flood that stopped), if any.
    pub(crate) fn report_ended_interval(&mut self, now: Instant) {
        if let Some(k) = self.limit.summary_due(now) {
            report_suppressed(self.node, k);
        }
    }
}

/// The allowance of guest-caused lines that no node can be named for (a
/// frontend's descriptor refused before the vring knows its node).
static UNATTRIBUTED: Mutex<Option<GuestLogLimit>> = Mutex::new(None);

/// Log a guest-caused line that cannot be put to one node's account, within
/// an allowance of its own.
pub(crate) fn unattributed(level: Level, what: fmt::Arguments<'_>) {
    let mut g = UNATTRIBUTED.lock().unwrap_or_else(|p| p.into_inner());
    let v = g
        .get_or_insert_with(GuestLogLimit::default)
        .admit(Instant::now());
    drop(g);
    if let Some(k) = v.suppressed_before {
        warn!("{k} more guest-caused messages suppressed (at most {BURST} per {INTERVAL:?} are logged)");
    }
    if v.log {
        log!(level, "{what}");
    }
}

/// Say that `lines` guest-caused lines of `node` were left out.
fn report_suppressed(node: NodeId, lines: u64) {
    warn!(
        "{}: {lines} more guest-caused messages suppressed (at most {BURST} per {INTERVAL:?} are logged)",
        Node(node)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_the_burst_and_summarised_once_per_interval() {
        let mut l = GuestLogLimit::default();
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut logged = 0;
        for k in 0..10_000u64 {
            let v = l.admit(ms(k / 20)); // 20 lines per ms for 500 ms
            assert_eq!(v.suppressed_before, None);
            logged += u32::from(v.log);
        }
        assert_eq!(logged, BURST);
        // Nothing more is said until the interval is over...
        assert_eq!(l.summary_due(ms(999)), None);
        // ...then one summary of everything left out.
        assert_eq!(l.summary_due(ms(1000)), Some(10_000 - u64::from(BURST)));
        assert_eq!(l.summary_due(ms(5000)), None);
        // A new interval starts with the next line, logged in full.
        assert_eq!(
            l.admit(ms(6000)),
            Verdict {
                log: true,
                suppressed_before: None
            }
        );
    }

    #[test]
    fn the_summary_comes_with_the_first_line_of_the_next_interval() {
        let mut l = GuestLogLimit::default();
        let t0 = Instant::now();
        for _ in 0..BURST + 7 {
            l.admit(t0);
        }
        let v = l.admit(t0 + INTERVAL);
        assert_eq!(
            v,
            Verdict {
                log: true,
                suppressed_before: Some(7)
            }
        );
    }

    #[test]
    fn a_quiet_guest_is_never_limited() {
        let mut l = GuestLogLimit::default();
        let t0 = Instant::now();
        for k in 0..100u32 {
            let v = l.admit(t0 + Duration::from_millis(u64::from(k) * 200));
            assert!(v.log && v.suppressed_before.is_none());
        }
    }
}
