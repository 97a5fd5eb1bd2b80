//! Opening this node's adapter and the Memory Channel API from the
//! environment, as `mc-guest` and libimc do: `MC_SOCKET` names a virtual
//! guest's vhost-user socket; without it the adapter's PCI function is
//! driven from user space (as root in a QEMU guest). The adapter is opened
//! first and the API after: the shared heap, and the coherent arena with
//! it, are sized from the adapter's registers (the cluster's Memory
//! Channel space, `runtime::heap`).

use std::path::PathBuf;

use mc_api::{AdapterPort, McError, McPort, MemoryChannel, OpenOptions};
use mc_driver::{
    Adapter, AdapterOptions, PciOptions, PciTransport, Transport, VhostUserOptions,
    VhostUserTransport,
};

/// Why the Memory Channel could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    // Each prints its cause, so none returns it as its source too.
    #[error("{}: {error}", socket.display())]
    VhostUser {
        socket: PathBuf,
        error: mc_driver::Error,
    },
    #[error("{error} (no MC_SOCKET in the environment, so the PCI adapter was tried)")]
    Pci { error: mc_driver::Error },
    #[error(transparent)]
    Adapter(#[from] mc_driver::Error),
    #[error(transparent)]
    Api(#[from] McError),
}

fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Guest RAM of a virtual guest (`MC_RAM_MIB` overrides): what this node
/// may receive is at most the whole of the largest Memory Channel address
/// space (1 GiB: the API's arena, the CSM-DMS home region, the mailboxes),
/// plus the driver's rings and buffers. The heap is sized only once the
/// adapter's registers are read, after the RAM is given, so the RAM is
/// sized for the largest space; it is a memfd, and pages no one touches
/// cost nothing.
const RAM_BYTES: usize = (1 << 30) + (96 << 20);

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
    let reliable =
        std::env::var("MC_RELIABLE").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    let socket = std::env::var_os("MC_SOCKET")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let t: Box<dyn Transport> = match &socket {
        Some(socket) => {
            let ram_size = env_number("MC_RAM_MIB").map_or(RAM_BYTES, |m| m << 20);
            let o = VhostUserOptions {
                ram_size,
                ..Default::default()
            };
            Box::new(VhostUserTransport::connect(socket, &o).map_err(|e| {
                ConnectError::VhostUser {
                    socket: socket.clone(),
                    error: e.into(),
                }
            })?)
        }
        None => {
            let o = PciOptions {
                dma_size: env_number("MC_DMA_MIB").unwrap_or(16) << 20,
                ..Default::default()
            };
            Box::new(PciTransport::open(&o).map_err(|e| ConnectError::Pci { error: e.into() })?)
        }
    };
    // Spin only briefly before yielding: guests and the hub share the cores.
    let adapter = Adapter::new(
        t,
        AdapterOptions {
            spin: 64,
            ..Default::default()
        },
    )?;
    Ok(Opened {
        port: Box::new(AdapterPort::new(adapter)?),
        reliable,
    })
}
