//! Choosing and opening this node's transport: a virtual guest (`mc-host
//! run`) names its vhost-user socket (`--socket` or `MC_SOCKET`); without one
//! the adapter's PCI function is driven from user space (as root in a QEMU
//! guest). Every guest program and library opens its adapter here
//! (through `mc_api::connect`, or directly for the adapter alone).

use std::path::PathBuf;

use crate::adapter::{Adapter, AdapterOptions};
use crate::transport::pci::{PciOptions, PciTransport};
use crate::transport::vhost_user::{VhostUserOptions, VhostUserTransport};
use crate::transport::Transport;

/// The environment variable that names a virtual guest's socket.
pub const SOCKET_ENV: &str = "MC_SOCKET";

/// Which transport reaches the adapter, and how much memory it gets.
#[derive(Clone, Debug)]
pub struct TransportChoice {
    /// The virtual guest's vhost-user socket; `None`: the PCI function.
    pub socket: Option<PathBuf>,
    /// Bytes of a virtual guest's RAM.
    pub ram_bytes: usize,
    /// Bytes of the PCI transport's DMA memory (whole 2 MiB hugepages).
    pub dma_bytes: usize,
}

impl TransportChoice {
    /// `socket` if given, else `MC_SOCKET` when set and not empty.
    pub fn socket_or_env(socket: Option<PathBuf>) -> Option<PathBuf> {
        socket.or_else(|| {
            std::env::var_os(SOCKET_ENV)
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        })
    }

    /// A virtual guest (vhost-user), not a QEMU guest.
    pub fn is_virtual(&self) -> bool {
        self.socket.is_some()
    }
}

/// Why the adapter could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The virtual guest's vhost-user socket.
    #[error("{}", socket.display())]
    VhostUser {
        socket: PathBuf,
        #[source]
        source: crate::Error,
    },
    #[error("no vhost-user socket given (--socket or {SOCKET_ENV}), so the PCI adapter was tried")]
    Pci {
        #[source]
        source: crate::Error,
    },
    #[error("bringing the adapter up")]
    Adapter(#[source] crate::Error),
}

/// Open the chosen transport and bring the adapter up on it.
pub fn open_adapter(choice: &TransportChoice) -> Result<Adapter<Box<dyn Transport>>, OpenError> {
    let t: Box<dyn Transport> = match &choice.socket {
        Some(socket) => {
            let o = VhostUserOptions {
                ram_size: choice.ram_bytes,
                ..Default::default()
            };
            Box::new(
                VhostUserTransport::connect(socket, &o).map_err(|e| OpenError::VhostUser {
                    socket: socket.clone(),
                    source: e.into(),
                })?,
            )
        }
        None => {
            let o = PciOptions {
                dma_size: choice.dma_bytes,
                ..Default::default()
            };
            Box::new(PciTransport::open(&o).map_err(|e| OpenError::Pci { source: e.into() })?)
        }
    };
    // Spin only briefly before yielding: guests, the hub and its workers
    // share the cores, and a long spin starves the very thread it waits for.
    let opts = AdapterOptions {
        spin: 64,
        ..Default::default()
    };
    Adapter::new(t, opts).map_err(OpenError::Adapter)
}
