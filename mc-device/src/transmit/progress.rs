//! How far the hub has taken a node's FIFO, readable without the device
//! lock, and the wait that orders a control request after its node's
//! earlier stores.
//!
//! On the real adapter a register write comes after the posted writes before
//! it on the PCI bus: a region detached right after a store still sends that
//! store, and GET_STATUS after a store sees what that store caused. Here the
//! control path does not take from the FIFO itself (the hub does, in its
//! turn, transmit/mod.rs): it notes where the node's committed records end,
//! wakes the hub and waits, holding no lock, until the hub has taken them.
//! Only the requesting node waits, and only for its own records.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use firmware_model::abi::fifo;
use firmware_model::NodeId;
use log::debug;

use crate::device::Device;
use crate::node::Node;

/// The longest a control request waits for the hub to take its node's
/// earlier stores (a sender held back by its own backlog of deliveries may
/// not be taken from for a while); it is then served anyway.
const ORDER_WAIT: Duration = Duration::from_secs(2);

/// A node's FIFO progress, published by the hub.
#[derive(Debug, Default)]
pub(crate) struct TxProgress {
    /// Changes whenever the FIFO is registered, replaced, forgotten or broken.
    generation: AtomicU64,
    /// The position the hub takes next.
    head: AtomicU64,
}

impl TxProgress {
    /// The FIFO was registered, replaced, forgotten or broken.
    pub(crate) fn replaced(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.head.store(0, Ordering::Release);
    }

    /// The hub has taken everything before `head`.
    pub(crate) fn taken(&self, head: u64) {
        self.head.store(head, Ordering::Release);
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }
}

impl Device {
    /// Wait until the hub has taken every record `node` had committed when
    /// this was called (bounded by [`ORDER_WAIT`]), without holding the
    /// device lock.
    pub(crate) fn wait_for_committed_stores(&self, node: NodeId) {
        let (f, mem, progress, generation) = {
            let st = self.lock();
            let Some(n) = st.nodes.get(node.index()) else {
                return;
            };
            let (Some(f), Some(mem)) = (n.fifo, n.memory()) else {
                return;
            };
            if f.state != fifo::State::Running {
                return;
            }
            let p = n.tx_progress.clone();
            let g = p.generation();
            (f, mem, p, g)
        };
        let target = f.committed_end(&mem);
        drop(mem);
        if target <= f.head {
            return;
        }
        self.wake_hub();
        let start = Instant::now();
        let mut spins = 0u32;
        while progress.generation() == generation && progress.head() < target {
            if start.elapsed() > ORDER_WAIT {
                debug!(
                    "{}: control request served before the hub took its earlier stores",
                    Node(node)
                );
                return;
            }
            spins = spins.saturating_add(1);
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }
}
