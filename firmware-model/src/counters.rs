//! Traffic and error counters, per adapter and for the hub.

/// One adapter's counters. They survive crashes (they are the operator's view,
/// not adapter state).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NodeCounters {
    /// Packets this adapter put on its link.
    pub packets_sent: u64,
    /// Payload bytes in those packets.
    pub bytes_sent: u64,
    /// Of those, packets sent on broadcast pages.
    pub broadcasts_sent: u64,
    /// Packets DMA'd into this node (loopback included).
    pub packets_received: u64,
    /// Payload bytes in those packets.
    pub bytes_received: u64,
    /// Packets lost on this node's link: sent while it was down, or lost on the
    /// way to this node (drop fault, link down, adapter crashed).
    pub drops: u64,
    /// Network errors this adapter detected (CRC discards, link losses).
    pub errors: u64,
    /// Stores this adapter refused.
    pub protection_errors: u64,
    /// ACK page requests this adapter made.
    pub acks: u64,
    /// Virtual time (ns) this adapter's stamped packets waited for busy
    /// links and the crossbar, summed over their deliveries (issue 29,
    /// docs/virtual-time.md s.3). Saturates.
    pub virtual_queueing_ns: u64,
}

/// The hub's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct HubCounters {
    /// Packets that reached the hub and got a place in the global order.
    pub packets: u64,
    /// Payload bytes in those packets.
    pub bytes: u64,
    /// Of those, broadcast packets.
    pub broadcasts: u64,
    /// Packet deliveries into receivers (one packet may make several).
    pub deliveries: u64,
    /// Packets lost (sum of every node's `drops`).
    pub drops: u64,
    /// Network errors (sum of every node's `errors`): the cluster error count.
    pub errors: u64,
    /// ACK page requests.
    pub acks: u64,
    /// Every node's `virtual_queueing_ns`, summed. Saturates.
    pub virtual_queueing_ns: u64,
}
