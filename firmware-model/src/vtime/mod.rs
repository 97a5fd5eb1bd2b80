//! Virtual arrival times: when a stamped packet would reach its receivers on
//! Memory Channel 2, in the sender's virtual time (issue 29,
//! docs/virtual-time.md s.3).
//!
//! Beside the real link clock (`timing.rs`, which paces real deliveries for
//! `--link`), a store that carries its sender's virtual time gets, for each
//! packet, the virtual time it arrives at each receiver. Alone on the
//! network that is [`arrival`]: the send time, plus the serialisation at
//! MC2's 75 MB/s of the store's bytes up to and including that packet, plus
//! MC2's one-way latency of 2.9 us (seed 004 Table 2; seed 000 s.2.2). When
//! other packets hold the links it needs, it waits for them: `links.rs`
//! models the uplinks, the crossbar and the downlinks, each with a calendar
//! of busy virtual intervals (`calendar.rs`), because packets reach the hub
//! in real-time order, not in virtual order.

mod calendar;
mod links;

pub(crate) use links::VirtualLinks;
pub use links::HORIZON;

use crate::timing::LinkTiming;
use crate::types::Nanos;

/// The network that virtual arrivals follow: a model behind one value, so
/// that the hub, the guests' waits and the reports agree on it.
///
/// Memory Channel 2 is the reference (seed 000, seed 004); seed 001's
/// Giganet cLAN VIA is the second (issue 40). Only the timing differs: the
/// semantics (total order, loopback, broadcast delivered) stay Memory
/// Channel's. `--link clan` chooses the cLAN; every other `--link` paces
/// real deliveries only and leaves virtual time on Memory Channel 2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VirtualLink {
    /// Memory Channel 2's crossbar hub: 2.9 us, 75 MB/s a link, broadcast
    /// in hardware by taking over the crossbar (seed 000 s.2.2).
    #[default]
    Mc2,
    /// Giganet cLAN VIA's switch: 8.2 us, 101 MB/s a port (seed 001
    /// Table 2). It has no broadcast: a page stored to every node leaves
    /// the sender's port once per receiver, one copy after the other.
    Clan,
}

impl VirtualLink {
    /// The virtual network a cluster with real-time pacing `link` models.
    pub fn for_link(link: &LinkTiming) -> VirtualLink {
        if *link == LinkTiming::CLAN {
            VirtualLink::Clan
        } else {
            VirtualLink::Mc2
        }
    }

    /// The virtual network named by the register file's link-timing code
    /// (`abi::link_timing_code`): what a guest reads from its adapter.
    pub fn from_register(code: u32) -> VirtualLink {
        if code == crate::abi::link_timing_code(&LinkTiming::CLAN) {
            VirtualLink::Clan
        } else {
            VirtualLink::Mc2
        }
    }

    /// Latency and bandwidth of one path.
    pub fn timing(self) -> LinkTiming {
        match self {
            VirtualLink::Mc2 => LinkTiming::MC2,
            VirtualLink::Clan => LinkTiming::CLAN,
        }
    }

    /// Whether the network delivers one transmission to every node.
    pub fn broadcasts(self) -> bool {
        matches!(self, VirtualLink::Mc2)
    }

    /// Serialisation of `bytes` on one link, in ns (saturating).
    pub fn ser(self, bytes: u64) -> u64 {
        self.timing().serialisation(bytes).0
    }

    /// Of the one-way latency, the part before the receiver's downlink
    /// (the sender's adapter, its uplink and the hub or switch). Every
    /// packet crosses both halves, so the split changes no lone arrival.
    pub fn hub_offset(self) -> u64 {
        self.timing().one_way_latency.0 / 2
    }

    /// The virtual arrival of a packet alone on the network, whose store
    /// was sent at `send` and whose last byte is the `bytes_through`-th of
    /// the store. With other traffic on its links a packet arrives at this
    /// time or later (`Delivery::vt`).
    pub fn arrival(self, send: Nanos, bytes_through: u64) -> Nanos {
        let t = self.timing();
        send.saturating_add(t.serialisation(bytes_through))
            .saturating_add(t.one_way_latency)
    }
}

/// The timing of the reference network, Memory Channel 2.
pub const VIRTUAL_LINK: LinkTiming = LinkTiming::MC2;

/// The virtual arrival of a packet alone on Memory Channel 2
/// ([`VirtualLink::arrival`] on the reference network).
pub fn arrival(send: Nanos, bytes_through: u64) -> Nanos {
    VirtualLink::Mc2.arrival(send, bytes_through)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_clan_is_chosen_by_its_link_and_by_its_register_code() {
        assert_eq!(VirtualLink::for_link(&LinkTiming::CLAN), VirtualLink::Clan);
        for other in [LinkTiming::MC1, LinkTiming::MC2, LinkTiming::UNTHROTTLED] {
            assert_eq!(VirtualLink::for_link(&other), VirtualLink::Mc2);
            let code = crate::abi::link_timing_code(&other);
            assert_eq!(VirtualLink::from_register(code), VirtualLink::Mc2);
        }
        let code = crate::abi::link_timing_code(&LinkTiming::CLAN);
        assert_eq!(VirtualLink::from_register(code), VirtualLink::Clan);
        assert_eq!(crate::abi::link_timing_name(code), "clan");
    }

    #[test]
    fn a_small_clan_message_arrives_after_seed_001s_latency() {
        // Seed 001 Table 2: 8.2 us one way; 4 bytes at 101 MB/s add 40 ns.
        let a = VirtualLink::Clan.arrival(Nanos(1_000), 4);
        assert_eq!(a.0, 1_000 + 8_200 + 40);
        // A 4 KiB page: 40.6 us of serialisation at 101 MB/s.
        let page = VirtualLink::Clan.arrival(Nanos(0), 4096).0;
        assert_eq!(page, 8_200 + 4096 * 1_000_000_000 / 101_000_000 + 1);
    }

    #[test]
    fn a_minimum_write_arrives_about_three_microseconds_later() {
        let a = arrival(Nanos(1_000), 8);
        assert!(a.0 >= 1_000 + 2_900 && a.0 <= 1_000 + 3_100, "{a}");
    }

    proptest! {
        #[test]
        fn arrival_is_after_the_latency_and_monotone_in_bytes(
            send in 0u64..(1u64 << 50),
            bytes in 1u64..(1u64 << 20),
            more in 0u64..(1u64 << 16),
        ) {
            let a = arrival(Nanos(send), bytes);
            prop_assert!(a.0 >= send + VIRTUAL_LINK.one_way_latency.0);
            prop_assert!(arrival(Nanos(send), bytes + more) >= a);
            prop_assert!(arrival(Nanos(send + more), bytes) >= a);
        }
    }
}
