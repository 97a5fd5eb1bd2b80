//! The errors of DMA memory: access, allocation, and making a backing.

use std::io;

use vm_memory::VolatileMemoryError;

use super::hugepage::HugepageError;

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
