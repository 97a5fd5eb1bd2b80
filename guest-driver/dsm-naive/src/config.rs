//! What a node of the naive protocol starts with.

/// A node's configuration; every node passes the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NaiveConfig {
    /// The shared heap, bytes (rounded up to whole pages).
    pub heap_bytes: usize,
    /// The coherence unit: 4096 or 8192 bytes.
    pub page_size: u32,
    /// Application threads on this node (they share its copies).
    pub threads: u32,
    /// Cluster locks.
    pub locks: u32,
    /// Write-once flags.
    pub flags: u32,
    /// Where the heap's application view must be (C programs store
    /// pointers into shared data); anywhere if none.
    pub heap_base: Option<usize>,
}

impl Default for NaiveConfig {
    fn default() -> Self {
        NaiveConfig {
            heap_bytes: 1 << 20,
            page_size: 8192,
            threads: 1,
            locks: 1024,
            flags: 1024,
            heap_base: None,
        }
    }
}
