//! The memory under one end of a channel: where its outgoing stream is
//! written (the peer's buffer) and its incoming one read (its own), and the
//! two indexes of each (seed 004, UMP: "a dedicated point-to-point circular
//! buffer between every pair of processes. These buffers use producer and
//! consumer indexes ... modified only by the consumer and producer tasks
//! and allow fully lockless operation").
//!
//! Every buffer lives in its reader's memory: the writer stores data and
//! then the producer index into it; the reader reads both with loads and
//! stores its consumer index back into the writer's memory. So every load
//! is local and every store goes one way, as Memory Channel wants.
//!
//! Two transports: [`ShmLink`] (tasks of one node: the buffers are process
//! memory) and [`McLink`] (the buffers are in the reader's UMP region,
//! written through a point-to-point transmit mapping, seed 004: "we
//! modified UMP to use transmit-only regions for its channel buffers, thus
//! eliminating loopback").

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use mc_api::{MemoryChannel, RxRegion, TxRegion};

use crate::error::UmpError;

/// The memory of one end of a channel.
pub(crate) trait Link: Send + Sync {
    /// Bytes of the outgoing ring (in the peer's memory).
    fn out_size(&self) -> usize;
    /// Store `data` at `at` (within the ring, not wrapping) of the outgoing
    /// ring, then, if given, the producer index.
    fn put(&self, at: usize, data: &[u8], prod: Option<u64>) -> Result<(), UmpError>;
    /// The peer's consumer index of the outgoing stream (a local load).
    fn out_cons(&self) -> u64;
    /// Bytes of the incoming ring (in this task's memory).
    fn in_size(&self) -> usize;
    /// Load `buf.len()` bytes at `at` (not wrapping) of the incoming ring.
    fn get(&self, at: usize, buf: &mut [u8]);
    /// The peer's producer index of the incoming stream (a local load).
    fn in_prod(&self) -> u64;
    /// Store this end's consumer index of the incoming stream.
    fn publish_cons(&self, cons: u64) -> Result<(), UmpError>;
    /// The error count to save before a message (imc_rderrcnt); None for a
    /// transport without network errors.
    fn error_count(&self) -> Option<u64>;
    /// The writer's check (imc_ckerrcnt): the count once every store made
    /// so far has reached every adapter.
    fn check_errors(&self) -> Result<Option<u64>, UmpError>;
    /// The channel's number, which ties its headers and trailers to it.
    fn uid(&self) -> u32;
    /// Whether a short message goes as one store and its reader polls the
    /// message's slot (Memory Channel: the producer index would be a second
    /// store on the latency path) rather than the producer index (shared
    /// memory: a reader must not load bytes the writer may be storing).
    fn polled(&self) -> bool;
    /// Load the aligned 8-byte word at `at` of the incoming ring (acquire:
    /// the loads after it see what arrived before it).
    fn in_word(&self, at: usize) -> u64;
    /// The peer's node, where the peer is on another node reached over
    /// Memory Channel (it receives this node's outbuf).
    fn peer_node(&self) -> Option<u8> {
        None
    }
}

/// One direction of a shared-memory channel: a ring in process memory.
pub(crate) struct ShmRing {
    prod: CachePadded,
    cons: CachePadded,
    data: Box<[UnsafeCell<u8>]>,
}

#[repr(align(64))]
struct CachePadded(AtomicU64);

// SAFETY: the data bytes are only touched through `write`/`read`, whose
// callers follow the single-writer single-reader protocol: the writer
// writes only bytes the reader has released (below the consumer index plus
// the ring size), publishes them with a Release store of the producer
// index, and the reader reads only bytes below the producer index it loaded
// with Acquire, releasing them with a Release store of the consumer index.
// So no byte is read and written at once.
unsafe impl Sync for ShmRing {}

impl ShmRing {
    pub(crate) fn new(size: usize) -> ShmRing {
        ShmRing {
            prod: CachePadded(AtomicU64::new(0)),
            cons: CachePadded(AtomicU64::new(0)),
            data: (0..size).map(|_| UnsafeCell::new(0)).collect(),
        }
    }

    fn write(&self, at: usize, src: &[u8]) {
        assert!(at + src.len() <= self.data.len(), "ring write out of range");
        // SAFETY: in range (checked above); the bytes are the writer's
        // alone under the ring protocol (see the Sync impl).
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                UnsafeCell::raw_get(self.data.as_ptr().add(at)),
                src.len(),
            )
        }
    }

    fn read(&self, at: usize, dst: &mut [u8]) {
        assert!(at + dst.len() <= self.data.len(), "ring read out of range");
        // SAFETY: in range (checked above); the bytes were published by
        // the writer and are not written again until released.
        unsafe {
            std::ptr::copy_nonoverlapping(
                UnsafeCell::raw_get(self.data.as_ptr().add(at)) as *const u8,
                dst.as_mut_ptr(),
                dst.len(),
            )
        }
    }
}

/// A shared-memory channel: one ring per direction.
pub(crate) struct ShmPair {
    /// Written by the opener (side A), read by side B.
    pub(crate) a_to_b: ShmRing,
    pub(crate) b_to_a: ShmRing,
}

/// One end of a shared-memory channel.
pub(crate) struct ShmLink {
    pair: Arc<ShmPair>,
    side_a: bool,
}

impl ShmLink {
    pub(crate) fn new(pair: Arc<ShmPair>, side_a: bool) -> ShmLink {
        ShmLink { pair, side_a }
    }

    fn out(&self) -> &ShmRing {
        if self.side_a {
            &self.pair.a_to_b
        } else {
            &self.pair.b_to_a
        }
    }

    fn inc(&self) -> &ShmRing {
        if self.side_a {
            &self.pair.b_to_a
        } else {
            &self.pair.a_to_b
        }
    }
}

impl Link for ShmLink {
    fn out_size(&self) -> usize {
        self.out().data.len()
    }
    fn put(&self, at: usize, data: &[u8], prod: Option<u64>) -> Result<(), UmpError> {
        let r = self.out();
        r.write(at, data);
        if let Some(p) = prod {
            r.prod.0.store(p, Ordering::Release);
        }
        Ok(())
    }
    fn out_cons(&self) -> u64 {
        self.out().cons.0.load(Ordering::Acquire)
    }
    fn in_size(&self) -> usize {
        self.inc().data.len()
    }
    fn get(&self, at: usize, buf: &mut [u8]) {
        self.inc().read(at, buf)
    }
    fn in_prod(&self) -> u64 {
        self.inc().prod.0.load(Ordering::Acquire)
    }
    fn publish_cons(&self, cons: u64) -> Result<(), UmpError> {
        self.inc().cons.0.store(cons, Ordering::Release);
        Ok(())
    }
    fn error_count(&self) -> Option<u64> {
        None
    }
    fn check_errors(&self) -> Result<Option<u64>, UmpError> {
        Ok(None)
    }
    fn uid(&self) -> u32 {
        // Each shared-memory channel has rings of its own, fresh.
        0
    }
    fn polled(&self) -> bool {
        false
    }
    fn in_word(&self, at: usize) -> u64 {
        let mut b = [0u8; 8];
        self.inc().read(at, &mut b);
        u64::from_le_bytes(b)
    }
}

/// Bytes at the start of each Memory Channel buffer before its ring: the
/// producer index of the incoming stream (written by the peer) and the
/// consumer index of this end's outgoing stream (written by the peer).
pub(crate) const CTRL: usize = 64;
const IN_PROD: usize = 0;
const OUT_CONS: usize = 8;

/// Bits of an index word that hold the byte count; the bits above hold the
/// channel's number, so a word left in a reused buffer by an earlier
/// channel is not taken for this one's (the buffer is not cleared: it is
/// receive memory, written only by the network).
const COUNT_BITS: u32 = 40;
/// Most bytes one direction of a channel carries (1 TiB).
pub(crate) const STREAM_LIMIT: u64 = 1 << COUNT_BITS;

pub(crate) fn tag(uid: u32, count: u64) -> u64 {
    (u64::from(uid) << COUNT_BITS) | (count & (STREAM_LIMIT - 1))
}

pub(crate) fn untag(uid: u32, word: u64) -> u64 {
    if word >> COUNT_BITS == u64::from(uid) {
        word & (STREAM_LIMIT - 1)
    } else {
        0
    }
}

/// One end of a Memory Channel channel.
pub(crate) struct McLink {
    pub(crate) mc: MemoryChannel,
    /// This node's UMP region (received here only).
    pub(crate) rx: Arc<RxRegion>,
    /// This end's buffer in it: offset and ring bytes.
    pub(crate) my_off: usize,
    pub(crate) my_size: usize,
    /// The peer node's UMP region, transmit-only, point-to-point.
    pub(crate) tx: Arc<TxRegion>,
    pub(crate) peer_off: usize,
    pub(crate) peer_size: usize,
    pub(crate) uid: u32,
    /// The peer's node, if not this one.
    pub(crate) peer: Option<u8>,
}

impl Link for McLink {
    fn out_size(&self) -> usize {
        self.peer_size
    }
    fn put(&self, at: usize, data: &[u8], prod: Option<u64>) -> Result<(), UmpError> {
        let data_at = self.peer_off + CTRL + at;
        match prod {
            // Queued together: one trip through the store path, the index
            // after the data in the FIFO (so the reader sees it last).
            Some(p) => {
                let word = tag(self.uid, p).to_le_bytes();
                self.tx
                    .write_many(&[(data_at, data), (self.peer_off + IN_PROD, &word)])?
            }
            None => self.tx.write(data_at, data)?,
        }
        Ok(())
    }
    fn out_cons(&self) -> u64 {
        untag(
            self.uid,
            self.rx.load_u64(self.my_off + OUT_CONS).unwrap_or(0),
        )
    }
    fn in_size(&self) -> usize {
        self.my_size
    }
    fn get(&self, at: usize, buf: &mut [u8]) {
        // In range by construction; a failure would leave zeros, which the
        // framing checks reject.
        let _ = self.rx.read(self.my_off + CTRL + at, buf);
    }
    fn in_prod(&self) -> u64 {
        untag(
            self.uid,
            self.rx.load_u64(self.my_off + IN_PROD).unwrap_or(0),
        )
    }
    fn publish_cons(&self, cons: u64) -> Result<(), UmpError> {
        self.tx
            .write_u64(self.peer_off + OUT_CONS, tag(self.uid, cons))?;
        Ok(())
    }
    fn error_count(&self) -> Option<u64> {
        Some(self.mc.error_count())
    }
    fn check_errors(&self) -> Result<Option<u64>, UmpError> {
        let c = self.mc.check_errors()?;
        let healthy = c.all_healthy(self.mc.members_mask());
        // An unhealthy member counts as a moved count: its stores may be lost.
        Ok(Some(if healthy { c.count } else { u64::MAX }))
    }
    fn uid(&self) -> u32 {
        self.uid
    }
    fn polled(&self) -> bool {
        true
    }
    fn in_word(&self, at: usize) -> u64 {
        self.rx.load_u64(self.my_off + CTRL + at).unwrap_or(0)
    }
    fn peer_node(&self) -> Option<u8> {
        self.peer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_word_of_another_channel_reads_as_zero() {
        assert_eq!(untag(5, tag(5, 1234)), 1234);
        assert_eq!(untag(6, tag(5, 1234)), 0);
        assert_eq!(untag(5, 0), 0);
    }

    #[test]
    fn a_shared_memory_pair_carries_bytes_and_indexes_both_ways() {
        let pair = Arc::new(ShmPair {
            a_to_b: ShmRing::new(64),
            b_to_a: ShmRing::new(32),
        });
        let a = ShmLink::new(pair.clone(), true);
        let b = ShmLink::new(pair, false);
        a.put(8, b"hello", Some(13)).unwrap();
        assert_eq!(b.in_prod(), 13);
        let mut got = [0u8; 5];
        b.get(8, &mut got);
        assert_eq!(&got, b"hello");
        b.publish_cons(13).unwrap();
        assert_eq!(a.out_cons(), 13);
        assert_eq!((a.out_size(), a.in_size()), (64, 32));
        assert_eq!((b.out_size(), b.in_size()), (32, 64));
    }
}
