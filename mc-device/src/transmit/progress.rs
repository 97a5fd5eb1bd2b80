//! How far the hub has taken a node's FIFO, readable without the device
//! lock, for the wait that orders a control request after its node's
//! earlier stores (`store_order`).
//!
//! On the real adapter a register write comes after the posted writes before
//! it on the PCI bus: a region detached right after a store still sends that
//! store, and GET_STATUS after a store sees what that store caused. Here the
//! control path does not take from the FIFO itself (the hub does, in its
//! turn, state/transmit.rs): it notes where the node's committed records end,
//! wakes the hub and waits, holding no lock, until the hub has taken them.
//! Only the requesting node waits, and only for its own records.

use std::sync::atomic::{AtomicU64, Ordering};

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

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(crate) fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }
}
