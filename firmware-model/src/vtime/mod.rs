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

pub(crate) use links::{ser, VirtualLinks};
pub use links::{HORIZON, HUB_OFFSET};

use crate::timing::LinkTiming;
use crate::types::Nanos;

/// The timing virtual arrivals follow, whatever `--link` paces.
pub const VIRTUAL_LINK: LinkTiming = LinkTiming::MC2;

/// The virtual arrival of a packet alone on the network, whose store was
/// sent at `send` and whose last byte is the `bytes_through`-th of the
/// store. With other traffic on its links a packet arrives at this time or
/// later (`Delivery::vt`).
pub fn arrival(send: Nanos, bytes_through: u64) -> Nanos {
    send.saturating_add(VIRTUAL_LINK.serialisation(bytes_through))
        .saturating_add(VIRTUAL_LINK.one_way_latency)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
