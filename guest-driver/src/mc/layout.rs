//! Where the API keeps its cluster-wide state in Memory Channel space.
//!
//! Like the TruCluster kernel subsystem (seed 004, Figure 4), the bookkeeping of
//! regions and lock sets lives in a reserved part of Memory Channel space that
//! every node maps for broadcast transmit with loopback and for receive, so each
//! node holds a coherent copy. Pages, from 0:
//!
//! | pages | what |
//! |---|---|
//! | 0 | meta page: table toggles, the meta lock, start-up rendezvous words |
//! | 1-2 | region table, old/new copies |
//! | 3-4 | lock-set table, old/new copies |
//! | 8-15 | cluster spinlock arrays (one 32-bit entry per node per lock) |
//! | 64 + n | node n's ACK page |
//! | 128 .. 128 + arena | coherent arena: received by every node from the start |
//! | after the arena | ordinary regions, received only where attached |

/// Control pages (0 .. CONTROL_PAGES) are received by every node.
pub const CONTROL_PAGES: u32 = 16;
pub const REGION_TABLE_PAGE: u32 = 1;
pub const LOCKSET_TABLE_PAGE: u32 = 3;
pub const LOCK_AREA_PAGE: u32 = 8;
pub const LOCK_AREA_PAGES: u32 = 8;
pub const ACK_PAGE_BASE: u32 = 64;
pub const ARENA_PAGE: u32 = 128;

/// Offsets in the meta page.
pub const REGION_TOGGLE: usize = 0x40;
pub const LOCKSET_TOGGLE: usize = 0x48;
pub const META_LOCK: usize = 0x100;
pub const HELLO: usize = 0x200;

/// The layout for one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub page_size: u32,
    pub nodes: u32,
    pub pages: u32,
    pub arena_pages: u32,
}

impl Layout {
    pub fn page_addr(&self, page: u32) -> u64 {
        u64::from(page) * u64::from(self.page_size)
    }

    pub fn ack_page(&self, node: u32) -> u32 {
        ACK_PAGE_BASE + node
    }

    /// Bytes between two locks' arrays.
    pub fn lock_stride(&self) -> u32 {
        (4 * self.nodes).div_ceil(8) * 8
    }

    pub fn lock_capacity(&self) -> u32 {
        LOCK_AREA_PAGES * self.page_size / self.lock_stride()
    }

    /// Offset in the control memory of lock `index`'s array.
    pub fn lock_offset(&self, index: u32) -> usize {
        (LOCK_AREA_PAGE * self.page_size + index * self.lock_stride()) as usize
    }

    pub fn arena_end(&self) -> u32 {
        ARENA_PAGE + self.arena_pages
    }

    /// Does the layout fit the address space?
    pub fn fits(&self) -> bool {
        self.nodes <= 64
            && self.arena_end() < self.pages
            && self.lock_stride() <= LOCK_AREA_PAGES * self.page_size
    }
}
