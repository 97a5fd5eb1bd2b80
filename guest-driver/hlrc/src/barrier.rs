//! The barrier: one manager collects every node's arrival with its vector
//! time, and when the last arrives releases each node with what it has not
//! seen (seed 001 s.3: "a barrier manager ... a linear number of messages").

use crate::{Node, VectorTime};

/// How a barrier spreads the write notices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BarrierMode {
    /// One manager, node 0: every node sends it its arrival, and it sends
    /// each node a release with the notices that node has not seen (seed
    /// 001 s.3: "a linear number of messages"; 2(N-1) messages).
    #[default]
    Manager,
    /// Every node broadcasts its arrival with its notices, and each node
    /// leaves once it has every arrival: N-1 broadcasts, no release (the
    /// what-if of seed 001 s.6; cLAN has no broadcast, Memory Channel has).
    Broadcast,
}

/// What the manager sends when the last node arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BarrierRelease {
    /// Everything seen by anyone: each node's time after the barrier. No
    /// node will then ask for an interval it covers, so every node may
    /// forget them (`IntervalLog::forget_seen_by_all`).
    pub merged: VectorTime,
    /// Each node's time at its arrival: what it has not seen is what its
    /// release must carry (`IntervalLog::unseen_by`).
    pub arrived: Vec<VectorTime>,
}

/// The manager's count of one barrier episode.
#[derive(Clone, Debug)]
pub struct BarrierManager {
    arrived: Vec<Option<VectorTime>>,
}

/// An arrival the manager cannot take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BarrierError {
    #[error("node {0} arrived twice at one barrier")]
    Twice(Node),
    #[error("node {node} is outside the cluster of {nodes} nodes")]
    NoSuchNode { node: Node, nodes: usize },
}

impl BarrierManager {
    pub fn new(nodes: usize) -> BarrierManager {
        BarrierManager {
            arrived: vec![None; nodes],
        }
    }

    /// Whether `node` has arrived at the current episode.
    pub fn has_arrived(&self, node: Node) -> Result<bool, BarrierError> {
        let nodes = self.arrived.len();
        self.arrived
            .get(node)
            .map(Option::is_some)
            .ok_or(BarrierError::NoSuchNode { node, nodes })
    }

    /// `node` arrived having seen `time`; the release once every node has.
    pub fn arrive(
        &mut self,
        node: Node,
        time: VectorTime,
    ) -> Result<Option<BarrierRelease>, BarrierError> {
        let nodes = self.arrived.len();
        let slot = self
            .arrived
            .get_mut(node)
            .ok_or(BarrierError::NoSuchNode { node, nodes })?;
        if slot.is_some() {
            return Err(BarrierError::Twice(node));
        }
        *slot = Some(time);
        if self.arrived.iter().any(Option::is_none) {
            return Ok(None);
        }
        let arrived: Vec<VectorTime> = self
            .arrived
            .iter_mut()
            .map(|t| t.take().unwrap_or_default())
            .collect();
        let mut merged = VectorTime::new(nodes);
        for t in &arrived {
            merged.merge(t);
        }
        Ok(Some(BarrierRelease { merged, arrived }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_arrival_releases_everyone_with_the_merged_time() {
        let mut m = BarrierManager::new(3);
        assert_eq!(m.arrive(0, VectorTime::from_slice(&[2, 0, 0])), Ok(None));
        assert_eq!(m.arrive(0, VectorTime::new(3)), Err(BarrierError::Twice(0)));
        assert_eq!(m.arrive(2, VectorTime::from_slice(&[1, 0, 4])), Ok(None));
        let r = m
            .arrive(1, VectorTime::from_slice(&[0, 1, 0]))
            .unwrap()
            .expect("all three arrived");
        assert_eq!(r.merged.as_slice(), &[2, 1, 4]);
        assert_eq!(r.arrived[2].as_slice(), &[1, 0, 4]);
        // The next episode starts empty.
        assert_eq!(m.arrive(1, VectorTime::new(3)), Ok(None));
        assert_eq!(
            m.arrive(7, VectorTime::new(3)),
            Err(BarrierError::NoSuchNode { node: 7, nodes: 3 })
        );
    }
}
