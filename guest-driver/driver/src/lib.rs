//! What runs in a guest: the driver of the Memory Channel adapter.
//!
//! Layers, bottom up:
//! - [`backoff`]: the one way the guest side waits (spin, yield, sleep);
//! - [`dma`]: memory shared with the device (bounds-checked, volatile/atomic),
//!   and an allocator for rings, buffers and frames;
//! - [`virtqueue`]: the driver side of a split virtqueue;
//! - [`transport`]: how the adapter is reached (a virtual guest over vhost-user
//!   and a PCI user-space driver inside a QEMU guest);
//! - [`fifo`]: the transmit FIFO: posted stores from any thread, no lock;
//! - [`adapter`]: the adapter driver: bring-up, control requests, events,
//!   status page, receive frames;
//! - [`open`]: choosing the transport (a socket or PCI) and bringing the
//!   adapter up on it, for every program in a guest.
//!
//! The guest-visible interface is `firmware_model::abi`; docs/device.md
//! describes it.
//!
//! Memory shared with the device is reached only through vm-memory's
//! bounds-checked volatile and atomic accessors; what `unsafe` remains
//! (memfd_create, a MAP_FIXED re-mapping of hugepages, geteuid) says why it
//! holds, which the lints below enforce.

pub mod adapter;
pub mod backoff;
pub mod dma;
pub mod error;
pub mod fifo;
pub mod futex;
pub mod open;
#[cfg(test)]
mod test_device;
pub mod transport;
pub mod vclock;
pub mod virtqueue;

pub use adapter::{
    Adapter, AdapterOptions, ArrivalTable, ReceiveFrames, StatusView, MIN_FIFO_SLOTS,
};
pub use dma::{DmaAllocator, DmaBacking, DmaError, DmaRegion, HugepageMemory, MemfdMemory};
pub use error::{Error, Result};
pub use fifo::{Refusal, Store, TxFifo};
pub use open::{open_adapter, OpenError, TransportChoice, SOCKET_ENV};
pub use transport::pci::{PciError, PciOptions, PciTransport};
pub use transport::vhost_user::{VhostUserOptions, VhostUserTransport};
pub use transport::{CallSignal, Transport, TransportError};
pub use virtqueue::{QueueError, Virtqueue};
