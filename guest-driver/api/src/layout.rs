//! Where the API keeps its cluster-wide state in Memory Channel space.
//!
//! Like the TruCluster kernel subsystem (seed 004, Figure 4), the bookkeeping of
//! regions and lock sets lives in a reserved part of Memory Channel space that
//! every node maps for broadcast transmit with loopback and for receive, so each
//! node holds a coherent copy. Pages, from 0:
//!
//! | pages | what |
//! |---|---|
//! | 0 | meta page: table toggles, the meta lock, start-up rendezvous words, late-join words |
//! | 1-2 | region table, old/new copies |
//! | 3-4 | lock-set table, old/new copies |
//! | 8-15 | cluster spinlock arrays (one 32-bit entry per node per lock) |
//! | 64 + n | node n's ACK page |
//! | 128 .. 128 + arena | coherent arena: received by every node from the start |
//! | after the arena | ordinary regions, received only where attached |
//! | last 16 + arena pages | resync window: an alias of pages 0-15 and the arena, used only to retransmit them to a late joiner (see `join`) |

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
/// Late join (see `join`), 8 bytes per node each: the join request a node
/// posts after it rejoined, the answer of the member that served it, and the
/// marker word a node stores to learn that everything ordered before it has
/// arrived (also its probe of its own PCT).
pub const JOIN_REQUEST: usize = 0x400;
pub const JOIN_DONE: usize = 0x600;
pub const JOIN_MARK: usize = 0x800;
/// The cluster spinlock that elects the member serving a join request (one
/// 32-bit entry per node, as every lock).
pub const SERVE_LOCK: usize = 0xa00;

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

    /// Pages a late joiner is sent: the control pages and the arena.
    pub fn resync_pages(&self) -> u32 {
        CONTROL_PAGES + self.arena_pages
    }

    /// First page of the resync window, at the top of the address space: page
    /// `resync_first() + k` aliases control page `k` for `k < CONTROL_PAGES`,
    /// and arena page `k - CONTROL_PAGES` after that.
    pub fn resync_first(&self) -> u32 {
        self.pages.saturating_sub(self.resync_pages())
    }

    /// End (exclusive) of the area ordinary regions are allocated in.
    pub fn ordinary_end(&self) -> u32 {
        self.resync_first()
    }

    /// Does the layout fit the address space?
    pub fn fits(&self) -> bool {
        self.nodes <= 64
            // In u64: the arena's size comes from the caller and may be huge.
            && u64::from(ARENA_PAGE)
                + 2 * u64::from(self.arena_pages)
                + u64::from(CONTROL_PAGES)
                < u64::from(self.pages)
            && self.lock_stride() <= LOCK_AREA_PAGES * self.page_size
            && SERVE_LOCK + 4 * self.nodes as usize <= self.page_size as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(pages: u32, arena_pages: u32) -> Layout {
        Layout {
            page_size: 8192,
            nodes: 64,
            pages,
            arena_pages,
        }
    }

    #[test]
    fn an_arena_past_the_address_space_does_not_fit_nor_wrap() {
        let fits = |arena| layout(65536, arena).fits();
        let most = (65536 - ARENA_PAGE - CONTROL_PAGES - 1) / 2;
        assert!(fits(most));
        assert!(!fits(most + 1));
        assert!(!fits(u32::MAX / 2 + 1));
        assert!(!fits(u32::MAX));
    }

    #[test]
    fn meta_words_do_not_overlap() {
        // Each area holds 8 bytes (lock arrays: 4 bytes) for 64 nodes.
        let areas = [
            (REGION_TOGGLE, 8),
            (LOCKSET_TOGGLE, 8),
            (META_LOCK, 4 * 64),
            (HELLO, 8 * 64),
            (JOIN_REQUEST, 8 * 64),
            (JOIN_DONE, 8 * 64),
            (JOIN_MARK, 8 * 64),
            (SERVE_LOCK, 4 * 64),
        ];
        for (i, &(a, la)) in areas.iter().enumerate() {
            assert!(a + la <= 4096, "{a:#x} must fit a 4 KiB page");
            for &(b, lb) in &areas[i + 1..] {
                assert!(a + la <= b || b + lb <= a, "{a:#x} overlaps {b:#x}");
            }
        }
    }

    #[test]
    fn the_resync_window_is_outside_everything_else() {
        let l = layout(65536, 512);
        assert!(l.fits());
        assert_eq!(l.resync_pages(), 528);
        assert_eq!(l.resync_first(), 65536 - 528);
        assert!(l.arena_end() <= l.ordinary_end());
        const { assert!(ACK_PAGE_BASE + 64 <= ARENA_PAGE) };
        // Arena and window no longer fit together.
        assert!(!layout(1200, 1000).fits());
        assert!(layout(2200, 1000).fits());
    }
}
