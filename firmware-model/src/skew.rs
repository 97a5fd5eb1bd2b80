//! Delivery modes: when each receiver sees what the hub forwarded.
//!
//! The network promises an order, not a moment (seed 000 s.2.2: "broadcast
//! messages will be observed in the same order by all receivers, and ... all
//! messages from a single source will be observed in the order sent"). In the
//! default [`DeliveryMode::Eager`] mode every receiver gets a packet as soon
//! as the link timing allows, all at the same moment. [`DeliveryMode::Skewed`]
//! is as weak as those promises allow and no weaker: each receiver's
//! deliveries are delayed independently (seeded, bounded, with bursts), so one
//! receiver may hold a packet long before another, and the packets of one
//! store reach a receiver at different times; but every receiver still sees
//! its packets in global order, and an ACK answer is due only after every
//! earlier packet is due everywhere. Code that is right on the hardware is
//! right in both modes; code that relies on timing the network never promised
//! fails in skewed mode.
//!
//! Every draw comes from a per-receiver SplitMix64 stream seeded from the mode's
//! seed and the receiver, drawn in the receiver's (global) order, so the same
//! seed and the same traffic give the same schedule.

use std::fmt;
use std::str::FromStr;

use crate::fault::{Rate, SplitMix64};
use crate::types::Nanos;

/// How deliveries are spread in time at the receivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeliveryMode {
    /// Every receiver at once, when the link timing says (today's default).
    #[default]
    Eager,
    /// Each receiver independently late, within [`SkewParams`] bounds.
    Skewed(SkewParams),
}

impl DeliveryMode {
    /// Skewed delivery with the default bounds and `seed`.
    pub fn skewed(seed: u64) -> DeliveryMode {
        DeliveryMode::Skewed(SkewParams {
            seed,
            ..SkewParams::default()
        })
    }

    pub fn is_skewed(&self) -> bool {
        matches!(self, DeliveryMode::Skewed(_))
    }

    /// The longest a skewed delivery may lag its eager due time.
    pub fn max_lag(&self) -> Nanos {
        match self {
            DeliveryMode::Eager => Nanos::ZERO,
            DeliveryMode::Skewed(p) => Nanos(p.jitter.0.max(p.burst.0)),
        }
    }
}

impl fmt::Display for DeliveryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeliveryMode::Eager => f.write_str("eager"),
            DeliveryMode::Skewed(p) => write!(f, "skewed (seed {})", p.seed),
        }
    }
}

/// Unknown delivery mode name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown delivery mode {0:?}: expected eager or skewed")]
pub struct UnknownDeliveryMode(pub String);

impl FromStr for DeliveryMode {
    type Err = UnknownDeliveryMode;

    /// `eager` or `skewed` (seed 0; set it with [`DeliveryMode::skewed`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "eager" => Ok(DeliveryMode::Eager),
            "skewed" => Ok(DeliveryMode::skewed(0)),
            _ => Err(UnknownDeliveryMode(s.to_string())),
        }
    }
}

/// Bounds of skewed delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkewParams {
    pub seed: u64,
    /// Each delivery lags by up to this much (uniform).
    pub jitter: Nanos,
    /// Share of deliveries that start a burst at their receiver.
    pub burst_rate: Rate,
    /// A burst holds every delivery to that receiver for up to this long.
    pub burst: Nanos,
    /// A node's status page shows another adapter's error up to this late.
    pub status_lag: Nanos,
}

impl Default for SkewParams {
    fn default() -> Self {
        SkewParams {
            seed: 0,
            jitter: Nanos::from_micros(20),
            burst_rate: Rate(2_000),
            burst: Nanos::from_micros(500),
            status_lag: Nanos::from_micros(300),
        }
    }
}

/// One receiver's side of the schedule.
#[derive(Clone, Debug)]
struct ReceiverSkew {
    rng: SplitMix64,
    /// Deliveries are held until this time (a burst).
    held_until: Nanos,
}

/// Per-receiver due times: monotone per receiver (so each receiver sees its
/// packets in global order), independently late in skewed mode.
#[derive(Clone, Debug)]
pub(crate) struct ReceiverClocks {
    mode: DeliveryMode,
    last_due: Vec<Nanos>,
    skew: Vec<ReceiverSkew>,
    /// Status-lag streams, separate so that how often a device refreshes
    /// status pages does not change the delivery schedule.
    status: Vec<SplitMix64>,
}

fn stream(seed: u64, salt: u64, node: usize) -> SplitMix64 {
    let mut s = SplitMix64::new(seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    for _ in 0..=node {
        s.next_u64();
    }
    SplitMix64::new(s.next_u64())
}

fn uniform(rng: &mut SplitMix64, max: Nanos) -> Nanos {
    if max.0 == 0 {
        Nanos::ZERO
    } else {
        Nanos(rng.next_u64() % (max.0 + 1))
    }
}

impl ReceiverClocks {
    pub(crate) fn new(mode: DeliveryMode, nodes: usize) -> Self {
        let seed = match mode {
            DeliveryMode::Skewed(p) => p.seed,
            DeliveryMode::Eager => 0,
        };
        ReceiverClocks {
            mode,
            last_due: vec![Nanos::ZERO; nodes],
            skew: (0..nodes)
                .map(|n| ReceiverSkew {
                    rng: stream(seed, 1, n),
                    held_until: Nanos::ZERO,
                })
                .collect(),
            status: (0..nodes).map(|n| stream(seed, 2, n)).collect(),
        }
    }

    pub(crate) fn mode(&self) -> DeliveryMode {
        self.mode
    }

    /// When a packet that reaches receiver `r` at `arrival` (eagerly) is due
    /// there. Never earlier than the receiver's previous delivery.
    pub(crate) fn due(&mut self, r: usize, arrival: Nanos) -> Nanos {
        let Some(last) = self.last_due.get(r).copied() else {
            return arrival;
        };
        let mut at = arrival;
        if let (DeliveryMode::Skewed(p), Some(s)) = (self.mode, self.skew.get_mut(r)) {
            if s.held_until > at {
                at = s.held_until;
            } else if s.rng.hit(p.burst_rate) {
                // A burst: this receiver falls behind for a while.
                s.held_until = at.saturating_add(uniform(&mut s.rng, p.burst));
                at = s.held_until;
            } else {
                at = at.saturating_add(uniform(&mut s.rng, p.jitter));
            }
        }
        let at = at.max(last);
        self.last_due[r] = at;
        at
    }

    /// The latest due time at any receiver: an ACK answer is not due before it.
    pub(crate) fn latest(&self) -> Nanos {
        self.last_due.iter().copied().max().unwrap_or(Nanos::ZERO)
    }

    /// How late node `n`'s status page may show an error another adapter
    /// detected (zero in eager mode).
    pub(crate) fn status_lag(&mut self, n: usize) -> Nanos {
        match (self.mode, self.status.get_mut(n)) {
            (DeliveryMode::Skewed(p), Some(rng)) => uniform(rng, p.status_lag),
            _ => Nanos::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(mode: DeliveryMode, r: usize, n: usize) -> Vec<Nanos> {
        let mut c = ReceiverClocks::new(mode, 4);
        (0..n as u64).map(|i| c.due(r, Nanos(i * 100))).collect()
    }

    #[test]
    fn eager_is_the_arrival_time() {
        assert_eq!(
            schedule(DeliveryMode::Eager, 1, 5),
            (0..5).map(|i| Nanos(i * 100)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn skewed_is_monotone_bounded_and_replayable() {
        let mode = DeliveryMode::skewed(42);
        let a = schedule(mode, 2, 20_000);
        assert_eq!(a, schedule(mode, 2, 20_000), "same seed, same schedule");
        assert_ne!(a, schedule(DeliveryMode::skewed(43), 2, 20_000));
        assert!(a.windows(2).all(|w| w[0] <= w[1]), "per-receiver order");
        let max = mode.max_lag();
        let mut late = 0;
        let mut bursts = 0;
        for (i, at) in a.iter().enumerate() {
            let lag = at.0 - i as u64 * 100;
            // A held delivery may also wait behind an earlier, later-due one.
            assert!(lag <= max.0 + 100, "delivery {i} lags {lag} ns");
            late += u32::from(lag > 0);
            bursts += u32::from(lag > 50_000);
        }
        assert!(late > 15_000, "most deliveries are late: {late}");
        assert!(bursts > 0, "bursts happen");
    }

    #[test]
    fn receivers_are_skewed_independently() {
        let mode = DeliveryMode::skewed(7);
        assert_ne!(schedule(mode, 0, 100), schedule(mode, 1, 100));
        let mut c = ReceiverClocks::new(mode, 2);
        let a = c.due(0, Nanos(1000));
        let b = c.due(1, Nanos(1000));
        assert_eq!(c.latest(), a.max(b));
    }

    #[test]
    fn modes_parse() {
        assert_eq!(
            "eager".parse::<DeliveryMode>().unwrap(),
            DeliveryMode::Eager
        );
        assert!("skewed".parse::<DeliveryMode>().unwrap().is_skewed());
        assert!("lazy".parse::<DeliveryMode>().is_err());
        assert_eq!(DeliveryMode::skewed(5).to_string(), "skewed (seed 5)");
    }
}
