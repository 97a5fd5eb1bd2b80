//! Where CSM-DMS keeps its state in Memory Channel space: one coherent region
//! each (every node transmits with loopback and receives), allocated by key.
//!
//! | region | contents |
//! |---|---|
//! | heap | the master copies: page p at `p * page_size`; the home's receive mapping is authoritative |
//! | directory | per page `1 + nodes` words: the shared word (home + 1, Exclusive bit), then one word per node (its sharing state) |
//! | messages | request words `[requester][home]`, then one reply buffer per requester |
//! | notices | write-notice bin `[receiver][sender]`: SendIdx, RecvIdx, entries |
//! | sync | barrier arrival words, the barrier sense word, the abort word, flags |

pub const KEY_HEAP: u32 = 0xc5a0_0001;
pub const KEY_DIR: u32 = 0xc5a0_0002;
pub const KEY_MSG: u32 = 0xc5a0_0003;
pub const KEY_WN: u32 = 0xc5a0_0004;
pub const KEY_SYNC: u32 = 0xc5a0_0005;
pub const KEY_DIRLOCK: u32 = 0xc5a0_0006;
pub const KEY_LOCKS: u32 = 0xc5a0_0007;

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
        4 * u64::from(self.pages) * u64::from(self.nodes + 1)
    }
    pub fn dir_shared(&self, page: u32) -> usize {
        4 * (page * (self.nodes + 1)) as usize
    }
    pub fn dir_node(&self, page: u32, node: u32) -> usize {
        4 * (page * (self.nodes + 1) + 1 + node) as usize
    }

    // ---- messages
    pub fn request(&self, requester: u32, home: u32) -> usize {
        8 * (requester * self.nodes + home) as usize
    }
    fn reply_base(&self) -> usize {
        (8 * (self.nodes * self.nodes) as usize).div_ceil(64) * 64
    }
    fn reply_stride(&self) -> usize {
        64 + self.page_size as usize
    }
    /// Reply buffer of `requester`: sequence word at +0, data at +64.
    pub fn reply(&self, requester: u32) -> usize {
        self.reply_base() + requester as usize * self.reply_stride()
    }
    pub fn msg_bytes(&self) -> u64 {
        (self.reply_base() + self.nodes as usize * self.reply_stride()) as u64
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

    /// Coherent arena bytes all regions need (with slack for rounding).
    pub fn arena_bytes(&self, mc_page: u64) -> u64 {
        [
            self.heap_bytes(),
            self.dir_bytes(),
            self.msg_bytes(),
            self.wn_bytes(),
            self.sync_bytes(),
        ]
        .iter()
        .map(|b| b.div_ceil(mc_page) * mc_page)
        .sum()
    }
}
