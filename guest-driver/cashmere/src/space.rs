//! Where CSM-DMS keeps its state in Memory Channel space.
//!
//! Three coherent regions (every node transmits with loopback and receives),
//! allocated by key, one home region the size of the heap, and a mailbox
//! per node, which only that node receives. The data's space does not grow
//! with the cluster (seed 000 s.2.3.1.1: "not affected by system size");
//! the metadata's does, as the paper's did (a directory word per node per
//! page, a write-notice bin per pair of nodes, a message slot per pair).
//!
//! | region | contents |
//! |---|---|
//! | home region | the master copies: page p at `p * page_size`, received only by the machine of its home (its receive mapping; the other pages' receive bits are off there); every machine transmits diffs into it, broadcast with loopback, and only the home keeps them |
//! | directory | per page `1 + nodes` words: the shared word (home + 1, Exclusive bit), then one word per node (its sharing state); then the directory lock (one word per node) |
//! | notices | write-notice bin `[receiver][sender]`: SendIdx, RecvIdx, entries |
//! | sync | the start barrier's arrival and sense words, the abort word, flags |
//! | broadcast buffers (CSM-ADB) | slots of widely read pages, each a page and a header, received by every node (`adb`) |
//! | mailbox of node n | what node n waits for: the reply to its page request, the echo of its own stores, barrier arrivals (node 0) and the barrier sense, page requests to it (`MailboxLayout`). Only node n receives it, with an interrupt on every store (seed 004's interrupt-on-receive regions), so a sleeping waiter is woken |

use crate::variant::CsmVariant;

/// The home region (every page's master copy, at its home).
pub const KEY_HOME: u32 = 0xc5a0_0200;
/// CSM-ADB's broadcast buffers (`adb`).
pub const KEY_ADB: u32 = 0xc5a0_0300;
/// Broadcast buffer slots at most (page p in slot p % slots).
const ADB_SLOTS: u32 = 64;
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

    // ---- CSM-ADB's broadcast buffers: a slot is a page, then its header.
    pub fn adb_slots(&self) -> u32 {
        self.pages.clamp(1, ADB_SLOTS)
    }
    pub fn adb_stride(&self) -> usize {
        self.page_size as usize + 64
    }
    pub fn adb_bytes(&self) -> u64 {
        u64::from(self.adb_slots()) * self.adb_stride() as u64
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

    /// Where things are in every node's mailbox, on a Memory Channel with
    /// pages of `mc_page` bytes.
    pub fn mailbox(&self, mc_page: u32) -> MailboxLayout {
        let ps = self.page_size as usize;
        let mp = mc_page as usize;
        let control = ps.div_ceil(mp) * mp;
        let requests = control + mp;
        let messages = requests + (self.nodes as usize * WORD_APART).div_ceil(mp) * mp;
        let slot = (2 * ps).div_ceil(mp) * mp;
        let queues = messages + self.nodes as usize * slot;
        let queues_end = queues + self.nodes as usize * SYNC_QUEUE_BYTES + 8 * self.nodes as usize;
        MailboxLayout {
            nodes: self.nodes,
            control,
            requests,
            messages,
            slot,
            queues,
            bytes: queues_end.div_ceil(mp) * mp,
            mc_page: mp,
        }
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
    /// Where the setter of flag `i` writes its virtual time, before the
    /// flag (a predicted-time run, docs/virtual-time.md): the flags are 8
    /// bytes apart, so the arrival table's granule holds many of them.
    pub fn flag_time(&self, i: u32) -> usize {
        self.flag(self.flags) + 8 + 8 * i as usize
    }
    pub fn sync_bytes(&self) -> u64 {
        self.flag_time(self.flags) as u64 + 8
    }

    /// Coherent arena bytes all coherent regions need (with slack for
    /// rounding). The heap is not among them: the master copies are in the
    /// home region, an ordinary region.
    pub fn arena_bytes(&self, mc_page: u64) -> u64 {
        [self.dir_bytes(), self.wn_bytes(), self.sync_bytes()]
            .iter()
            .map(|b| b.div_ceil(mc_page) * mc_page)
            .sum()
    }

    /// The coherent arena bytes `variant` allocates, each region rounded up
    /// to Memory Channel pages of `mc_page` bytes: the directory and the
    /// write-notice bins where metadata lives in Memory Channel space (not
    /// CSM-S and CSM-None, whose metadata travels by message), and the
    /// synchronisation words (every variant: CSM-None's start barrier).
    pub fn coherent_bytes(&self, variant: CsmVariant, mc_page: u64) -> u64 {
        let round = |b: u64| b.div_ceil(mc_page) * mc_page;
        let meta = if variant.metadata_by_messages() {
            0
        } else {
            round(self.dir_bytes()) + round(self.wn_bytes())
        };
        meta + round(self.sync_bytes())
    }

    /// The ordinary (not coherent) Memory Channel bytes `variant` allocates,
    /// each region rounded up to Memory Channel pages of `mc_page` bytes:
    /// the home region (the heap, CSM-DMS only: the other variants keep the
    /// master copy in the home's own heap), CSM-ADB's broadcast buffers,
    /// and every node's mailbox.
    pub fn ordinary_bytes(&self, variant: CsmVariant, mc_page: u32) -> u64 {
        let mp = u64::from(mc_page);
        let round = |b: u64| b.div_ceil(mp) * mp;
        let home = if variant.data_by_messages() {
            0
        } else {
            round(self.heap_bytes())
        };
        let adb = if variant == CsmVariant::Adb {
            round(self.adb_bytes())
        } else {
            0
        };
        home + adb + u64::from(self.nodes) * round(self.mailbox(mc_page).bytes())
    }
}

/// A node's mailbox: the reply to its page request (the page's data from 0,
/// then a 16-byte header on the control page), its control page (the
/// header, its echo word, the barrier sense, the ring word, barrier
/// arrivals, each in a granule of its own: [`WORD_APART`]), its request
/// pages (one word per requester, a granule apart), a message slot
/// per sender (a diff sent as a message, CSM-MS; write notices, CSM-S), and
/// a synchronisation queue per sender (CSM-None). Requests have
/// a Memory Channel page of their own, so the interrupt says which kind of
/// store arrived: the protocol thread answers requests itself and wakes the
/// node's other waiters only for the rest.
#[derive(Clone, Copy, Debug)]
pub struct MailboxLayout {
    nodes: u32,
    control: usize,
    requests: usize,
    messages: usize,
    slot: usize,
    queues: usize,
    bytes: usize,
    mc_page: usize,
}

/// How far apart the mailbox's words are that different stores set and
/// different waits watch (the reply header, the echo, the sense, the ring
/// word, the block of barrier arrivals, each requester's request word): one
/// granule of the virtual-time arrival table each (the driver's 256 bytes,
/// `mc_driver::DEFAULT_GRANULE_SHIFT`), so that a waiter reads the arrival
/// of what it waited for, not of a later store to a neighbouring word (a
/// request or a ring from a node far ahead in virtual time). With them 8
/// bytes apart, a node slow to notice its barrier's sense resumed at the
/// arrival of a request posted after the barrier, and SOR's predicted time
/// at the paper's CPU scale swung by 3x between runs (docs/virtual-time.md
/// s.4).
const WORD_APART: usize = 256;
/// Where the barrier arrivals start on the control page (8 bytes each, up
/// to 64 nodes, so they share granules of the arrival table), followed by
/// the virtual time each node arrived at (its [`MailboxLayout::arrival_time`]).
const ARRIVALS: usize = 4 * WORD_APART;
/// Nodes a mailbox has barrier arrival words for: every protocol node
/// there can be.
const MAX_ARRIVALS: usize = dsm_core::MAX_PROTOCOL_NODES as usize;
// The arrival words and their times fit before the acknowledgement slots.
const _: () = assert!(ARRIVALS + 16 * MAX_ARRIVALS <= ACKS);
/// Where the acknowledgement slots start on the control page (after the
/// barrier arrivals of up to 64 nodes).
const ACKS: usize = 2048;
/// Data an acknowledgement carries at most (a directory entry).
pub const ACK_DATA: usize = 16;
const ACK_STRIDE: usize = 16 + ACK_DATA;

/// Entries of a synchronisation queue (CSM-None, `msg_sync`): 16 bytes
/// each, one packet.
pub const SYNC_QUEUE_ENTRIES: usize = 512;
/// A synchronisation queue: SendIdx (8 bytes, padded to 16), then entries.
const SYNC_QUEUE_BYTES: usize = 16 + 16 * SYNC_QUEUE_ENTRIES;

impl MailboxLayout {
    /// The reply's data.
    pub fn reply_data(&self) -> usize {
        0
    }
    /// The reply's header (sequence, page, checksum), written last.
    pub fn reply_header(&self) -> usize {
        self.control
    }
    /// The echo word: this node's own stores, looped back.
    pub fn echo(&self) -> usize {
        self.control + WORD_APART
    }
    /// The barrier sense (episode) the master writes when all have arrived.
    pub fn sense(&self) -> usize {
        self.control + 2 * WORD_APART
    }
    /// A word any node writes only to wake this one (a flag was set, a node
    /// failed).
    pub fn ring(&self) -> usize {
        self.control + 3 * WORD_APART
    }
    /// Barrier arrival word of `node` (meaningful in the master's mailbox).
    pub fn arrival(&self, node: u32) -> usize {
        self.control + ARRIVALS + 8 * node as usize
    }
    /// The virtual time `node` arrived at the barrier (a predicted-time
    /// run), posted before its arrival word. The arrival words share
    /// granules of the arrival table, whose entry holds the arrival of the
    /// packet that landed last in the host's time, not the latest in
    /// virtual time: the master left barriers before a node had arrived
    /// when that node's arrival landed first.
    pub fn arrival_time(&self, node: u32) -> usize {
        self.control + ARRIVALS + 8 * MAX_ARRIVALS + 8 * node as usize
    }
    /// The acknowledgement slot of node `from`: where `from` answers this
    /// node's diff messages (a 16-byte header, then up to `ACK_DATA` bytes),
    /// so diffs to different homes can be in flight at once (seed 002
    /// s.3.3's pipelining) without their acknowledgements overwriting each
    /// other in the one reply area. On the control page: an
    /// acknowledgement wakes a sleeping releaser.
    pub fn ack(&self, from: u32) -> usize {
        self.control + ACKS + ACK_STRIDE * from as usize
    }
    /// The request word of `requester` to this node: `seq << 32 | page`.
    pub fn request(&self, requester: u32) -> usize {
        self.requests + WORD_APART * requester as usize
    }
    /// The message slot of `sender` (the body of a message, a diff, whose
    /// request word follows it): room for a diff of a whole page in runs of
    /// one word (`twin::encode_runs`), until this node acknowledges it.
    pub fn message(&self, sender: u32) -> usize {
        self.messages + sender as usize * self.slot
    }
    /// Bytes of a message slot.
    pub fn message_bytes(&self) -> usize {
        self.slot
    }
    /// The synchronisation queue from `sender` (CSM-None's messages,
    /// `msg_sync`): its SendIdx, written by the sender after the entries.
    pub fn sync_sent(&self, sender: u32) -> usize {
        self.queues + sender as usize * SYNC_QUEUE_BYTES
    }
    /// Entry `i` (mod the queue's size) of the queue from `sender`.
    pub fn sync_entry(&self, sender: u32, i: u64) -> usize {
        self.sync_sent(sender)
            + 16
            + 16 * usize::try_from(i % SYNC_QUEUE_ENTRIES as u64).expect("below SYNC_QUEUE_ENTRIES")
    }
    /// How far `receiver` has taken this node's queue to it (its RecvIdx,
    /// written by the receiver, for the sender's flow control).
    pub fn sync_taken(&self, receiver: u32) -> usize {
        self.queues + self.nodes as usize * SYNC_QUEUE_BYTES + 8 * receiver as usize
    }
    /// Whether page `page` of the mailbox (counted from its first) holds
    /// requests or their bodies (what the protocol thread answers itself).
    pub fn is_request_page(&self, page: u32) -> bool {
        page as usize >= self.requests / self.mc_page
    }
    pub fn bytes(&self) -> u64 {
        debug_assert!(self.nodes as usize <= MAX_ARRIVALS);
        debug_assert!(ACKS + ACK_STRIDE * self.nodes as usize <= self.mc_page);
        self.bytes as u64
    }
}
