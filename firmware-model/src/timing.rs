//! Link timing: when a packet would arrive on real hardware.
//!
//! The model stamps every delivery with a due time; the device uses the stamp to
//! throttle when the user asks for hardware-like speed (`--link mc1|mc2`). With the
//! default `unthrottled` preset every stamp equals the submission time.

use std::fmt;
use std::str::FromStr;

use crate::types::Nanos;

/// Latency and bandwidth of one adapter-to-hub-to-adapter path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkTiming {
    /// Time from the hub forwarding a packet to the receiver's DMA: the one-way
    /// latency of a minimum-size write, less its serialisation.
    pub one_way_latency: Nanos,
    /// Payload bandwidth of a sender's link, bytes per second; `None` = unlimited.
    pub bytes_per_sec: Option<u64>,
}

impl LinkTiming {
    /// Memory Channel 1: "less than 5 us" one way, 35-70 MB/s depending on the PCI
    /// bus (seed 004, "MEMORY CHANNEL Overview"); we take 5 us and 50 MB/s.
    pub const MC1: LinkTiming = LinkTiming {
        one_way_latency: Nanos(5_000),
        bytes_per_sec: Some(50_000_000),
    };
    /// Memory Channel 2: 2.9 us one way, 75 MB/s (seed 004 Table 2; seed 000 s.2.2).
    pub const MC2: LinkTiming = LinkTiming {
        one_way_latency: Nanos(2_900),
        bytes_per_sec: Some(75_000_000),
    };
    /// Giganet cLAN VIA, seed 001's network: 8.2 us one way for a small
    /// message, 101 MB/s (seed 001 Table 2). The semantics stay Memory
    /// Channel's; only the timing is the cLAN's (docs/virtual-time.md s.3a).
    pub const CLAN: LinkTiming = LinkTiming {
        one_way_latency: Nanos(8_200),
        bytes_per_sec: Some(101_000_000),
    };
    /// No modelled delay: deliveries are due as soon as they are submitted.
    pub const UNTHROTTLED: LinkTiming = LinkTiming {
        one_way_latency: Nanos(0),
        bytes_per_sec: None,
    };

    /// Time to push `bytes` of payload through a sender's link.
    pub fn serialisation(&self, bytes: u64) -> Nanos {
        match self.bytes_per_sec {
            None | Some(0) => Nanos::ZERO,
            Some(bps) => {
                let ns = (u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(bps));
                Nanos(u64::try_from(ns).unwrap_or(u64::MAX))
            }
        }
    }

    /// The preset's name, if this is one of the presets.
    pub fn preset_name(&self) -> Option<&'static str> {
        match *self {
            LinkTiming::MC1 => Some("mc1"),
            LinkTiming::MC2 => Some("mc2"),
            LinkTiming::CLAN => Some("clan"),
            LinkTiming::UNTHROTTLED => Some("unthrottled"),
            _ => None,
        }
    }
}

impl Default for LinkTiming {
    fn default() -> Self {
        LinkTiming::UNTHROTTLED
    }
}

impl fmt::Display for LinkTiming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.preset_name() {
            Some(name) => f.write_str(name),
            None => write!(
                f,
                "latency {} bandwidth {}",
                self.one_way_latency,
                self.bytes_per_sec
                    .map_or_else(|| "unlimited".to_string(), |b| format!("{b} B/s"))
            ),
        }
    }
}

/// An unknown link preset name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown link preset {0:?}: expected one of mc1, mc2, clan, unthrottled")]
pub struct UnknownLinkPreset(pub String);

impl FromStr for LinkTiming {
    type Err = UnknownLinkPreset;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mc1" => Ok(LinkTiming::MC1),
            "mc2" => Ok(LinkTiming::MC2),
            "clan" => Ok(LinkTiming::CLAN),
            "unthrottled" | "none" => Ok(LinkTiming::UNTHROTTLED),
            _ => Err(UnknownLinkPreset(s.to_string())),
        }
    }
}

/// The hub's clocks: when each sender's link and the hub itself are next free.
#[derive(Clone, Debug)]
pub(crate) struct LinkClock {
    timing: LinkTiming,
    tx_free: Vec<Nanos>,
    hub_last: Nanos,
    stall_until: Nanos,
}

impl LinkClock {
    pub(crate) fn new(timing: LinkTiming, nodes: usize) -> Self {
        LinkClock {
            timing,
            tx_free: vec![Nanos::ZERO; nodes],
            hub_last: Nanos::ZERO,
            stall_until: Nanos::ZERO,
        }
    }

    /// Hold every packet the hub has not yet forwarded until `until`.
    pub(crate) fn stall(&mut self, until: Nanos) {
        self.stall_until = self.stall_until.max(until);
    }

    pub(crate) fn stalled_until(&self) -> Nanos {
        self.stall_until
    }

    /// Time the hub forwards a packet of `bytes` sent by node index `src` at `now`.
    /// Hub times never decrease, so the global order is also the time order.
    pub(crate) fn forward(&mut self, now: Nanos, src: usize, bytes: u64, broadcast: bool) -> Nanos {
        let ser = self.timing.serialisation(bytes);
        let tx_free = self.tx_free.get(src).copied().unwrap_or(Nanos::ZERO);
        let start = now.max(tx_free);
        let sent = start.saturating_add(ser);
        if let Some(slot) = self.tx_free.get_mut(src) {
            *slot = sent;
        }
        let hub = sent.max(self.hub_last).max(self.stall_until);
        // A broadcast takes over the whole hub for its serialisation time
        // (seed 000 s.2.2: "it must take over the crossbar").
        self.hub_last = if broadcast {
            hub.saturating_add(ser)
        } else {
            hub
        };
        hub
    }

    /// Forwarding takes no serialisation time: every packet sent at the same
    /// `now` is forwarded at the same hub time, whatever its length.
    pub(crate) fn forwards_without_delay(&self) -> bool {
        matches!(self.timing.bytes_per_sec, None | Some(0))
    }

    /// Time a packet the hub forwarded at `hub_time` reaches a receiver.
    pub(crate) fn arrival(&self, hub_time: Nanos) -> Nanos {
        hub_time.saturating_add(self.timing.one_way_latency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_and_print() {
        for name in ["mc1", "mc2", "clan", "unthrottled"] {
            let t: LinkTiming = name.parse().unwrap();
            assert_eq!(t.to_string(), name);
        }
        assert!("mc3".parse::<LinkTiming>().is_err());
    }

    #[test]
    fn mc2_minimum_write_is_about_three_microseconds() {
        let mut clock = LinkClock::new(LinkTiming::MC2, 2);
        let hub = clock.forward(Nanos(0), 0, 8, false);
        let at = clock.arrival(hub);
        assert!(at.0 >= 2_900 && at.0 <= 3_100, "{at}");
    }

    #[test]
    fn streaming_is_bandwidth_bound() {
        let mut clock = LinkClock::new(LinkTiming::MC2, 2);
        let mut last = Nanos(0);
        for _ in 0..1000 {
            let hub = clock.forward(Nanos(0), 0, 32, false);
            last = clock.arrival(hub);
        }
        // 32 000 bytes at 75 MB/s is 426.7 us, plus one latency.
        assert!(
            last.0 >= 426_000 + 2_900 && last.0 <= 428_000 + 2_900,
            "{last}"
        );
    }

    #[test]
    fn unthrottled_is_immediate_and_monotone() {
        let mut clock = LinkClock::new(LinkTiming::UNTHROTTLED, 2);
        assert_eq!(clock.forward(Nanos(10), 0, 256, true), Nanos(10));
        // A later submission with an earlier clock reading still comes after.
        assert_eq!(clock.forward(Nanos(5), 1, 8, false), Nanos(10));
    }

    #[test]
    fn stall_holds_packets() {
        let mut clock = LinkClock::new(LinkTiming::UNTHROTTLED, 1);
        clock.stall(Nanos(1_000));
        assert_eq!(clock.forward(Nanos(10), 0, 8, false), Nanos(1_000));
        assert_eq!(clock.forward(Nanos(2_000), 0, 8, false), Nanos(2_000));
    }
}
