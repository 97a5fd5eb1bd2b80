//! Intervals and their write notices: which pages a node wrote between two
//! of its releases, kept until every node has seen them.

use crate::{Node, Page, VectorTime};

/// One interval of one node: `(node, number)`, numbered from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IntervalId {
    pub node: Node,
    pub number: u32,
}

/// "`writer` wrote `page` in its interval `number`": what an acquirer
/// invalidates for, and what a fault then needs from the page's home.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WriteNotice {
    pub page: Page,
    pub interval: IntervalId,
}

/// An interval and the pages written in it (sorted, each once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    pub id: IntervalId,
    pub pages: Vec<Page>,
}

impl Interval {
    /// The interval `id`, whose writes touched `pages` (any order, repeats
    /// allowed).
    pub fn new(id: IntervalId, mut pages: Vec<Page>) -> Interval {
        pages.sort_unstable();
        pages.dedup();
        Interval { id, pages }
    }

    /// Its write notices.
    pub fn notices(&self) -> impl Iterator<Item = WriteNotice> + '_ {
        self.pages.iter().map(move |&page| WriteNotice {
            page,
            interval: self.id,
        })
    }
}

/// The intervals a node knows of, every node's, in order per node: what it
/// can tell an acquirer that has not seen them.
#[derive(Clone, Debug, Default)]
pub struct IntervalLog {
    /// Per node, its intervals from `first[node]` on, in order.
    by_node: Vec<Vec<Interval>>,
    /// Per node, the number of the first interval still kept (older ones
    /// every node has seen, and were dropped).
    first: Vec<u32>,
}

/// An interval that does not follow the ones the log holds: a lost or
/// reordered message (the protocol's messages arrive in order, so this is
/// a bug or a fault, never a race).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("interval {got} of node {node} does not follow interval {have}, the newest known")]
pub struct OutOfOrder {
    pub node: Node,
    pub got: u32,
    pub have: u32,
}

impl IntervalLog {
    /// An empty log for `nodes`.
    pub fn new(nodes: usize) -> IntervalLog {
        IntervalLog {
            by_node: vec![Vec::new(); nodes],
            first: vec![1; nodes],
        }
    }

    /// The newest interval of `node` known (0: none).
    pub fn newest(&self, node: Node) -> u32 {
        let kept = self.by_node.get(node).map_or(0, Vec::len);
        let first = self.first.get(node).copied().unwrap_or(1);
        first + u32::try_from(kept).expect("fewer than 2^32 intervals are kept") - 1
    }

    /// Learn `interval`. One already known is ignored (notices reach a node
    /// by several paths: a grant and a barrier); one that skips an interval
    /// is refused.
    pub fn record(&mut self, interval: Interval) -> Result<(), OutOfOrder> {
        let node = interval.id.node;
        let have = self.newest(node);
        if interval.id.number <= have {
            return Ok(());
        }
        if interval.id.number != have + 1 {
            return Err(OutOfOrder {
                node,
                got: interval.id.number,
                have,
            });
        }
        self.by_node[node].push(interval);
        Ok(())
    }

    /// The intervals `seen` has not seen, oldest first per node: what a
    /// grant or a barrier's release carries to the node whose time is
    /// `seen`.
    pub fn unseen_by<'a>(
        &'a self,
        seen: &'a VectorTime,
    ) -> impl Iterator<Item = &'a Interval> + 'a {
        self.by_node
            .iter()
            .enumerate()
            .flat_map(move |(node, kept)| {
                let first = self.first[node];
                let skip = seen.get(node).saturating_sub(first - 1);
                kept.iter()
                    .skip(usize::try_from(skip).unwrap_or(usize::MAX))
            })
    }

    /// Forget what every node has seen (`all` covers nothing newer than
    /// each node's time: the element-wise minimum of the cluster's times,
    /// which a barrier's manager knows).
    pub fn forget_seen_by_all(&mut self, all: &VectorTime) {
        for (node, kept) in self.by_node.iter_mut().enumerate() {
            let first = self.first[node];
            let drop = all.get(node).saturating_sub(first - 1);
            let drop = usize::try_from(drop).unwrap_or(usize::MAX).min(kept.len());
            kept.drain(..drop);
            self.first[node] = first + u32::try_from(drop).expect("fewer than 2^32 intervals");
        }
    }

    /// Intervals kept (bounds, tests).
    pub fn len(&self) -> usize {
        self.by_node.iter().map(Vec::len).sum()
    }

    /// Whether none are kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(node: Node, number: u32, pages: &[Page]) -> Interval {
        Interval::new(IntervalId { node, number }, pages.to_vec())
    }

    #[test]
    fn an_acquirer_gets_the_intervals_it_has_not_seen() {
        let mut log = IntervalLog::new(3);
        log.record(iv(0, 1, &[4, 2, 4])).unwrap();
        log.record(iv(0, 2, &[7])).unwrap();
        log.record(iv(2, 1, &[9])).unwrap();
        assert_eq!(log.record(iv(0, 1, &[4])), Ok(()), "a repeat is ignored");
        assert_eq!(
            log.record(iv(2, 3, &[1])),
            Err(OutOfOrder {
                node: 2,
                got: 3,
                have: 1
            })
        );
        let seen = VectorTime::from_slice(&[1, 0, 0]);
        let ids: Vec<_> = log
            .unseen_by(&seen)
            .map(|i| (i.id.node, i.id.number))
            .collect();
        assert_eq!(ids, vec![(0, 2), (2, 1)]);
        let notices: Vec<_> = log
            .unseen_by(&VectorTime::new(3))
            .flat_map(Interval::notices)
            .collect();
        assert_eq!(notices.len(), 4, "pages 2 and 4 once, 7, 9: {notices:?}");
    }

    #[test]
    fn what_every_node_has_seen_is_forgotten() {
        let mut log = IntervalLog::new(2);
        for n in 1..=5 {
            log.record(iv(1, n, &[usize::try_from(n).unwrap()]))
                .unwrap();
        }
        log.forget_seen_by_all(&VectorTime::from_slice(&[0, 3]));
        assert_eq!(log.len(), 2);
        assert_eq!(log.newest(1), 5);
        let seen = VectorTime::from_slice(&[0, 4]);
        let ids: Vec<u32> = log.unseen_by(&seen).map(|i| i.id.number).collect();
        assert_eq!(ids, vec![5]);
        log.record(iv(1, 6, &[0])).unwrap();
        assert_eq!(log.newest(1), 6);
        let all: Vec<u32> = log
            .unseen_by(&VectorTime::new(2))
            .map(|i| i.id.number)
            .collect();
        assert_eq!(all, vec![4, 5, 6], "forgotten intervals are not resent");
    }
}
