//! What the UMP tests share: messages whose bytes say which message they
//! are, and rings small enough that messages stream through them.

use firmware_model::{FaultCommand, FaultScope, NodeId, PacketFault, Rate};
use mc_device::Cluster;
use ump::Config;

/// A message whose bytes say which message it is, so a mix-up shows.
pub fn message(tag: u64, len: usize) -> Vec<u8> {
    let mut x = tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // The low byte of each step.
            x.to_le_bytes()[0]
        })
        .collect()
}

/// 4 KiB rings and 1 KiB fragments: most messages stream in pieces.
pub fn small_rings() -> Config {
    Config {
        ring_bytes: 4096,
        shm_ring_bytes: 4096,
        region_bytes: 256 << 10,
        fragment_bytes: 1024,
        ..Config::default()
    }
}

/// Drop or corrupt packets on the link from node 0 to node 1, each fault at
/// its probability: the UMP fault tests' damaged link.
pub fn degrade_link_0_to_1(cluster: &Cluster, faults: &[(PacketFault, f64)]) {
    for &(fault, p) in faults {
        cluster
            .apply_fault(FaultCommand::Packets {
                fault,
                scope: FaultScope::Link {
                    from: NodeId(0),
                    to: NodeId(1),
                },
                rate: Rate::from_probability(p).expect("a probability"),
            })
            .expect("fault applied");
    }
}
