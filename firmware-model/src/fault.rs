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
pub struct Rate(pub(crate) u32);

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
            // In 0 ..= 1e6 (checked above): no truncation.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
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

/// The longest hub stall a fault may ask for. Longer is surely a slip of the
/// keyboard (`stall 1000000000s`), and would leave every guest's stores waiting
/// for decades.
pub const MAX_STALL: Nanos = Nanos(60_000_000_000);

impl FaultCommand {
    /// Bounds on the command's own values (node ranges are the hub's to check).
    pub(crate) fn check_bounds(&self) -> Result<(), FaultError> {
        match *self {
            FaultCommand::StallHub { duration } if duration > MAX_STALL => {
                Err(FaultError::StallTooLong { duration })
            }
            _ => Ok(()),
        }
    }

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
    #[error(
        "a hub stall of {:.3} s is longer than the longest allowed, {} s",
        duration.0 as f64 / 1e9,
        MAX_STALL.0 / 1_000_000_000
    )]
    StallTooLong { duration: Nanos },
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

    /// Whether [`PacketFaults::decide`] could hit (or draw for) a packet
    /// from `from` as seen by `to`: some rule's scope matches it with a
    /// rate above zero (a zero rate draws nothing and never hits).
    pub(crate) fn may_hit(&self, from: NodeId, to: NodeId) -> bool {
        self.rules
            .iter()
            .any(|&(_, scope, rate)| rate.0 != 0 && scope.matches(from, to))
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

/// A fault command that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FaultSyntaxError(pub String);

/// Parse a duration: `250us`, `5ms`, `1.5s`, `100ns`.
pub fn parse_duration(s: &str) -> Result<Nanos, FaultSyntaxError> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => {
            return Err(FaultSyntaxError(format!(
                "{s:?}: a duration needs a unit: ns, us, ms or s (e.g. 5ms)"
            )))
        }
    };
    let v: f64 = num.parse().map_err(|_| {
        FaultSyntaxError(format!("{s:?} is not a duration (e.g. 250us, 5ms, 1.5s)"))
    })?;
    if !v.is_finite() || v < 0.0 || v * mult > 1e18 {
        return Err(FaultSyntaxError(format!("{s:?} is out of range")));
    }
    // In 0 ..= 1e18 (checked above): no truncation.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(Nanos((v * mult).round() as u64))
}

fn parse_rate(s: &str) -> Result<Rate, FaultSyntaxError> {
    let (v, scale) = match s.strip_suffix('%') {
        Some(p) => (p, 100.0),
        None => (s, 1.0),
    };
    let p: f64 = v
        .parse()
        .map_err(|_| FaultSyntaxError(format!("{s:?} is not a rate (e.g. 0.01 or 1%)")))?;
    Rate::from_probability(p / scale).map_err(|e| FaultSyntaxError(e.to_string()))
}

fn parse_node(s: Option<&str>) -> Result<NodeId, FaultSyntaxError> {
    let s = s.ok_or_else(|| FaultSyntaxError("a node number is missing".into()))?;
    let n = s.strip_prefix("node").unwrap_or(s);
    n.parse::<u8>()
        .ok()
        .filter(|n| *n < 64)
        .map(NodeId)
        .ok_or_else(|| FaultSyntaxError(format!("{s:?} is not a node number (0..63)")))
}

/// The fault syntax shared by `mc-host fault`, the control socket and fault plans:
///
/// - `drop RATE SCOPE`, `corrupt RATE SCOPE`: RATE is `0.01` or `1%`; SCOPE is
///   `everywhere` (default), `node N`, or `link A B` (packets from A to B)
/// - `clear`: remove every drop/corrupt rule
/// - `link-down N`, `link-up N`, `crash N`, `rejoin N`
/// - `stall DURATION`: e.g. `stall 5ms`
impl std::str::FromStr for FaultCommand {
    type Err = FaultSyntaxError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let mut it = words.iter().copied();
        let verb = it
            .next()
            .ok_or_else(|| FaultSyntaxError("empty fault command".into()))?;
        let cmd = match verb {
            "drop" | "corrupt" => {
                let fault = if verb == "drop" { PacketFault::Drop } else { PacketFault::Corrupt };
                let rate = parse_rate(it.next().ok_or_else(|| FaultSyntaxError(format!("{verb}: the rate is missing")))?)?;
                let scope = match it.next() {
                    None | Some("everywhere") => FaultScope::Everywhere,
                    Some("node") => FaultScope::Node(parse_node(it.next())?),
                    Some("link") => FaultScope::Link {
                        from: parse_node(it.next())?,
                        to: parse_node(it.next())?,
                    },
                    Some(other) => {
                        return Err(FaultSyntaxError(format!(
                            "{other:?}: scope must be everywhere, node N or link A B"
                        )))
                    }
                };
                FaultCommand::Packets { fault, scope, rate }
            }
            "clear" => FaultCommand::ClearPackets,
            "link-down" => FaultCommand::LinkDown(parse_node(it.next())?),
            "link-up" => FaultCommand::LinkUp(parse_node(it.next())?),
            "crash" => FaultCommand::Crash(parse_node(it.next())?),
            "rejoin" => FaultCommand::Rejoin(parse_node(it.next())?),
            "stall" => {
                let cmd = FaultCommand::StallHub {
                    duration: parse_duration(it.next().ok_or_else(|| FaultSyntaxError("stall: the duration is missing".into()))?)?,
                };
                cmd.check_bounds().map_err(|e| FaultSyntaxError(format!("stall: {e}")))?;
                cmd
            }
            other => {
                return Err(FaultSyntaxError(format!(
                    "unknown fault {other:?}: expected drop, corrupt, clear, link-down, link-up, crash, rejoin or stall"
                )))
            }
        };
        if let Some(extra) = it.next() {
            return Err(FaultSyntaxError(format!(
                "unexpected {extra:?} after {verb}"
            )));
        }
        Ok(cmd)
    }
}

#[cfg(test)]
mod syntax_tests {
    use super::*;

    #[test]
    fn commands_parse() {
        let ok = [
            (
                "drop 0.01",
                FaultCommand::Packets {
                    fault: PacketFault::Drop,
                    scope: FaultScope::Everywhere,
                    rate: Rate(10_000),
                },
            ),
            (
                "corrupt 1% node 2",
                FaultCommand::Packets {
                    fault: PacketFault::Corrupt,
                    scope: FaultScope::Node(NodeId(2)),
                    rate: Rate(10_000),
                },
            ),
            (
                "drop 50% link 0 node1",
                FaultCommand::Packets {
                    fault: PacketFault::Drop,
                    scope: FaultScope::Link {
                        from: NodeId(0),
                        to: NodeId(1),
                    },
                    rate: Rate(500_000),
                },
            ),
            ("clear", FaultCommand::ClearPackets),
            ("link-down 3", FaultCommand::LinkDown(NodeId(3))),
            ("link-up node3", FaultCommand::LinkUp(NodeId(3))),
            ("crash 1", FaultCommand::Crash(NodeId(1))),
            ("rejoin 1", FaultCommand::Rejoin(NodeId(1))),
            (
                "stall 1.5ms",
                FaultCommand::StallHub {
                    duration: Nanos(1_500_000),
                },
            ),
        ];
        for (s, want) in ok {
            assert_eq!(s.parse::<FaultCommand>(), Ok(want), "{s}");
        }
        for bad in [
            "",
            "explode",
            "drop",
            "drop 2",
            "drop 1% node",
            "drop 1% node 99",
            "crash x",
            "stall 5",
            "stall 5 parsecs",
            "stall 61s",
            "stall 1000000000s",
            "clear now",
            "corrupt 1% galaxy",
        ] {
            let e = bad.parse::<FaultCommand>().unwrap_err();
            assert!(!e.0.is_empty(), "{bad}");
        }
        assert_eq!(parse_duration("250us"), Ok(Nanos(250_000)));
        assert_eq!(parse_duration("2s"), Ok(Nanos(2_000_000_000)));
        assert_eq!(
            "stall 60s".parse::<FaultCommand>(),
            Ok(FaultCommand::StallHub {
                duration: MAX_STALL
            })
        );
        let e = "stall 1000000000s".parse::<FaultCommand>().unwrap_err();
        assert!(e.0.contains("longest allowed, 60 s"), "{e:?}");
    }
}
