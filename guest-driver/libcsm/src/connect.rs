//! Opening this node's adapter and the Memory Channel API from the
//! environment, as `mc-guest` and libimc do: `MC_SOCKET` names a virtual
//! guest's vhost-user socket; without it the adapter's PCI function is
//! driven from user space (as root in a QEMU guest). Guest RAM and the
//! coherent arena are sized from the shared heap, as `mc-guest csm` sizes
//! them (docs/cashmere.md, "SOR grids").

use std::path::PathBuf;

use mc_api::{AdapterPort, McError, MemoryChannel, OpenOptions};
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

/// Open the adapter and the API for a Cashmere heap of `heap_bytes` whose
/// protocol space is `arena_bytes` (the start-up rendezvous waits for every
/// node of the cluster to do the same).
pub fn open(heap_bytes: usize, arena_bytes: u64) -> Result<MemoryChannel, ConnectError> {
    let reliable =
        std::env::var("MC_RELIABLE").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    let socket = std::env::var_os("MC_SOCKET")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let t: Box<dyn Transport> = match &socket {
        Some(socket) => {
            // The heap is received once more as this node's home region.
            let ram_mib = env_number("MC_RAM_MIB")
                .unwrap_or_else(|| 64.max(((4 << 20) + 2 * heap_bytes) >> 20) + 32);
            let o = VhostUserOptions {
                ram_size: ram_mib << 20,
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
    let port = AdapterPort::new(adapter)?;
    let api = OpenOptions {
        arena_bytes,
        reliable,
        ..Default::default()
    };
    Ok(MemoryChannel::open(Box::new(port), &api)?)
}
