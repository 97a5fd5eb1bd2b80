//! What the model refuses.

use crate::config::ConfigError;
use crate::fault::FaultError;
use crate::pct::PctError;
use crate::types::{GlobalAddr, NodeId, PageNumber};

/// Anything the model refuses. Nothing is changed by a refused request except,
/// where a guest's store is at fault, that adapter's protection error count.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("{node} is not in the cluster of {nodes} nodes")]
    NoSuchNode { node: NodeId, nodes: u8 },
    #[error("{0} has crashed; it must rejoin before it can transmit")]
    NodeOffline(NodeId),
    #[error("a store must write at least one byte")]
    EmptyStore,
    #[error("store of {len} bytes at {addr} is outside the global address space of {size} bytes")]
    AddressOutOfRange {
        addr: GlobalAddr,
        len: u64,
        size: u64,
    },
    #[error("{node} has {page} not enabled for transmit")]
    TransmitDisabled { node: NodeId, page: PageNumber },
    #[error("a store to ACK {page} must not extend past that page")]
    AckStoreSpansPages { page: PageNumber },
    #[error("ACK slot at offset {offset} needs {bytes} bytes, past the end of the {page_size}-byte page")]
    AckSlotOutOfPage {
        offset: u32,
        bytes: u32,
        page_size: u32,
    },
    #[error(transparent)]
    Pct(#[from] PctError),
    #[error(transparent)]
    Fault(#[from] FaultError),
    #[error(transparent)]
    Config(#[from] ConfigError),
}
