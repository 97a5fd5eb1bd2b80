//! Opening this node's adapter and the Memory Channel API from the
//! environment (`mc_api::ConnectOptions`: `MC_SOCKET` names a virtual
//! guest's vhost-user socket; without it the adapter's PCI function is
//! driven from user space, as root in a QEMU guest). The adapter is opened
//! first and the API after: the shared heap, and the coherent arena with
//! it, are sized from the adapter's registers (the cluster's Memory
//! Channel space, `runtime::heap`).

use mc_api::{connect_port, ConnectError, ConnectOptions, McPort, MemoryChannel, OpenOptions};

/// Guest RAM of a virtual guest in MiB (`MC_RAM_MIB` overrides): what this
/// node may receive is at most the whole of the largest Memory Channel
/// address space (1 GiB: the API's arena, the CSM-DMS home region, the
/// mailboxes), plus the driver's rings and buffers. The heap is sized only
/// once the adapter's registers are read, after the RAM is given, so the
/// RAM is sized for the largest space; it is a memfd, and pages no one
/// touches cost nothing.
const RAM_MIB: usize = 1024 + 96;

/// What the adapter says about the cluster, read before the API is open.
#[derive(Clone, Copy, Debug)]
pub struct Cluster {
    pub nodes: u32,
    /// Memory Channel page size in bytes.
    pub page_size: u32,
    /// The global address space in bytes (`mc-host run --address-space`).
    pub address_space: u64,
}

/// This node's adapter, open but without the API yet.
pub struct Opened {
    port: Box<dyn McPort>,
    reliable: bool,
}

impl Opened {
    pub fn cluster(&self) -> Cluster {
        let r = self.port.registers();
        Cluster {
            nodes: r.nodes,
            page_size: r.page_size,
            address_space: r.address_space,
        }
    }

    /// Open the API with a coherent arena of `arena_bytes` (the start-up
    /// rendezvous waits for every node of the cluster to do the same).
    pub fn open(self, arena_bytes: u64) -> Result<MemoryChannel, ConnectError> {
        let api = OpenOptions {
            arena_bytes,
            reliable: self.reliable,
            ..Default::default()
        };
        Ok(MemoryChannel::open(self.port, &api)?)
    }
}

/// Open this node's adapter (the API comes after, with [`Opened::open`],
/// once the heap is sized from the adapter's registers).
pub fn adapter() -> Result<Opened, ConnectError> {
    let env = ConnectOptions::from_env();
    Ok(Opened {
        port: connect_port(&env.transport(RAM_MIB))?,
        reliable: env.reliable,
    })
}
