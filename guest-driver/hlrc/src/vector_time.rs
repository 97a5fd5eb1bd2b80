//! Vector timestamps: what a node has seen of every node's intervals.

use crate::Node;

/// For every node, the newest of its intervals whose write notices this
/// node has seen (0: none). Intervals of one node are numbered from 1 and
/// seen in order, so one number per node says which.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct VectorTime(Vec<u32>);

impl VectorTime {
    /// Nothing seen, on a cluster of `nodes`.
    pub fn new(nodes: usize) -> VectorTime {
        VectorTime(vec![0; nodes])
    }

    /// The number of nodes.
    pub fn nodes(&self) -> usize {
        self.0.len()
    }

    /// The newest interval of `node` seen (0 for a node outside the
    /// cluster).
    pub fn get(&self, node: Node) -> u32 {
        self.0.get(node).copied().unwrap_or(0)
    }

    /// Start `node`'s next interval; returns its number.
    ///
    /// # Panics
    /// If `node` is outside the cluster, or after 2^32 - 1 intervals.
    pub fn tick(&mut self, node: Node) -> u32 {
        let t = &mut self.0[node];
        *t = t.checked_add(1).expect("interval numbers exhausted");
        *t
    }

    /// Having seen everything `other` has (the element-wise maximum).
    pub fn merge(&mut self, other: &VectorTime) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// Whether this has seen everything `other` has.
    pub fn covers(&self, other: &VectorTime) -> bool {
        (0..other.0.len()).all(|n| self.get(n) >= other.get(n))
    }

    /// Whether interval `id` of `node` is among those seen.
    pub fn has_seen(&self, node: Node, id: u32) -> bool {
        id <= self.get(node)
    }

    /// The numbers, node by node (for messages).
    pub fn as_slice(&self) -> &[u32] {
        &self.0
    }

    /// From the numbers of a message.
    pub fn from_slice(times: &[u32]) -> VectorTime {
        VectorTime(times.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ticking_starts_a_node_s_next_interval() {
        let mut v = VectorTime::new(3);
        assert_eq!(v.tick(1), 1);
        assert_eq!(v.tick(1), 2);
        assert_eq!(v.as_slice(), &[0, 2, 0]);
        assert!(v.has_seen(1, 2) && !v.has_seen(1, 3) && v.has_seen(0, 0));
    }

    fn vt() -> impl Strategy<Value = VectorTime> {
        proptest::collection::vec(0u32..20, 4).prop_map(VectorTime)
    }

    proptest! {
        #[test]
        fn merge_is_the_least_time_that_covers_both(a in vt(), b in vt()) {
            let mut m = a.clone();
            m.merge(&b);
            prop_assert!(m.covers(&a) && m.covers(&b));
            for n in 0..4 {
                prop_assert_eq!(m.get(n), a.get(n).max(b.get(n)));
            }
            let mut other = b.clone();
            other.merge(&a);
            prop_assert_eq!(m, other);
        }

        #[test]
        fn covering_is_a_partial_order(a in vt(), b in vt()) {
            prop_assert!(a.covers(&a));
            if a.covers(&b) && b.covers(&a) {
                prop_assert_eq!(&a, &b);
            }
        }
    }
}
