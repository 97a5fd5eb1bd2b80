//! How the driver reaches the adapter: the register file, DMA memory, queue
//! setup and notifications. The adapter driver ([`crate::Adapter`]) works over
//! any [`Transport`].
//!
//! - [`vhost_user::VhostUserTransport`]: a virtual guest, a process that speaks
//!   vhost-user to the backend's socket as QEMU does, its RAM a shared memfd.
//! - [`pci::PciTransport`]: a user-space driver inside a QEMU guest: BARs
//!   through sysfs, hugepage DMA memory, GPAs from `/proc/self/pagemap`.
//!
//! The crate's `open` module chooses between them (a socket or PCI).

pub mod pci;
pub mod vhost_user;

mod error;
mod link;

pub use error::TransportError;
pub use link::{CallSignal, Doorbell, Transport, F_EVENT_IDX, F_VERSION_1};
