//! The naive protocol's Memory Channel regions and where things are in
//! them. Keys differ from Cashmere's (`0xc5a0_....`): both never run in one
//! cluster at once, but a stale region must not be taken for the other's.

use mc_api::{MemoryChannel, RxRegion, Sharing, TxRegion};

use crate::NaiveError;

const KEY_MASTER: u32 = 0x4e41_0001;
const KEY_REQUEST: u32 = 0x4e41_0002;
const KEY_REPLY: u32 = 0x4e41_0003;
const KEY_SYNC: u32 = 0x4e41_0004;
const KEY_LOCKS: u32 = 0x4e41_0005;
/// The cluster barrier's key.
pub const KEY_BARRIER: u32 = 0x4e41_0006;

/// Bytes of a reply's header: the request word it answers.
pub const REPLY_HEADER: usize = 8;

/// Where a node's request word, its reply and the flags are.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub page_size: usize,
    pub flags: u32,
}

impl Layout {
    /// Node `n`'s request word in the request region (node 0 reads it).
    pub fn request(n: u32) -> usize {
        8 * usize::try_from(n).expect("a node number fits usize")
    }
    /// Node `n`'s reply slot: the page, then the header (the header lands
    /// after the page: stores arrive in order).
    pub fn reply(&self, n: u32) -> usize {
        usize::try_from(n).expect("a node number fits usize") * (self.page_size + REPLY_HEADER)
    }
    pub fn reply_header(&self, n: u32) -> usize {
        self.reply(n) + self.page_size
    }
    /// Flag `f`'s word in the sync region.
    pub fn flag(f: u32) -> usize {
        8 * usize::try_from(f).expect("a flag number fits usize")
    }
    /// The abort word (the failed node + 1), after the flags.
    pub fn abort(&self) -> usize {
        Self::flag(self.flags)
    }
    fn sync_bytes(&self) -> usize {
        self.abort() + 8
    }
}

/// A node's attachments.
pub struct Regions {
    /// Node 0's master copy: every node transmits (its diffs); node 0
    /// receives, its own stores by loopback.
    pub master_tx: TxRegion,
    pub master_rx: Option<RxRegion>,
    /// Request words: every node transmits, node 0 receives.
    pub request_tx: TxRegion,
    pub request_rx: Option<RxRegion>,
    /// Replies: node 0 transmits, every node receives (its own slot).
    pub reply_tx: Option<TxRegion>,
    pub reply_rx: RxRegion,
    /// Flags and the abort word: every node transmits and receives.
    pub sync_tx: TxRegion,
    pub sync_rx: RxRegion,
    pub locks: mc_api::LockSet,
}

impl Regions {
    pub fn attach(
        mc: &MemoryChannel,
        at: Layout,
        heap_bytes: usize,
        locks: u32,
    ) -> Result<Regions, NaiveError> {
        let home = mc.node_id().index() == 0;
        let nodes = usize::try_from(mc.nodes()).expect("a node count fits usize");
        let size = |b: usize| u64::try_from(b).expect("a region size fits u64");
        let master = mc.region_alloc(KEY_MASTER, size(heap_bytes), false)?;
        let request = mc.region_alloc(KEY_REQUEST, size(8 * nodes), false)?;
        let reply = mc.region_alloc(
            KEY_REPLY,
            size(nodes * (at.page_size + REPLY_HEADER)),
            false,
        )?;
        let sync = mc.region_alloc(KEY_SYNC, size(at.sync_bytes()), true)?;
        Ok(Regions {
            master_rx: home
                .then(|| mc.attach_receive(master, Sharing::Shared, false))
                .transpose()?,
            master_tx: mc.attach_transmit(master, Sharing::Shared, home)?,
            request_rx: home
                .then(|| mc.attach_receive(request, Sharing::Shared, false))
                .transpose()?,
            request_tx: mc.attach_transmit(request, Sharing::Shared, home)?,
            reply_rx: mc.attach_receive(reply, Sharing::Shared, false)?,
            reply_tx: home
                .then(|| mc.attach_transmit(reply, Sharing::Shared, true))
                .transpose()?,
            sync_rx: mc.attach_receive(sync, Sharing::Shared, false)?,
            sync_tx: mc.attach_transmit(sync, Sharing::Shared, true)?,
            locks: mc.lock_alloc(KEY_LOCKS, locks.max(1), false, false)?,
        })
    }
}
