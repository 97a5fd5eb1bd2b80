//! One link's calendar: the virtual intervals in which it is busy
//! (docs/virtual-time.md s.3).
//!
//! Packets reach the hub in real-time order, not in virtual order, so a link
//! cannot be described by one "free at" time: a packet stamped earlier than
//! what the link already carries must still find the link free at its own
//! time. The calendar keeps the busy intervals (start -> end, disjoint and
//! never touching: touching ones are merged) and places new work in the
//! free time at or after the moment it is ready, in order: work-conserving,
//! as packets interleave at the hub, with a packet's bytes treated as a fluid
//! (a 32-byte packet may use a gap shorter than its serialisation).
//!
//! Bounded: at most [`CAP`] intervals (the earliest go first) and none that
//! ended before the horizon the caller gives. Every placement is amortised
//! O(log n): the intervals it walks over are merged into the one it makes.

use std::collections::BTreeMap;

/// Most busy intervals one calendar keeps. A link carries at most ~940
/// separate packets in 100 us (8-byte stores at 75 MB/s, each with a gap),
/// the quantum that bounds how far apart in virtual time the threads run;
/// intervals this far back are long past anything that can still arrive.
pub(crate) const CAP: usize = 1024;

/// Busy virtual intervals of one link, in ns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Calendar {
    busy: BTreeMap<u64, u64>,
}

impl Calendar {
    /// Put `work` ns of transmission in the free time at or after `ready`,
    /// earliest first. Returns `(start, end)`: when the first of it goes
    /// and when the last of it is done (`end - start >= work`, equal when
    /// nothing was in the way). The whole span is busy afterwards. Times
    /// saturate at `u64::MAX`.
    pub(crate) fn fill(&mut self, ready: u64, work: u64) -> (u64, u64) {
        let mut t = ready;
        if let Some((_, &end)) = self.busy.range(..=t).next_back() {
            t = t.max(end);
        }
        let start = t;
        let mut left = work;
        while let Some((&s, &e)) = self.busy.range(t..).next() {
            let gap = s - t;
            if gap >= left {
                break;
            }
            left -= gap;
            t = e;
        }
        let end = t.saturating_add(left);
        self.occupy(start, end);
        (start, end)
    }

    /// [`Calendar::fill`] in the time free in both this calendar and
    /// `other` (which is left as it is): the span is marked busy here,
    /// `other`'s intervals inside it included, so this calendar does not
    /// walk them again.
    pub(crate) fn fill_avoiding(&mut self, other: &Calendar, ready: u64, work: u64) -> (u64, u64) {
        let free_from = |c: &Self, mut t: u64| {
            while let Some(e) = c.busy_at(t).max(other.busy_at(t)) {
                t = e;
            }
            t
        };
        let start = free_from(self, ready);
        let mut t = start;
        let mut left = work;
        loop {
            let mine = self.busy.range(t..).next().map(|(&s, _)| s);
            let theirs = other.busy.range(t..).next().map(|(&s, _)| s);
            let Some(s) = [mine, theirs].into_iter().flatten().min() else {
                break;
            };
            let gap = s - t;
            if gap >= left {
                break;
            }
            left -= gap;
            t = free_from(self, s);
        }
        let end = t.saturating_add(left);
        // [ready, start) is busy in one calendar or the other: kept here too.
        self.occupy(ready.min(start), end);
        (start, end)
    }

    /// Mark `[start, end)` busy, merged with whatever it overlaps or touches.
    pub(crate) fn occupy(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let (mut lo, mut hi) = (start, end);
        if let Some((&s, &e)) = self.busy.range(..=lo).next_back() {
            if e >= lo {
                lo = s;
                hi = hi.max(e);
                self.busy.remove(&s);
            }
        }
        while let Some((&s, &e)) = self.busy.range(lo..=hi).next() {
            hi = hi.max(e);
            self.busy.remove(&s);
        }
        self.busy.insert(lo, hi);
        while self.busy.len() > CAP {
            self.busy.pop_first();
        }
    }

    /// The end of the busy interval `t` lies in, if it lies in one.
    pub(crate) fn busy_at(&self, t: u64) -> Option<u64> {
        self.busy
            .range(..=t)
            .next_back()
            .map(|(_, &e)| e)
            .filter(|&e| e > t)
    }

    /// How much of `[start, end)` is busy.
    pub(crate) fn busy_within(&self, start: u64, end: u64) -> u64 {
        let from = self
            .busy
            .range(..=start)
            .next_back()
            .map_or(start, |(&s, _)| s);
        self.busy
            .range(from..end)
            .map(|(&s, &e)| e.min(end).saturating_sub(s.max(start)))
            .sum()
    }

    /// Forget every interval that ended at or before `horizon`.
    pub(crate) fn forget_before(&mut self, horizon: u64) {
        while let Some(entry) = self.busy.first_entry() {
            if *entry.get() > horizon {
                break;
            }
            entry.remove();
        }
    }

    /// Intervals kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.busy.len()
    }

    /// The intervals, earliest first (tests).
    #[cfg(test)]
    pub(crate) fn intervals(&self) -> Vec<(u64, u64)> {
        self.busy.iter().map(|(&s, &e)| (s, e)).collect()
    }

    /// Whether any of `[start, end)` is busy (tests).
    #[cfg(test)]
    pub(crate) fn busy_in(&self, start: u64, end: u64) -> bool {
        self.busy
            .range(..end)
            .next_back()
            .is_some_and(|(_, &e)| e > start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_empty_link_starts_at_once() {
        let mut c = Calendar::default();
        assert_eq!(c.fill(100, 50), (100, 150));
        assert_eq!(c.intervals(), vec![(100, 150)]);
    }

    #[test]
    fn work_ready_while_the_link_is_busy_waits_for_it() {
        let mut c = Calendar::default();
        c.fill(100, 50);
        assert_eq!(c.fill(120, 10), (150, 160));
        // Touching intervals are one.
        assert_eq!(c.intervals(), vec![(100, 160)]);
    }

    #[test]
    fn earlier_work_that_fits_before_goes_first() {
        let mut c = Calendar::default();
        c.fill(1_000, 50);
        // Sent later in real time, earlier in virtual time: unaffected.
        assert_eq!(c.fill(100, 50), (100, 150));
        assert_eq!(c.intervals(), vec![(100, 150), (1_000, 1_050)]);
    }

    #[test]
    fn work_flows_through_gaps_and_merges_what_it_crossed() {
        let mut c = Calendar::default();
        c.occupy(110, 120);
        c.occupy(130, 140);
        c.occupy(200, 300);
        // 30 ns from 100: 10 before 110, 10 in 120..130, 10 in 140..150.
        assert_eq!(c.fill(100, 30), (100, 150));
        assert_eq!(c.intervals(), vec![(100, 150), (200, 300)]);
    }

    #[test]
    fn busy_time_is_measured() {
        let mut c = Calendar::default();
        c.occupy(10, 20);
        c.occupy(30, 40);
        assert_eq!(c.busy_at(15), Some(20));
        assert_eq!(c.busy_at(20), None);
        assert_eq!(c.busy_within(15, 35), 10);
        assert_eq!(c.busy_within(0, 100), 20);
        assert_eq!(c.busy_within(20, 30), 0);
    }

    #[test]
    fn filling_around_another_calendar_uses_time_free_in_both() {
        let mut mine = Calendar::default();
        let mut theirs = Calendar::default();
        mine.occupy(100, 120);
        theirs.occupy(115, 130);
        theirs.occupy(140, 150);
        // Ready at 105: free from 130, 10 ns before 140, 10 after 150.
        assert_eq!(mine.fill_avoiding(&theirs, 105, 20), (130, 160));
        assert_eq!(mine.intervals(), vec![(100, 160)]);
        assert_eq!(theirs.intervals(), vec![(115, 130), (140, 150)]);
        // Nothing in the way: as `fill`.
        assert_eq!(mine.fill_avoiding(&theirs, 200, 5), (200, 205));
    }

    #[test]
    fn the_cap_forgets_the_earliest() {
        let mut c = Calendar::default();
        for i in 0..(CAP as u64 + 10) {
            c.fill(i * 100, 10);
        }
        assert_eq!(c.len(), CAP);
        assert_eq!(c.intervals()[0].0, 1_000);
    }

    #[test]
    fn the_horizon_forgets_what_ended_before_it() {
        let mut c = Calendar::default();
        c.fill(0, 10);
        c.fill(100, 10);
        c.fill(1_000, 10);
        c.forget_before(110);
        assert_eq!(c.intervals(), vec![(1_000, 1_010)]);
    }

    #[test]
    fn hostile_times_saturate() {
        let mut c = Calendar::default();
        assert_eq!(c.fill(u64::MAX, 10), (u64::MAX, u64::MAX));
        assert_eq!(c.len(), 0, "an empty span is not kept");
        assert_eq!(c.fill(u64::MAX - 5, 10), (u64::MAX - 5, u64::MAX));
        assert_eq!(c.fill(u64::MAX - 8, 10), (u64::MAX - 8, u64::MAX));
        assert_eq!(c.fill(0, u64::MAX), (0, u64::MAX));
        assert_eq!(c.intervals(), vec![(0, u64::MAX)]);
        assert_eq!(c.fill(7, 1), (u64::MAX, u64::MAX));
    }

    proptest! {
        /// Around another calendar: starts at or after `ready` where both
        /// are free, and uses exactly `work` of the time free in both.
        #[test]
        fn placements_around_another_use_time_free_in_both(
            theirs in proptest::collection::vec((0u64..20_000, 1u64..500), 0..40),
            ops in proptest::collection::vec((0u64..20_000, 1u64..500), 1..60),
        ) {
            let mut other = Calendar::default();
            for (s, w) in theirs {
                other.occupy(s, s + w);
            }
            let mut c = Calendar::default();
            for (ready, work) in ops {
                let before = c.clone();
                let (s, e) = c.fill_avoiding(&other, ready, work);
                prop_assert!(s >= ready);
                prop_assert!(!before.busy_in(s, s + 1) && !other.busy_in(s, s + 1));
                let mut both = before.clone();
                for (a, b) in other.intervals() {
                    both.occupy(a, b);
                }
                let busy: u64 = both
                    .intervals()
                    .iter()
                    .map(|&(a, b)| b.min(e).saturating_sub(a.max(s)))
                    .sum();
                prop_assert_eq!(e - s - busy, work);
            }
        }

        /// Whatever came before: the placement starts at or after `ready`,
        /// takes at least `work`, uses only time that was free, and leaves
        /// the calendar disjoint, sorted and within its cap.
        #[test]
        fn placements_use_free_time_only(
            ops in proptest::collection::vec((0u64..20_000, 1u64..500), 1..200),
        ) {
            let mut c = Calendar::default();
            for (ready, work) in ops {
                let before = c.clone();
                let (s, e) = c.fill(ready, work);
                prop_assert!(s >= ready);
                prop_assert!(e - s >= work);
                prop_assert!(!before.busy_in(s, s + 1), "starts in free time");
                // Free time used in [s, e) is exactly `work`.
                let busy: u64 = before
                    .intervals()
                    .iter()
                    .map(|&(a, b)| b.min(e).saturating_sub(a.max(s)))
                    .sum();
                prop_assert_eq!(e - s - busy, work);
                let iv = c.intervals();
                prop_assert!(iv.len() <= CAP);
                for w in iv.windows(2) {
                    prop_assert!(w[0].1 < w[1].0, "disjoint, not touching: {:?}", w);
                }
                prop_assert!(iv.iter().all(|&(a, b)| a < b));
            }
        }
    }
}
