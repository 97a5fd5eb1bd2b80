//! Where a protocol node sits: its number among the protocol nodes, and the
//! adapter it shares with the other processors of its machine.
//!
//! In the two-level protocol (2L, seed 000 s.2) a protocol node is a
//! machine: its threads share frames and protocol state, and it has the
//! adapter to itself. In the one-level protocol (1L, seed 000 s.3: "CSM-1L
//! treats each processor as a separate node and does not use intra-node
//! hardware coherence") each application thread is a protocol node of its
//! own, with its own frames, page protections, twins, directory entries,
//! mailbox and home region, and the processors of one machine share its
//! adapter, as the paper's processors shared their AlphaServer's Memory
//! Channel adapter. Processor `t` of the machine whose adapter is node `a`
//! is protocol node `a * per_adapter + t`.
//!
//! A store between two processors of one machine goes through the adapter
//! like any other (transmitted with loopback into a region the adapter
//! receives), so 1L pays for intra-node sharing as the paper's 1L did.
//!
//! An adapter has one page control table entry per page: one transmit and
//! one receive mapping per region, whoever in the machine uses them. So the
//! processors of a machine share their attachments ([`Attachments`]): the
//! coherent regions, the broadcast buffers, and the transmit mapping of each
//! mailbox and home region, attached once and detached when the last of
//! them lets go.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mc_api::{MemoryChannel, NodeId, RxRegion, Sharing, TxRegion};

use crate::CsmError;
use dsm_core::MAX_PROTOCOL_NODES;

/// Regions every protocol node has: its mailbox.
const REGIONS_PER_NODE: u32 = 1;
/// Regions the cluster shares: the directory, the write notices, the
/// synchronisation words, the broadcast buffers, the home region.
const SHARED_REGIONS: u32 = 5;

/// The transmit and receive mappings the processors of one machine share.
#[derive(Default)]
pub struct Attachments {
    tx: Mutex<HashMap<u32, Arc<TxRegion>>>,
    rx: Mutex<HashMap<u32, Arc<RxRegion>>>,
}

/// One protocol node's place in the cluster.
#[derive(Clone)]
pub struct Site {
    /// This protocol node's number.
    pub me: u32,
    /// Protocol nodes in the cluster.
    pub nodes: u32,
    /// Protocol nodes per adapter: 1 in 2L, the processors per machine in 1L.
    pub per_adapter: u32,
    attachments: Arc<Attachments>,
}

impl Site {
    /// Protocol node `processor` of this machine's `per_adapter`, on the
    /// adapter of `mc`, sharing `attachments` with its machine's others.
    pub fn new(
        mc: &MemoryChannel,
        processor: u32,
        per_adapter: u32,
        attachments: Arc<Attachments>,
    ) -> Result<Site, CsmError> {
        let nodes = mc.nodes() * per_adapter;
        // Checked before anything is allocated, the same on every machine:
        // a region allocation failing half-way would leave the other
        // processors waiting at the start barrier.
        let by_regions =
            mc.region_table_capacity().saturating_sub(SHARED_REGIONS) / REGIONS_PER_NODE;
        let max = MAX_PROTOCOL_NODES.min(by_regions);
        if per_adapter == 0 || nodes > max {
            return Err(CsmError::TooManyNodes {
                adapters: mc.nodes(),
                per_adapter,
                max,
            });
        }
        debug_assert!(processor < per_adapter);
        Ok(Site {
            me: u32::try_from(mc.node_id().index()).expect("a node index fits u32") * per_adapter
                + processor,
            nodes,
            per_adapter,
            attachments,
        })
    }

    /// The adapter protocol node `node` uses.
    pub fn adapter_of(&self, node: u32) -> NodeId {
        NodeId(u8::try_from(node / self.per_adapter).expect("at most 64 adapters"))
    }

    /// Adapters in the cluster.
    pub fn adapters(&self) -> u32 {
        self.nodes / self.per_adapter
    }

    fn shared_tx(
        &self,
        id: u32,
        attach: impl FnOnce() -> Result<TxRegion, mc_api::McError>,
    ) -> Result<Arc<TxRegion>, CsmError> {
        shared(&self.attachments.tx, id, attach)
    }

    /// Transmit mapping of region `id`, which only protocol node `node`
    /// receives (its mailbox, its home region): point-to-point to its
    /// adapter, or with loopback when that is this adapter (this node's own,
    /// or a processor of the same machine).
    pub fn transmit_to(
        &self,
        mc: &MemoryChannel,
        id: u32,
        node: u32,
    ) -> Result<Arc<TxRegion>, CsmError> {
        let adapter = self.adapter_of(node);
        self.shared_tx(id, || {
            if adapter == mc.node_id() {
                mc.attach_transmit(id, Sharing::Shared, true)
            } else {
                mc.attach_transmit_to(id, Sharing::Shared, adapter)
            }
        })
    }

    /// Transmit mapping of region `id` to every receiver, with loopback (a
    /// coherent region, the broadcast buffers).
    pub fn transmit_all(&self, mc: &MemoryChannel, id: u32) -> Result<Arc<TxRegion>, CsmError> {
        self.shared_tx(id, || mc.attach_transmit(id, Sharing::Shared, true))
    }

    /// Receive mapping of region `id` (`notify`: an event on every store).
    pub fn receive(
        &self,
        mc: &MemoryChannel,
        id: u32,
        notify: bool,
    ) -> Result<Arc<RxRegion>, CsmError> {
        shared(&self.attachments.rx, id, || {
            mc.attach_receive(id, Sharing::Shared, notify)
        })
    }
}

impl Site {
    /// Receive mapping of region `id` with every page's receive off at
    /// first (`RxRegion::set_receiving` turns pages on): the home region,
    /// of which a machine receives only the pages its nodes are home of.
    pub fn receive_pages(&self, mc: &MemoryChannel, id: u32) -> Result<Arc<RxRegion>, CsmError> {
        shared(&self.attachments.rx, id, || {
            let rx = mc.attach_receive(id, Sharing::Shared, false)?;
            let (_, pages) = rx.pages();
            rx.set_receiving(0, pages, false)?;
            Ok(rx)
        })
    }
}

/// The machine's one attachment of region `id`, attached by `attach` the
/// first time.
fn shared<T>(
    map: &Mutex<HashMap<u32, Arc<T>>>,
    id: u32,
    attach: impl FnOnce() -> Result<T, mc_api::McError>,
) -> Result<Arc<T>, CsmError> {
    let mut m = map.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(t) = m.get(&id) {
        return Ok(t.clone());
    }
    let t = Arc::new(attach()?);
    m.insert(id, t.clone());
    Ok(t)
}
