//! What a node's UMP tasks share: the Memory Channel, the directory, this
//! node's UMP region (the receive side of every Memory Channel ring of its
//! channels), the transmit mappings to other nodes' regions, and the
//! shared-memory rings of channels between its own tasks.
//!
//! Each node has one UMP region that only it receives; other nodes reach
//! it through a point-to-point transmit mapping (seed 004: "We are
//! currently modifying UMP to use point-to-point MEMORY CHANNEL mappings,
//! both to increase available bandwidth and to exploit a switched MEMORY
//! CHANNEL network"). Rings are carved out of it as channels open and
//! given back when they close (sparse allocation), so a cluster of N tasks
//! pays for the channels it uses, not for N^2.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use mc_api::{MemoryChannel, NodeId, RxRegion, Sharing, TxRegion};

use crate::config::Config;
use crate::directory::{Directory, Snapshot, KIND_CHANNEL, KIND_DAMAGED};
use crate::error::UmpError;
use crate::link::{ShmPair, CTRL};
use crate::outbuf::{OutbufWriter, KEY_OUTBUF, OUTBUF_BYTES};

/// Region key of node n's UMP region: this plus n.
pub(crate) const KEY_REGION: u32 = 0x554d_5100;

/// First-fit allocation of rings in the node's region, in 64-byte units.
#[derive(Debug, Default)]
pub(crate) struct Allocator {
    size: u64,
    /// (offset, bytes), sorted by offset.
    used: Vec<(u64, u64)>,
}

impl Allocator {
    pub(crate) fn new(size: u64) -> Allocator {
        Allocator {
            size,
            used: Vec::new(),
        }
    }

    pub(crate) fn alloc(&mut self, bytes: u64) -> Option<u64> {
        let bytes = bytes.div_ceil(64) * 64;
        let mut at = 0;
        let mut idx = 0;
        for (i, &(o, l)) in self.used.iter().enumerate() {
            if o - at >= bytes {
                break;
            }
            at = o + l;
            idx = i + 1;
        }
        if self.size.saturating_sub(at) < bytes {
            return None;
        }
        self.used.insert(idx, (at, bytes));
        Some(at)
    }

    pub(crate) fn free(&mut self, off: u64) {
        self.used.retain(|&(o, _)| o != off);
    }

    pub(crate) fn used_bytes(&self) -> u64 {
        self.used.iter().map(|&(_, l)| l).sum()
    }
}

/// A node's UMP state, shared by its tasks.
pub struct Node {
    pub(crate) mc: MemoryChannel,
    pub(crate) config: Config,
    pub(crate) dir: Directory,
    pub(crate) region: Arc<RxRegion>,
    tx_to: Mutex<HashMap<u8, Arc<TxRegion>>>,
    alloc: Mutex<Allocator>,
    /// Rings of shared-memory channels, by channel number, until both ends
    /// have taken theirs.
    shm: Mutex<HashMap<u32, Arc<ShmPair>>>,
    next_task: AtomicU32,
    /// Rings of channel ends closed here whose peer had not closed yet
    /// (uid, offset): the peer may still be writing into them, so they are
    /// given back once the channel's record is gone.
    closing: Mutex<Vec<(u32, u32)>>,
    /// This node's outbuf (the seed's lock around it), written by
    /// multicasts of its tasks.
    pub(crate) outbuf: Mutex<OutbufWriter>,
    /// Every other node's outbuf as received here, by node.
    pub(crate) outbufs: Vec<Option<RxRegion>>,
    /// Multicasts written through the outbuf (one copy each).
    pub(crate) outbuf_sent: std::sync::atomic::AtomicU64,
    /// Whether multicasts use the outbuf (`Config::outbuf`, then
    /// [`Node::set_outbuf`]).
    pub(crate) outbuf_on: std::sync::atomic::AtomicBool,
}

impl Node {
    /// Bring UMP up on this node: the directory, and this node's region
    /// attached for receive (before any channel can name a ring in it).
    pub fn open(mc: &MemoryChannel, config: Config) -> Result<Arc<Node>, UmpError> {
        config.validate()?;
        let page = u64::from(mc.registers().page_size);
        let bytes = config.region_bytes.div_ceil(page) * page;
        let dir = Directory::open(mc)?;
        let me = mc.node_id().0;
        let id = mc.region_alloc(KEY_REGION + u32::from(me), bytes, false)?;
        let region = Arc::new(mc.attach_receive(id, Sharing::Exclusive, false)?);
        // Every node's outbuf is received here before any channel to this
        // node can open, so no multicast reference can point to data that
        // arrived before its receive mapping did.
        let outbuf_bytes = (OUTBUF_BYTES as u64).div_ceil(page) * page;
        let mut outbufs = Vec::new();
        let mut outbuf = None;
        for n in 0..mc.nodes().min(256) {
            let id = mc.region_alloc(KEY_OUTBUF + n, outbuf_bytes, false)?;
            if n == u32::from(me) {
                outbuf = Some(mc.attach_transmit(id, Sharing::Shared, false)?);
                outbufs.push(None);
            } else {
                outbufs.push(Some(mc.attach_receive(id, Sharing::Shared, false)?));
            }
        }
        let outbuf = outbuf.ok_or(UmpError::Config(format!(
            "node {me} is outside the cluster's {} nodes",
            mc.nodes()
        )))?;
        // The outbuf's number: a fresh one per bring-up, so a reader never
        // takes what an earlier bring-up of this node left in it.
        let outbuf_uid = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| {
                d.subsec_nanos() ^ crate::wire::low32(d.as_secs()).rotate_left(7)
            })
            ^ u32::from(me).wrapping_mul(0x9e37_79b9);
        log::info!(
            "node{me}: UMP up, {} KiB of ring space, {} KiB Memory Channel rings",
            bytes >> 10,
            config.ring_bytes >> 10
        );
        Ok(Arc::new(Node {
            mc: mc.clone(),
            dir,
            region,
            tx_to: Mutex::new(HashMap::new()),
            alloc: Mutex::new(Allocator::new(bytes)),
            shm: Mutex::new(HashMap::new()),
            next_task: AtomicU32::new(1),
            closing: Mutex::new(Vec::new()),
            outbuf: Mutex::new(OutbufWriter::new(outbuf, outbuf_uid)),
            outbufs,
            outbuf_sent: std::sync::atomic::AtomicU64::new(0),
            outbuf_on: std::sync::atomic::AtomicBool::new(config.outbuf),
            config,
        }))
    }

    pub fn memory_channel(&self) -> &MemoryChannel {
        &self.mc
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Turn multicast through the outbuf on or off for this node's tasks
    /// from now on (off: one copy per channel; to compare the two).
    pub fn set_outbuf(&self, on: bool) {
        self.outbuf_on.store(on, Ordering::Relaxed);
    }

    pub(crate) fn me(&self) -> u8 {
        self.mc.node_id().0
    }

    pub(crate) fn new_task_id(&self) -> u32 {
        self.next_task.fetch_add(1, Ordering::Relaxed)
    }

    fn allocator(&self) -> MutexGuard<'_, Allocator> {
        self.alloc.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ring of `ring` bytes (plus its indexes) in this node's region.
    pub(crate) fn alloc_ring(&self, ring: usize) -> Result<u32, UmpError> {
        self.allocator()
            .alloc((ring + CTRL) as u64)
            .map(|o| u32::try_from(o).expect("Config::validate: a region is at most 2 GiB"))
            .ok_or(UmpError::NoSpace(
                "this node's UMP region is full (raise Config::region_bytes or MC_UMP_REGION_KIB)",
            ))
    }

    pub(crate) fn free_ring(&self, off: u32) {
        self.allocator().free(u64::from(off));
    }

    pub(crate) fn keep_until_closed(&self, uid: u32, off: u32) {
        self.closing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((uid, off));
    }

    /// Give back the rings of closed channels whose records are gone.
    pub(crate) fn reap(&self) {
        if let Some(s) = self.dir.try_snapshot() {
            self.reap_in(&s);
        }
    }

    pub(crate) fn reap_in(&self, s: &Snapshot) {
        // A damaged record in this copy may be one of them.
        if s.records.iter().any(|r| r.kind == KIND_DAMAGED) {
            return;
        }
        self.closing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|&(uid, off)| {
                let alive = s
                    .records
                    .iter()
                    .any(|r| r.kind == KIND_CHANNEL && r.uid == uid);
                if !alive {
                    self.free_ring(off);
                }
                alive
            });
    }

    /// (bytes in use, bytes in all) of this node's region, once the rings
    /// of channels closed on both sides are given back.
    pub fn region_usage(&self) -> (u64, u64) {
        self.reap();
        let a = self.allocator();
        (a.used_bytes(), a.size)
    }

    /// The transmit mapping of node `n`'s UMP region: point-to-point to
    /// another node; to this node itself (a Memory Channel channel between
    /// two of its tasks, asked for explicitly), broadcast with loopback.
    pub(crate) fn transmit_to(&self, n: u8) -> Result<Arc<TxRegion>, UmpError> {
        let mut map = self.tx_to.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = map.get(&n) {
            return Ok(t.clone());
        }
        let id = self.mc.region_lookup(KEY_REGION + u32::from(n))?;
        let tx = if n == self.me() {
            self.mc.attach_transmit(id, Sharing::Shared, true)?
        } else {
            self.mc.attach_transmit_to(id, Sharing::Shared, NodeId(n))?
        };
        let tx = Arc::new(tx);
        map.insert(n, tx.clone());
        Ok(tx)
    }

    pub(crate) fn put_shm(&self, uid: u32, pair: Arc<ShmPair>) {
        self.shm
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid, pair);
    }

    pub(crate) fn take_shm(&self, uid: u32) -> Option<Arc<ShmPair>> {
        self.shm
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_are_carved_first_fit_and_given_back() {
        let mut a = Allocator::new(1024);
        assert_eq!(a.alloc(100), Some(0));
        assert_eq!(a.alloc(64), Some(128));
        assert_eq!(a.alloc(1024), None);
        a.free(0);
        assert_eq!(a.alloc(64), Some(0));
        assert_eq!(a.alloc(128), Some(192));
        assert_eq!(a.used_bytes(), 64 + 64 + 128);
        assert_eq!(a.alloc(640), Some(320));
        assert_eq!(a.alloc(64), Some(64));
        assert_eq!(a.alloc(64), Some(960));
        assert_eq!(a.alloc(1), None);
    }
}
