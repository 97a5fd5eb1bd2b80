//! The Memory Channel adapter as a vhost-user backend.
//!
//! One [`Cluster`] is one hub and one adapter per node; each adapter is served on
//! its own vhost-user socket, to which a QEMU guest (through
//! `vhost-user-test-device-pci`) or a virtual guest attaches. Guest stores arrive
//! as records on the transmit queue, go through the hub (the `firmware-model`,
//! which decides who receives what, in which order) and land by DMA in the
//! receiving guests' RAM at the frames their page control table names. This crate
//! adds no semantics of its own: it moves bytes and reports errors.
//!
//! See docs/device.md for the guest-visible interface.

mod backend;
mod cluster;
mod dma;
mod error;
mod hub_loop;
mod memory;
mod node;
mod state;

pub use cluster::{Cluster, ClusterOptions, ClusterSnapshot, FaultStatus, NodeSnapshot};
pub use error::DeviceError;

#[cfg(test)]
mod tests;
