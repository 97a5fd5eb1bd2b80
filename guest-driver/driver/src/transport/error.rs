//! The errors of a transport.

use super::pci::error::PciError;

/// Errors of a transport.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("vhost-user {step} failed")]
    VhostUser {
        step: &'static str,
        #[source]
        source: vhost::Error,
    },
    #[error("the device does not offer {0}")]
    MissingFeature(&'static str),
    /// The socket accepted the connection but nobody answers: the node
    /// already has a guest (a backend serves one per node), or the backend
    /// is stuck or gone.
    #[error("no answer from the backend on {} within {after:?}: another guest is probably attached to this node (one guest per node), or the backend is not serving it", path.display())]
    NoAnswer {
        path: std::path::PathBuf,
        after: std::time::Duration,
    },
    #[error("the device has {have} queues, the adapter needs {need}")]
    QueueCount { have: u64, need: usize },
    #[error("no such queue {0}")]
    NoSuchQueue(u16),
    #[error("queue size {size} is over the device's limit {max}")]
    QueueTooLarge { size: u16, max: u16 },
    #[error("the register file is not a Memory Channel adapter's (bad magic or version)")]
    BadRegisters,
    #[error("the device was not started: {0}")]
    NotReady(&'static str),
    #[error(transparent)]
    Dma(#[from] crate::dma::DmaError),
    #[error("PCI")]
    Pci(#[from] PciError),
    #[error("{what}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}
