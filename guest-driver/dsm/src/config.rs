//! What every DSM protocol's node starts with: the heap, the coherence
//! unit, the node's threads, its locks and flags, and where the heap must
//! be. A protocol with more to choose keeps this as a field beside its own
//! (HLRC's home policy); one with nothing more takes it as it is.

/// A node's core configuration; every node passes the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DsmConfig {
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

impl Default for DsmConfig {
    fn default() -> Self {
        DsmConfig {
            heap_bytes: 1 << 20,
            page_size: 8192,
            threads: 1,
            locks: 1024,
            flags: 1024,
            heap_base: None,
        }
    }
}

impl DsmConfig {
    /// Whether the page size is one the heap can be protected in (the
    /// Alpha's 8 KiB, or the host's 4 KiB).
    pub fn page_size_supported(&self) -> bool {
        self.page_size == 4096 || self.page_size == 8192
    }

    /// The page size, bytes.
    pub fn page_bytes(&self) -> usize {
        usize::try_from(self.page_size).expect("a page size fits usize")
    }

    /// The heap's size in whole pages' bytes: at least one page.
    pub fn heap_in_pages(&self) -> usize {
        let ps = self.page_bytes();
        self.heap_bytes.max(ps).div_ceil(ps) * ps
    }
}

#[cfg(test)]
mod tests {
    use super::DsmConfig;

    #[test]
    fn the_heap_is_whole_pages_and_at_least_one() {
        let mut c = DsmConfig {
            heap_bytes: 1,
            page_size: 4096,
            ..DsmConfig::default()
        };
        assert_eq!(c.heap_in_pages(), 4096);
        c.heap_bytes = 4097;
        assert_eq!(c.heap_in_pages(), 8192);
        c.heap_bytes = 0;
        assert_eq!(c.heap_in_pages(), 4096);
        assert!(c.page_size_supported());
        c.page_size = 16384;
        assert!(!c.page_size_supported());
    }
}
