//! Cluster configuration: address space, pages, packets, hub size, timing.

use crate::skew::DeliveryMode;
use crate::timing::LinkTiming;

/// Default hub size: "a hub connecting up to eight nodes" (seed 004).
pub const DEFAULT_HUB_PORTS: u8 = 8;
/// Largest hub this model supports (node sets are 64-bit masks).
pub const MAX_HUB_PORTS: u8 = 64;
/// Memory Channel 2's global address space (seed 000 s.2.2).
pub const MC2_ADDRESS_SPACE: u64 = 512 << 20;
/// Memory Channel 1's global address space (seed 000 s.2.2).
pub const MC1_ADDRESS_SPACE: u64 = 128 << 20;
/// Largest address space the model accepts; keeps every PCT small enough to
/// hold in memory for 64 nodes.
pub const MAX_ADDRESS_SPACE: u64 = 1 << 30;
/// The Alpha's page size, the default.
pub const DEFAULT_PAGE_SIZE: u32 = 8192;
/// Packet payload of the 21164 / MC1 write buffers.
pub const DEFAULT_MAX_PAYLOAD: u32 = 32;
/// Largest packet payload the model accepts.
pub const MAX_PAYLOAD_LIMIT: u32 = 256;
/// Smallest packet payload the model accepts (one 64-bit store).
pub const MIN_PAYLOAD: u32 = 8;

/// Everything that defines one cluster. Build one with [`ClusterConfig::new`] or a
/// preset and adjust fields; [`crate::Hub::new`] validates it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Adapters in the cluster (node ids 0 .. nodes).
    pub nodes: u8,
    /// Ports on the hub: 8 by default, up to 64.
    pub hub_ports: u8,
    /// Size of the global address space in bytes.
    pub address_space: u64,
    /// Page size in bytes: 8192 (default) or 4096.
    pub page_size: u32,
    /// Largest packet payload in bytes: a power of two from 8 to 256.
    pub max_payload: u32,
    /// Link timing used to stamp deliveries.
    pub link: LinkTiming,
    /// Seed of the fault injector's random stream.
    pub fault_seed: u64,
    /// When receivers see what the hub forwarded: all at once (eager) or
    /// each independently late (skewed), within the network's promises.
    pub delivery: DeliveryMode,
}

impl ClusterConfig {
    /// A Memory Channel 2 cluster of `nodes` adapters with every default.
    pub fn new(nodes: u8) -> Self {
        ClusterConfig {
            nodes,
            hub_ports: DEFAULT_HUB_PORTS,
            address_space: MC2_ADDRESS_SPACE,
            page_size: DEFAULT_PAGE_SIZE,
            max_payload: DEFAULT_MAX_PAYLOAD,
            link: LinkTiming::UNTHROTTLED,
            fault_seed: 0,
            delivery: DeliveryMode::Eager,
        }
    }

    /// Memory Channel 1: 128 MiB address space and MC1 timing.
    pub fn mc1(nodes: u8) -> Self {
        ClusterConfig {
            address_space: MC1_ADDRESS_SPACE,
            link: LinkTiming::MC1,
            ..ClusterConfig::new(nodes)
        }
    }

    /// Memory Channel 2: 512 MiB address space and MC2 timing.
    pub fn mc2(nodes: u8) -> Self {
        ClusterConfig {
            link: LinkTiming::MC2,
            ..ClusterConfig::new(nodes)
        }
    }

    /// Number of pages in the global address space.
    pub fn page_count(&self) -> u32 {
        u32::try_from(self.address_space / u64::from(self.page_size.max(1))).unwrap_or(u32::MAX)
    }

    /// Check every field; the error names the field and the allowed values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.hub_ports == 0 || self.hub_ports > MAX_HUB_PORTS {
            return Err(ConfigError::HubPorts(self.hub_ports));
        }
        if self.nodes == 0 || self.nodes > self.hub_ports {
            return Err(ConfigError::Nodes {
                nodes: self.nodes,
                hub_ports: self.hub_ports,
            });
        }
        if self.page_size != 4096 && self.page_size != 8192 {
            return Err(ConfigError::PageSize(self.page_size));
        }
        if self.address_space == 0
            || self.address_space > MAX_ADDRESS_SPACE
            || self.address_space % u64::from(self.page_size) != 0
        {
            return Err(ConfigError::AddressSpace {
                size: self.address_space,
                page_size: self.page_size,
            });
        }
        if !self.max_payload.is_power_of_two()
            || !(MIN_PAYLOAD..=MAX_PAYLOAD_LIMIT).contains(&self.max_payload)
        {
            return Err(ConfigError::MaxPayload(self.max_payload));
        }
        Ok(())
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig::new(DEFAULT_HUB_PORTS)
    }
}

/// A cluster configuration that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("hub ports must be 1..=64, got {0}")]
    HubPorts(u8),
    #[error("node count must be 1..={hub_ports} (the hub's ports), got {nodes}")]
    Nodes { nodes: u8, hub_ports: u8 },
    #[error("page size must be 4096 or 8192 bytes, got {0}")]
    PageSize(u32),
    #[error(
        "address space must be a non-zero multiple of the page size ({page_size}) \
         of at most 1 GiB, got {size} bytes"
    )]
    AddressSpace { size: u64, page_size: u32 },
    #[error("maximum packet payload must be a power of two from 8 to 256 bytes, got {0}")]
    MaxPayload(u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_memory_channel_2() {
        let c = ClusterConfig::default();
        c.validate().unwrap();
        assert_eq!(c.address_space, 512 << 20);
        assert_eq!(c.page_size, 8192);
        assert_eq!(c.max_payload, 32);
        assert_eq!(c.hub_ports, 8);
        assert_eq!(c.page_count(), 65536);
        assert_eq!(ClusterConfig::mc1(4).address_space, 128 << 20);
    }

    #[test]
    fn bad_configs_are_rejected_with_reasons() {
        let bad = [
            ClusterConfig {
                nodes: 0,
                ..ClusterConfig::new(1)
            },
            ClusterConfig::new(9),
            ClusterConfig {
                hub_ports: 65,
                ..ClusterConfig::new(4)
            },
            ClusterConfig {
                page_size: 16384,
                ..ClusterConfig::new(4)
            },
            ClusterConfig {
                address_space: 12345,
                ..ClusterConfig::new(4)
            },
            ClusterConfig {
                address_space: 2 << 30,
                ..ClusterConfig::new(4)
            },
            ClusterConfig {
                max_payload: 48,
                ..ClusterConfig::new(4)
            },
            ClusterConfig {
                max_payload: 512,
                ..ClusterConfig::new(4)
            },
            ClusterConfig {
                max_payload: 4,
                ..ClusterConfig::new(4)
            },
        ];
        for c in bad {
            let err = c.validate().unwrap_err();
            assert!(!err.to_string().is_empty());
        }
        let big = ClusterConfig {
            hub_ports: 64,
            ..ClusterConfig::new(64)
        };
        big.validate().unwrap();
        let small = ClusterConfig {
            page_size: 4096,
            max_payload: 256,
            ..ClusterConfig::new(2)
        };
        small.validate().unwrap();
    }
}
