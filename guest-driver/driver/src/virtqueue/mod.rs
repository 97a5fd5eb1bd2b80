//! The driver (guest) side of a split virtqueue (virtio 1.x, section 2.7).
//!
//! The rings live in DMA memory shared with the device, which is another thread
//! or process: ring indices are accessed atomically (release when publishing,
//! acquire when consuming), everything else volatilely, and the descriptor free
//! list is kept in driver-private memory so that nothing the device writes can
//! corrupt it. `VIRTIO_RING_F_EVENT_IDX` is supported on both sides: the driver
//! kicks only when the device's `avail_event` asks for it ([`vring_need_event`]),
//! and writes `used_event` so that the device signals completions only when the
//! driver wants them (by default never: this driver polls).

use std::sync::atomic::{fence, AtomicU16, Ordering};

use firmware_model::abi::MAX_QUEUE_SIZE;
use log::{error, trace};
use virtio_bindings::virtio_ring::{
    vring_avail, vring_desc, vring_used, vring_used_elem, VRING_AVAIL_F_NO_INTERRUPT,
    VRING_DESC_F_NEXT, VRING_DESC_F_WRITE, VRING_USED_F_NO_NOTIFY,
};

use crate::dma::{DmaAllocator, DmaError, DmaRegion};

// The ring flags are 16-bit fields; the bindings give them as u32 (the
// mask keeps the field).
/// Descriptor continues in `next`.
const DESC_F_NEXT: u16 = (VRING_DESC_F_NEXT & 0xffff) as u16;
/// Buffer is device-writable.
const DESC_F_WRITE: u16 = (VRING_DESC_F_WRITE & 0xffff) as u16;
/// Device to driver: do not kick (without EVENT_IDX).
const USED_F_NO_NOTIFY: u16 = (VRING_USED_F_NO_NOTIFY & 0xffff) as u16;
/// Driver to device: do not interrupt (without EVENT_IDX).
const AVAIL_F_NO_INTERRUPT: u16 = (VRING_AVAIL_F_NO_INTERRUPT & 0xffff) as u16;

/// `struct vring_desc`: addr, len, flags, next.
const DESC_SIZE: usize = size_of::<vring_desc>();
/// `struct vring_used_elem`: id, len.
const USED_ELEM_SIZE: usize = size_of::<vring_used_elem>();
/// flags and idx, before the ring of both the avail and the used ring.
const RING_HEADER: usize = size_of::<vring_avail>();
const _: () = assert!(size_of::<vring_used>() == RING_HEADER && DESC_SIZE == 16);

/// Errors of the queue driver.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("queue size {0} is not a power of two in 1..={max}", max = MAX_QUEUE_SIZE)]
    BadSize(u16),
    #[error("a chain needs at least one buffer")]
    EmptyChain,
    #[error("a chain of {len} buffers can never fit a queue of {size} descriptors")]
    ChainTooLong { len: usize, size: u16 },
    #[error("queue full: {needed} descriptors needed, {free} free")]
    Full { needed: usize, free: u16 },
    #[error("ring memory too small: {what} needs {need} bytes, has {have}")]
    RingTooSmall {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// The device moved used.idx past every chain in flight.
    #[error("device fault: used idx {used_idx} is {pending} ahead of {last_used} with {in_flight} chains in flight")]
    UsedIndexAhead {
        used_idx: u16,
        last_used: u16,
        pending: u16,
        in_flight: usize,
    },
    /// The device returned a used element that heads no posted chain.
    #[error("device fault: used element names descriptor {id}, which is not a posted chain")]
    NotAPostedChain { id: u32 },
    #[error(transparent)]
    Dma(#[from] DmaError),
}

/// `vring_need_event` from the virtio spec: true if moving an index from `old`
/// to `new` passes `event` (all modulo 2^16).
pub fn vring_need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

/// One buffer of a chain: `len` bytes at guest-physical `gpa`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub gpa: u64,
    pub len: u32,
}

impl Buffer {
    /// All of `r` (which must be under 4 GiB) as one buffer.
    pub fn of(r: &DmaRegion) -> Result<Buffer, QueueError> {
        let len = u32::try_from(r.len()).map_err(|_| {
            QueueError::Dma(DmaError::OutOfBounds {
                offset: 0,
                len: r.len(),
                region_len: u32::MAX as usize,
            })
        })?;
        Ok(Buffer { gpa: r.gpa(), len })
    }

    /// The first `len` bytes of `r`.
    pub fn prefix(r: &DmaRegion, len: usize) -> Result<Buffer, QueueError> {
        Buffer::of(&r.sub(0, len)?)
    }
}

/// Names a posted chain until it completes (the index of its head descriptor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(u16);

impl Token {
    pub fn index(self) -> u16 {
        self.0
    }
}

/// A completed chain: its token and how many bytes the device says it wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Used {
    pub token: Token,
    pub len: u32,
}

/// Where a queue's three parts live.
#[derive(Clone, Debug)]
pub struct RingLayout {
    pub desc: DmaRegion,
    pub avail: DmaRegion,
    pub used: DmaRegion,
}

impl std::fmt::Display for RingLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "desc {:#x} avail {:#x} used {:#x}",
            self.desc.gpa(),
            self.avail.gpa(),
            self.used.gpa()
        )
    }
}

impl RingLayout {
    pub fn desc_bytes(size: u16) -> usize {
        DESC_SIZE * usize::from(size)
    }

    /// flags, idx, ring[size], used_event.
    pub fn avail_bytes(size: u16) -> usize {
        RING_HEADER + 2 * usize::from(size) + 2
    }

    /// flags, idx, ring[size], avail_event.
    pub fn used_bytes(size: u16) -> usize {
        RING_HEADER + USED_ELEM_SIZE * usize::from(size) + 2
    }

    /// Carve the rings of a `size`-entry queue out of `alloc`, each part
    /// page-aligned (more than the spec's 16/2/4 requires).
    pub fn allocate(alloc: &mut DmaAllocator, size: u16) -> Result<RingLayout, QueueError> {
        check_size(size)?;
        Ok(RingLayout {
            desc: alloc.alloc(Self::desc_bytes(size), 4096)?,
            avail: alloc.alloc(Self::avail_bytes(size), 4096)?,
            used: alloc.alloc(Self::used_bytes(size), 4096)?,
        })
    }
}

fn check_size(size: u16) -> Result<(), QueueError> {
    if size == 0 || !size.is_power_of_two() || size > MAX_QUEUE_SIZE {
        return Err(QueueError::BadSize(size));
    }
    Ok(())
}

/// Driver side of one split virtqueue.
#[derive(Debug)]
pub struct Virtqueue {
    rings: RingLayout,
    size: u16,
    event_idx: bool,
    /// Driver-private copy of each descriptor's `next` (the free list and chains).
    next: Vec<u16>,
    /// Descriptors in the chain headed here; 0 when not a posted head.
    chain_len: Vec<u16>,
    free_head: u16,
    num_free: u16,
    /// Chains posted and not yet reaped.
    outstanding: usize,
    /// Next avail index to publish (shadow of avail.idx).
    avail_idx: u16,
    /// avail.idx when the kick decision was last made.
    kicked_avail: u16,
    /// Next used index to consume.
    last_used: u16,
    /// Whether the device should signal completions (used_event / NO_INTERRUPT).
    calls: bool,
}

impl Virtqueue {
    /// A queue of `size` descriptors in `rings`, which are (re)initialised here.
    /// `event_idx`: whether VIRTIO_RING_F_EVENT_IDX was negotiated.
    pub fn new(rings: RingLayout, size: u16, event_idx: bool) -> Result<Virtqueue, QueueError> {
        check_size(size)?;
        for (what, have, need) in [
            (
                "descriptor table",
                rings.desc.len(),
                RingLayout::desc_bytes(size),
            ),
            (
                "avail ring",
                rings.avail.len(),
                RingLayout::avail_bytes(size),
            ),
            ("used ring", rings.used.len(), RingLayout::used_bytes(size)),
        ] {
            if have < need {
                return Err(QueueError::RingTooSmall { what, need, have });
            }
        }
        rings.desc.fill(0, RingLayout::desc_bytes(size), 0)?;
        rings.avail.fill(0, RingLayout::avail_bytes(size), 0)?;
        rings.used.fill(0, RingLayout::used_bytes(size), 0)?;
        let n = usize::from(size);
        let q = Virtqueue {
            rings,
            size,
            event_idx,
            next: (1..=size).map(|i| i % size).collect(),
            chain_len: vec![0; n],
            free_head: 0,
            num_free: size,
            outstanding: 0,
            avail_idx: 0,
            kicked_avail: 0,
            last_used: 0,
            calls: false,
        };
        q.write_call_suppression()?;
        fence(Ordering::SeqCst);
        Ok(q)
    }

    pub fn size(&self) -> u16 {
        self.size
    }

    pub fn rings(&self) -> &RingLayout {
        &self.rings
    }

    pub fn event_idx(&self) -> bool {
        self.event_idx
    }

    /// Descriptors free for new chains.
    pub fn num_free(&self) -> u16 {
        self.num_free
    }

    /// Chains posted and not yet reaped.
    pub fn in_flight(&self) -> usize {
        self.outstanding
    }

    fn avail_idx_atomic(&self) -> Result<&AtomicU16, QueueError> {
        Ok(self.rings.avail.atomic_u16(2)?)
    }

    fn used_idx_atomic(&self) -> Result<&AtomicU16, QueueError> {
        Ok(self.rings.used.atomic_u16(2)?)
    }

    fn used_event_offset(&self) -> usize {
        RING_HEADER + 2 * usize::from(self.size)
    }

    fn avail_event_offset(&self) -> usize {
        RING_HEADER + USED_ELEM_SIZE * usize::from(self.size)
    }

    /// Post a chain: `readable` buffers (device reads) then `writable` ones
    /// (device writes). The chain is visible to the device when this returns;
    /// call [`Virtqueue::kick_prepare`] to learn whether to notify it.
    pub fn add(&mut self, readable: &[Buffer], writable: &[Buffer]) -> Result<Token, QueueError> {
        let n = readable.len() + writable.len();
        if n == 0 {
            return Err(QueueError::EmptyChain);
        }
        if n > usize::from(self.size) {
            return Err(QueueError::ChainTooLong {
                len: n,
                size: self.size,
            });
        }
        if n > usize::from(self.num_free) {
            return Err(QueueError::Full {
                needed: n,
                free: self.num_free,
            });
        }
        let head = self.free_head;
        let mut i = head;
        let bufs = readable
            .iter()
            .map(|b| (b, 0))
            .chain(writable.iter().map(|b| (b, DESC_F_WRITE)));
        for (k, (b, wflag)) in bufs.enumerate() {
            let last = k + 1 == n;
            let next = self.next[usize::from(i)];
            let flags = wflag | if last { 0 } else { DESC_F_NEXT };
            let d = usize::from(i) * DESC_SIZE;
            self.rings.desc.write_u64(d, b.gpa)?;
            self.rings.desc.write_u32(d + 8, b.len)?;
            self.rings.desc.write_u16(d + 12, flags)?;
            self.rings
                .desc
                .write_u16(d + 14, if last { 0 } else { next })?;
            i = next;
        }
        self.free_head = i;
        // At most `num_free` (checked above), a u16.
        let n = u16::try_from(n).expect("a chain no longer than the free descriptors");
        self.num_free -= n;
        self.chain_len[usize::from(head)] = n;
        self.outstanding += 1;
        let slot = usize::from(self.avail_idx & (self.size - 1));
        self.rings.avail.write_u16(RING_HEADER + 2 * slot, head)?;
        self.avail_idx = self.avail_idx.wrapping_add(1);
        // Release: the descriptors and the ring entry are visible before the index.
        self.avail_idx_atomic()?
            .store(self.avail_idx.to_le(), Ordering::Release);
        trace!(
            "posted chain {head} ({n} descriptors), avail idx {}",
            self.avail_idx
        );
        Ok(Token(head))
    }

    /// Whether the device must be notified of the chains posted since the last
    /// call (virtio's `virtqueue_kick_prepare`). With EVENT_IDX: if publishing
    /// them moved avail.idx past the device's `avail_event`.
    pub fn kick_prepare(&mut self) -> Result<bool, QueueError> {
        // Full fence: our avail.idx store must be visible before we read the
        // device's avail_event (or used.flags), or a sleeping device is missed.
        fence(Ordering::SeqCst);
        let old = self.kicked_avail;
        let new = self.avail_idx;
        self.kicked_avail = new;
        if old == new {
            return Ok(false);
        }
        if self.event_idx {
            let event = self
                .rings
                .used
                .atomic_u16(self.avail_event_offset())?
                .load(Ordering::Acquire);
            Ok(vring_need_event(u16::from_le(event), new, old))
        } else {
            let flags = u16::from_le(self.rings.used.atomic_u16(0)?.load(Ordering::Acquire));
            Ok(flags & USED_F_NO_NOTIFY == 0)
        }
    }

    /// True if the device has completed a chain not yet reaped.
    pub fn has_used(&self) -> Result<bool, QueueError> {
        let idx = u16::from_le(self.used_idx_atomic()?.load(Ordering::Acquire));
        Ok(idx != self.last_used)
    }

    /// Reap the next completed chain, if any. Its descriptors are free again.
    pub fn poll_used(&mut self) -> Result<Option<Used>, QueueError> {
        let idx = u16::from_le(self.used_idx_atomic()?.load(Ordering::Acquire));
        if idx == self.last_used {
            return Ok(None);
        }
        let pending = idx.wrapping_sub(self.last_used);
        if usize::from(pending) > self.in_flight() {
            let e = QueueError::UsedIndexAhead {
                used_idx: idx,
                last_used: self.last_used,
                pending,
                in_flight: self.in_flight(),
            };
            error!("virtqueue: {}", firmware_model::ErrorChain(&e));
            return Err(e);
        }
        let e = RING_HEADER + USED_ELEM_SIZE * usize::from(self.last_used & (self.size - 1));
        let id = self.rings.used.read_u32(e)?;
        let len = self.rings.used.read_u32(e + 4)?;
        self.last_used = self.last_used.wrapping_add(1);
        self.write_call_suppression()?;
        let head = match u16::try_from(id) {
            Ok(h) if h < self.size && self.chain_len[usize::from(h)] != 0 => h,
            _ => {
                let e = QueueError::NotAPostedChain { id };
                error!("virtqueue: {}", firmware_model::ErrorChain(&e));
                return Err(e);
            }
        };
        self.free_chain(head);
        Ok(Some(Used {
            token: Token(head),
            len,
        }))
    }

    fn free_chain(&mut self, head: u16) {
        let n = self.chain_len[usize::from(head)];
        let mut last = head;
        for _ in 1..n {
            last = self.next[usize::from(last)];
        }
        self.next[usize::from(last)] = self.free_head;
        self.free_head = head;
        self.num_free += n;
        self.chain_len[usize::from(head)] = 0;
        self.outstanding -= 1;
    }

    /// Ask the device to signal (call eventfd / interrupt) on the next
    /// completion, or not at all. Off by default: this driver polls.
    pub fn set_calls(&mut self, on: bool) -> Result<(), QueueError> {
        self.calls = on;
        self.write_call_suppression()?;
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// With EVENT_IDX, `used_event` = the next used index we wait for (signal
    /// on the next completion), or one behind `last_used` (an index the device
    /// never crosses while at most `size` chains are outstanding). Without it,
    /// the avail ring's NO_INTERRUPT flag.
    fn write_call_suppression(&self) -> Result<(), QueueError> {
        if self.event_idx {
            let v = if self.calls {
                self.last_used
            } else {
                self.last_used.wrapping_sub(1)
            };
            self.rings
                .avail
                .atomic_u16(self.used_event_offset())?
                .store(v.to_le(), Ordering::Release);
        } else {
            let f = if self.calls { 0 } else { AVAIL_F_NO_INTERRUPT };
            self.rings
                .avail
                .atomic_u16(0)?
                .store(f.to_le(), Ordering::Release);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
