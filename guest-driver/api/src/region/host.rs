//! What regions need of the node they belong to ([`RegionHost`]), and the
//! state the region part owns there: this node's local attachments.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use firmware_model::NodeId;

use crate::host::NodeHost;
use crate::port::ReceiveMemory;

/// This node's attachments of one region.
#[derive(Default)]
pub(super) struct LocalAttach {
    /// Loopback, and the destination (None = broadcast).
    pub(super) tx: Option<(bool, Option<NodeId>)>,
    pub(super) rx: Option<(Arc<dyn ReceiveMemory>, bool)>,
    /// Pages of the receive mapping whose receive is off
    /// ([`super::RxRegion::set_receiving`]); none while `None`.
    pub(super) rx_off: Option<Vec<bool>>,
}

/// This node's attachments of every region, and the receive memory detached
/// regions left behind.
#[derive(Default)]
pub(crate) struct Attachments {
    by_region: Mutex<HashMap<u32, LocalAttach>>,
    /// Receive memory of detached ordinary regions, unbound from the PCT,
    /// kept for the next attachment of the same size: the driver's DMA
    /// allocator never frees, so attach/detach cycles would otherwise use
    /// up the guest's DMA memory.
    rx_pool: Mutex<Vec<(u32, Arc<dyn ReceiveMemory>)>>,
}

impl Attachments {
    pub(super) fn local(&self) -> std::sync::MutexGuard<'_, HashMap<u32, LocalAttach>> {
        self.by_region.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn pool(&self) -> std::sync::MutexGuard<'_, Vec<(u32, Arc<dyn ReceiveMemory>)>> {
        self.rx_pool.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What regions need of the node they belong to: the node, its tables and
/// its local attachments (the handle, `MemoryChannel`, provides them; an
/// attached region keeps the node's API open while it lives).
pub(crate) trait RegionHost: NodeHost {
    fn attachments(&self) -> &Attachments;
}
