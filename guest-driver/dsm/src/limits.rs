//! The protocol's fixed limits, in a module that imports nothing, so every
//! module may name them without an import circle.

/// The largest shared heap: every node's home region is the heap's size, and
/// the largest Memory Channel address space an adapter offers is 1 GiB
/// (`firmware_model::config::MAX_ADDRESS_SPACE`).
pub const MAX_HEAP_BYTES: usize = 1 << 30;

/// The most application threads per node: each is an OS thread and, at 1L,
/// a protocol node with a protocol thread of its own; the paper's nodes had
/// four processors.
pub const MAX_THREADS: u32 = 64;

/// Protocol nodes at most: one word per node in a barrier's arrivals, one
/// bit per node in a sharing set. Fewer where the region table is smaller
/// (`Site::new`).
pub const MAX_PROTOCOL_NODES: u32 = 64;
