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
//! [`alloc::DmaAllocator`] carves a region into rings, buffers and frames (bump,
//! aligned, never freed).

pub mod alloc;
pub mod hugepage;
pub mod memfd;
pub mod region;

use std::fmt;
use std::io;
use std::sync::Arc;

use vm_memory::{MmapRegion, VolatileMemoryError};

pub use alloc::DmaAllocator;
pub use hugepage::{HugepageError, HugepageMemory};
pub use memfd::MemfdMemory;
pub use region::DmaRegion;

/// Errors of DMA memory access and allocation.
#[derive(Debug, thiserror::Error)]
pub enum DmaError {
    #[error("DMA access of {len} bytes at offset {offset:#x} is outside a region of {region_len:#x} bytes")]
    OutOfBounds {
        offset: usize,
        len: usize,
        region_len: usize,
    },
    #[error("DMA access at offset {offset:#x} is not {align}-byte aligned")]
    Misaligned { offset: usize, align: usize },
    #[error("guest-physical range {gpa:#x}+{len:#x} is outside the region")]
    GpaOutOfRange { gpa: u64, len: usize },
    #[error("alignment {0} is not a power of two")]
    BadAlignment(usize),
    #[error(
        "out of DMA memory: {requested:#x} bytes aligned to {align} requested, {available:#x} left"
    )]
    OutOfMemory {
        requested: usize,
        align: usize,
        available: usize,
    },
    /// A backing of no bytes, or one whose guest-physical range would wrap.
    #[error("DMA memory of {len:#x} bytes at guest-physical {gpa:#x} cannot exist")]
    BadSize { len: usize, gpa: u64 },
    #[error("cannot create DMA memory: {what}")]
    Os {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("cannot map DMA memory: {what}")]
    Map {
        what: &'static str,
        #[source]
        source: vm_memory::mmap::MmapRegionError,
    },
    /// The backing's mapping refused an access the region allowed: the
    /// backing's `start`/`len` do not lie inside its mapping.
    #[error("DMA backing refused an access")]
    Volatile(#[source] VolatileMemoryError),
    #[error(transparent)]
    Hugepage(#[from] HugepageError),
}

/// Memory the device can reach: `len()` bytes of a host mapping from byte
/// `start()`, contiguous in guest-physical space from `gpa()`.
///
/// A safe trait: every access goes through the mapping's own bounds checks,
/// so a backing that misstates its range gets errors, never memory outside
/// the mapping.
pub trait DmaBacking: Send + Sync + fmt::Debug {
    /// The host mapping that holds the memory (regions share it, so it stays
    /// mapped while any of them lives).
    fn mapping(&self) -> &Arc<MmapRegion>;
    /// Offset of the memory's first byte in [`DmaBacking::mapping`]; at least
    /// 8-byte aligned so that naturally aligned offsets are aligned in host
    /// memory too.
    fn start(&self) -> usize {
        0
    }
    /// Bytes of memory from `start()`.
    fn len(&self) -> usize {
        self.mapping().size().saturating_sub(self.start())
    }
    /// Guest-physical address of the first byte.
    fn gpa(&self) -> u64;
    /// True if there is no memory.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
