//! Seeded fault injection: lost and corrupted packets, link flaps, node crashes,
//! hub stalls.
//!
//! Every random decision comes from one SplitMix64 stream seeded from the cluster
//! configuration, drawn in the hub's global packet order, so the same seed and the
//! same sequence of operations give the same faults and the same outcome.

use std::fmt;

use crate::types::{Nanos, NodeId};

/// A probability in parts per million (exact, so runs replay bit for bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Rate(u32);

impl Rate {
    pub const NEVER: Rate = Rate(0);
    pub const ALWAYS: Rate = Rate(1_000_000);

    /// A rate from parts per million (at most 1 000 000).
    pub fn from_ppm(ppm: u32) -> Result<Rate, FaultError> {
        if ppm <= 1_000_000 {
            Ok(Rate(ppm))
        } else {
            Err(FaultError::Rate(f64::from(ppm) / 1e6))
        }
    }

    /// A rate from a probability in 0.0 ..= 1.0, rounded to the nearest ppm.
    pub fn from_probability(p: f64) -> Result<Rate, FaultError> {
        if p.is_finite() && (0.0..=1.0).contains(&p) {
            Ok(Rate((p * 1e6).round() as u32))
        } else {
            Err(FaultError::Rate(p))
        }
    }

    pub fn ppm(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", f64::from(self.0) / 1e4)
    }
}

/// Which packets a packet fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultScope {
    /// Every packet to every receiver.
    Everywhere,
    /// Packets sent by or delivered to this node (its link to the hub).
    Node(NodeId),
    /// Packets from `from` to `to` only.
    Link { from: NodeId, to: NodeId },
}

impl FaultScope {
    fn matches(self, from: NodeId, to: NodeId) -> bool {
        match self {
            FaultScope::Everywhere => true,
            FaultScope::Node(n) => from == n || to == n,
            FaultScope::Link { from: f, to: t } => from == f && to == t,
        }
    }

    fn nodes(self) -> impl Iterator<Item = NodeId> {
        let (a, b) = match self {
            FaultScope::Everywhere => (None, None),
            FaultScope::Node(n) => (Some(n), None),
            FaultScope::Link { from, to } => (Some(from), Some(to)),
        };
        a.into_iter().chain(b)
    }
}

impl fmt::Display for FaultScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultScope::Everywhere => f.write_str("everywhere"),
            FaultScope::Node(n) => write!(f, "{n}"),
            FaultScope::Link { from, to } => write!(f, "link {from}->{to}"),
        }
    }
}

/// What happens to a packet that a fault hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PacketFault {
    /// Lost without trace: the hardware does not notice (software must).
    Drop,
    /// Damaged on the wire: the receiver's CRC check discards it and counts an error.
    Corrupt,
}

impl fmt::Display for PacketFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PacketFault::Drop => "drop",
            PacketFault::Corrupt => "corrupt",
        })
    }
}

/// One fault action, applied to a running hub now or at a scheduled time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultCommand {
    /// Start dropping or corrupting packets in `scope` at `rate`.
    Packets {
        fault: PacketFault,
        scope: FaultScope,
        rate: Rate,
    },
    /// Remove every packet fault rule.
    ClearPackets,
    /// Take a node's link to the hub down: everything to or from it is lost.
    LinkDown(NodeId),
    /// Bring a node's link back up.
    LinkUp(NodeId),
    /// The node's adapter fails: it leaves the cluster and loses its PCT.
    Crash(NodeId),
    /// A crashed node's adapter comes back (empty PCT) and rejoins.
    Rejoin(NodeId),
    /// The hub forwards nothing for `duration`; packets wait and keep their order.
    StallHub { duration: Nanos },
}

impl FaultCommand {
    /// Nodes this command names (for range checks).
    pub(crate) fn nodes(&self) -> Vec<NodeId> {
        match *self {
            FaultCommand::Packets { scope, .. } => scope.nodes().collect(),
            FaultCommand::LinkDown(n)
            | FaultCommand::LinkUp(n)
            | FaultCommand::Crash(n)
            | FaultCommand::Rejoin(n) => vec![n],
            FaultCommand::ClearPackets | FaultCommand::StallHub { .. } => Vec::new(),
        }
    }
}

impl fmt::Display for FaultCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultCommand::Packets { fault, scope, rate } => write!(f, "{fault} {rate} {scope}"),
            FaultCommand::ClearPackets => f.write_str("clear packet faults"),
            FaultCommand::LinkDown(n) => write!(f, "link down {n}"),
            FaultCommand::LinkUp(n) => write!(f, "link up {n}"),
            FaultCommand::Crash(n) => write!(f, "crash {n}"),
            FaultCommand::Rejoin(n) => write!(f, "rejoin {n}"),
            FaultCommand::StallHub { duration } => write!(f, "stall hub {duration}"),
        }
    }
}

/// A fault command the hub cannot carry out.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultError {
    #[error("fault rate must be a probability between 0 and 1, got {0}")]
    Rate(f64),
    #[error("fault names {node}, which is not in the cluster of {nodes} nodes")]
    NoSuchNode { node: NodeId, nodes: u8 },
    #[error("{0} is already crashed")]
    AlreadyCrashed(NodeId),
    #[error("{0} has not crashed, so it cannot rejoin")]
    NotCrashed(NodeId),
}

/// Deterministic random stream (SplitMix64: tiny, fast, stable across versions).
#[derive(Clone, Debug)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `rate`.
    pub(crate) fn hit(&mut self, rate: Rate) -> bool {
        match rate.0 {
            0 => false,
            1_000_000.. => true,
            ppm => self.next_u64() % 1_000_000 < u64::from(ppm),
        }
    }
}

/// The active packet fault rules, checked in the order they were added.
#[derive(Clone, Debug)]
pub(crate) struct PacketFaults {
    rules: Vec<(PacketFault, FaultScope, Rate)>,
    rng: SplitMix64,
}

impl PacketFaults {
    pub(crate) fn new(seed: u64) -> Self {
        PacketFaults {
            rules: Vec::new(),
            rng: SplitMix64::new(seed),
        }
    }

    pub(crate) fn add(&mut self, fault: PacketFault, scope: FaultScope, rate: Rate) {
        self.rules.push((fault, scope, rate));
    }

    pub(crate) fn clear(&mut self) {
        self.rules.clear();
    }

    pub(crate) fn rules(&self) -> &[(PacketFault, FaultScope, Rate)] {
        &self.rules
    }

    /// The fault, if any, that hits the packet from `from` as seen by `to`.
    pub(crate) fn decide(&mut self, from: NodeId, to: NodeId) -> Option<PacketFault> {
        for i in 0..self.rules.len() {
            let (fault, scope, rate) = self.rules[i];
            if scope.matches(from, to) && self.rng.hit(rate) {
                return Some(fault);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_checked() {
        assert!(Rate::from_probability(1.5).is_err());
        assert!(Rate::from_probability(f64::NAN).is_err());
        assert!(Rate::from_ppm(1_000_001).is_err());
        assert_eq!(Rate::from_probability(0.01).unwrap().ppm(), 10_000);
        assert_eq!(Rate::from_probability(0.01).unwrap().to_string(), "1%");
    }

    #[test]
    fn rate_is_roughly_honoured() {
        let mut rng = SplitMix64::new(7);
        let rate = Rate::from_probability(0.1).unwrap();
        let hits = (0..100_000).filter(|_| rng.hit(rate)).count();
        assert!((9_000..11_000).contains(&hits), "{hits}");
    }

    #[test]
    fn scopes_match_what_they_name() {
        let (a, b, c) = (NodeId(0), NodeId(1), NodeId(2));
        assert!(FaultScope::Everywhere.matches(a, b));
        assert!(FaultScope::Node(b).matches(a, b) && FaultScope::Node(b).matches(b, c));
        assert!(!FaultScope::Node(b).matches(a, c));
        let link = FaultScope::Link { from: a, to: b };
        assert!(link.matches(a, b) && !link.matches(b, a) && !link.matches(a, c));
    }
}
