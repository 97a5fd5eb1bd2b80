//! Where CSM-DMS keeps its state in Memory Channel space.
//!
//! Four coherent regions (every node transmits with loopback and receives),
//! allocated by key, and one mailbox per node:
//!
//! | region | contents |
//! |---|---|
//! | heap | the master copies: page p at `p * page_size`; the home's receive mapping is authoritative |
//! | directory | per page `1 + nodes` words: the shared word (home + 1, Exclusive bit), then one word per node (its sharing state); then the directory lock (one word per node) |
//! | notices | write-notice bin `[receiver][sender]`: SendIdx, RecvIdx, entries |
//! | sync | the start barrier's arrival and sense words, the abort word, flags |
//! | mailbox of node n | what node n waits for: the reply to its page request, the echo of its own stores, barrier arrivals (node 0) and the barrier sense, page requests to it. Only node n receives it, with an interrupt on every store (seed 004's interrupt-on-receive regions), so a sleeping waiter is woken |

pub const KEY_HEAP: u32 = 0xc5a0_0001;
pub const KEY_DIR: u32 = 0xc5a0_0002;
pub const KEY_WN: u32 = 0xc5a0_0004;
pub const KEY_SYNC: u32 = 0xc5a0_0005;
pub const KEY_LOCKS: u32 = 0xc5a0_0007;
/// Node n's mailbox has key `KEY_MAILBOX + n`.
pub const KEY_MAILBOX: u32 = 0xc5a0_0100;

/// Exclusive flag in a directory shared word.
pub const EXCLUSIVE: u32 = 1 << 8;

/// The CSM-DMS regions of one cluster and heap: their sizes, and where each
/// word lives in them.
#[derive(Clone, Copy, Debug)]
pub struct CsmSpace {
    pub nodes: u32,
    pub pages: u32,
    pub page_size: u32,
    pub flags: u32,
}

impl CsmSpace {
    pub fn heap_bytes(&self) -> u64 {
        u64::from(self.pages) * u64::from(self.page_size)
    }

    // ---- directory
    pub fn dir_bytes(&self) -> u64 {
        4 * u64::from(self.pages) * u64::from(self.nodes + 1) + 4 * u64::from(self.nodes)
    }
    pub fn dir_shared(&self, page: u32) -> usize {
        4 * (page as usize * (self.nodes as usize + 1))
    }
    pub fn dir_node(&self, page: u32, node: u32) -> usize {
        4 * (page as usize * (self.nodes as usize + 1) + 1 + node as usize)
    }
    /// Node `node`'s entry of the directory lock (taken only to assign a
    /// home at first touch: the seed's "Entry Locked" flag).
    pub fn dir_lock(&self, node: u32) -> usize {
        4 * (self.pages as usize * (self.nodes as usize + 1) + node as usize)
    }

    // ---- mailboxes (one per node; these are offsets in each)
    /// The reply to this node's page request: the page's data...
    pub fn mb_reply_data(&self) -> usize {
        0
    }
    /// ...then a 16-byte header (sequence, page, checksum), written last.
    pub fn mb_reply_header(&self) -> usize {
        self.page_size as usize
    }
    /// The echo word: this node's own stores, looped back.
    pub fn mb_echo(&self) -> usize {
        self.page_size as usize + 64
    }
    /// The barrier sense (episode) the master writes when all have arrived.
    pub fn mb_sense(&self) -> usize {
        self.page_size as usize + 72
    }
    /// A word any node writes only to wake this one (a flag was set, a node
    /// failed).
    pub fn mb_ring(&self) -> usize {
        self.page_size as usize + 80
    }
    /// The request word of `requester` to this node: `seq << 32 | page`.
    pub fn mb_request(&self, requester: u32) -> usize {
        self.page_size as usize + 128 + 8 * requester as usize
    }
    /// Barrier arrival word of `node` (meaningful in the master's mailbox).
    pub fn mb_arrival(&self, node: u32) -> usize {
        self.page_size as usize + 128 + 8 * (self.nodes + node) as usize
    }
    pub fn mailbox_bytes(&self) -> u64 {
        (self.page_size as usize + 128 + 16 * self.nodes as usize) as u64
    }

    // ---- write notices: room for every page in every bin, as in seed 000
    // s.2.3.1.1 ("sized to hold write notices for all shared pages").
    pub fn bin_capacity(&self) -> u32 {
        self.pages.max(16)
    }
    fn bin_stride(&self) -> usize {
        (16 + 4 * self.bin_capacity() as usize).div_ceil(8) * 8
    }
    /// Bin of notices from `sender` to `receiver`: SendIdx (u64, written by
    /// the sender) at +0, RecvIdx (u64, written by the receiver) at +8,
    /// entries (u32 page numbers) from +16.
    pub fn bin(&self, receiver: u32, sender: u32) -> usize {
        (receiver * self.nodes + sender) as usize * self.bin_stride()
    }
    pub fn wn_bytes(&self) -> u64 {
        (self.nodes * self.nodes) as u64 * self.bin_stride() as u64
    }

    // ---- sync
    pub fn arrival(&self, node: u32) -> usize {
        8 * node as usize
    }
    pub fn sense(&self) -> usize {
        8 * 64
    }
    /// Node + 1 of a node that failed; 0 while all is well.
    pub fn abort(&self) -> usize {
        8 * 65
    }
    pub fn flag(&self, i: u32) -> usize {
        8 * 66 + 8 * i as usize
    }
    pub fn sync_bytes(&self) -> u64 {
        self.flag(self.flags) as u64 + 8
    }

    /// Coherent arena bytes all coherent regions need (with slack for
    /// rounding).
    pub fn arena_bytes(&self, mc_page: u64) -> u64 {
        [
            self.heap_bytes(),
            self.dir_bytes(),
            self.wn_bytes(),
            self.sync_bytes(),
        ]
        .iter()
        .map(|b| b.div_ceil(mc_page) * mc_page)
        .sum()
    }
}
