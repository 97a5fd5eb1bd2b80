//! DMA memory: memory the driver shares with the device.
//!
//! A [`DmaRegion`] is a window on a [`DmaBacking`]: part of a host mapping
//! (a vm-memory [`MmapRegion`]) that is contiguous in guest-physical space, so
//! every byte has a host address (what the driver uses) and a guest-physical
//! address (what it hands the device). Every access is bounds-checked and
//! goes through vm-memory, never a Rust reference to the memory: the device is
//! another thread or process that reads and writes it at any time. Integers
//! and ring indices are single volatile (`VolatileRef`) or atomic
//! (`get_atomic_ref`) accesses; byte copies are `VolatileSlice` copies (a
//! memcpy beyond 8 bytes, as in rust-vmm's device backends), ordered against
//! the device by the atomics and fences around them.
//!
//! Backings, one module each:
//! - [`memfd`]: the RAM of a virtual guest (a memfd shared with the vhost-user
//!   backend, GPA = base + offset);
//! - [`hugepage`]: memory a PCI user-space driver inside a real guest hands
//!   the device: 2 MiB hugepages, re-mapped so that virtual order is
//!   guest-physical order, GPAs from `/proc/self/pagemap`.
//!
//! `backing` says what a backing is (and holds what backings share),
//! `error` what can fail. [`alloc::DmaAllocator`] carves a region into rings, buffers and frames (bump,
//! aligned, never freed).

pub mod alloc;
mod backing;
mod error;
pub mod hugepage;
pub mod memfd;
pub mod region;

pub use alloc::DmaAllocator;
pub use backing::DmaBacking;
pub use error::DmaError;
pub use hugepage::{HugepageError, HugepageMemory};
pub use memfd::MemfdMemory;
pub use region::DmaRegion;
