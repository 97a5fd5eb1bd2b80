//! Opening this node's adapter and the Memory Channel API, from the
//! environment, the way `mc-guest` does: a virtual guest (`mc-host run`)
//! names its vhost-user socket in `MC_SOCKET`; without it the adapter's PCI
//! function is driven from user space (as root in a QEMU guest).
//!
//! The C library reaches the driver only here, to bring the adapter up
//! (`mc_driver::open_adapter`, as `mc-guest` does); every Memory Channel
//! operation goes through `mc-api`.

use std::path::PathBuf;

use mc_api::{AdapterPort, McError, MemoryChannel, OpenOptions};
use mc_driver::{open_adapter, OpenError, TransportChoice};

/// Why the Memory Channel could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Adapter(#[from] mc_driver::Error),
    #[error(transparent)]
    Api(#[from] McError),
}

/// What the environment asks for.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// `MC_SOCKET`: the virtual guest's socket.
    pub socket: Option<PathBuf>,
    /// `MC_RAM_MIB` (default 64): RAM of a virtual guest.
    pub ram_mib: usize,
    /// `MC_DMA_MIB` (default 16): DMA memory of the PCI transport.
    pub dma_mib: usize,
    /// `MC_RELIABLE=1`: check every store and send it again until clean.
    pub reliable: bool,
    /// `MC_ARENA_KIB` (default 4096): the coherent arena.
    pub arena_kib: u64,
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

impl ConnectOptions {
    pub fn from_env() -> ConnectOptions {
        ConnectOptions {
            socket: TransportChoice::socket_or_env(None),
            ram_mib: env_number("MC_RAM_MIB", 64),
            dma_mib: env_number("MC_DMA_MIB", 16),
            reliable: std::env::var("MC_RELIABLE")
                .is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false")),
            arena_kib: env_number("MC_ARENA_KIB", 4096),
        }
    }

    /// A virtual guest (vhost-user), not a QEMU guest.
    pub fn is_virtual(&self) -> bool {
        self.socket.is_some()
    }
}

/// Open the adapter and the API (the start-up rendezvous waits for every
/// node of the cluster to do the same).
pub fn open(opts: &ConnectOptions) -> Result<MemoryChannel, ConnectError> {
    let adapter = open_adapter(&TransportChoice {
        socket: opts.socket.clone(),
        ram_bytes: opts.ram_mib << 20,
        dma_bytes: opts.dma_mib << 20,
    })?;
    let port = AdapterPort::new(adapter)?;
    let api = OpenOptions {
        arena_bytes: opts.arena_kib << 10,
        reliable: opts.reliable,
        ..Default::default()
    };
    Ok(MemoryChannel::open(Box::new(port), &api)?)
}
