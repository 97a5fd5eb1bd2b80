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

// The ring flags are 16-bit fields; the bindings give them as u32.
/// Descriptor continues in `next`.
const DESC_F_NEXT: u16 = VRING_DESC_F_NEXT as u16;
/// Buffer is device-writable.
const DESC_F_WRITE: u16 = VRING_DESC_F_WRITE as u16;
/// Device to driver: do not kick (without EVENT_IDX).
const USED_F_NO_NOTIFY: u16 = VRING_USED_F_NO_NOTIFY as u16;
/// Driver to device: do not interrupt (without EVENT_IDX).
const AVAIL_F_NO_INTERRUPT: u16 = VRING_AVAIL_F_NO_INTERRUPT as u16;

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
        self.num_free -= n as u16;
        self.chain_len[usize::from(head)] = n as u16;
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
            error!("virtqueue: {e}");
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
                error!("virtqueue: {e}");
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
mod tests {
    //! The driver against the device side of rust-vmm's virtio-queue
    //! ([`crate::test_device`]), over the same guest memory.

    use super::*;
    use crate::test_device::{allocator, DeviceQueue};
    use std::collections::VecDeque;
    use std::sync::Arc;
    use vm_memory::{Bytes, GuestAddress};

    fn queue(size: u16, event_idx: bool) -> (DmaAllocator, Virtqueue, DeviceQueue) {
        let (mut a, mem) = allocator(4 << 20);
        let rings = RingLayout::allocate(&mut a, size).unwrap();
        let q = Virtqueue::new(rings.clone(), size, event_idx).unwrap();
        let dev = DeviceQueue::new(&mem, &rings, size, event_idx);
        (a, q, dev)
    }

    #[test]
    fn sizes_are_checked() {
        let (mut a, _) = allocator(1 << 20);
        for bad in [0u16, 3, 100, 2048] {
            assert!(matches!(
                RingLayout::allocate(&mut a, bad),
                Err(QueueError::BadSize(_))
            ));
        }
        let rings = RingLayout::allocate(&mut a, 8).unwrap();
        assert!(matches!(
            Virtqueue::new(rings.clone(), 16, true),
            Err(QueueError::RingTooSmall { .. })
        ));
        assert!(Virtqueue::new(rings, 8, true).is_ok());
        let big = RingLayout::allocate(&mut a, MAX_QUEUE_SIZE).unwrap();
        assert!(Virtqueue::new(big, MAX_QUEUE_SIZE, true).is_ok());
    }

    #[test]
    fn one_request_round_trip() {
        let (mut a, mut q, mut dev) = queue(8, true);
        let req = a.alloc(64, 8).unwrap();
        let resp = a.alloc(16, 8).unwrap();
        req.write(0, b"hello device").unwrap();
        let t = q
            .add(
                &[Buffer::prefix(&req, 12).unwrap()],
                &[Buffer::of(&resp).unwrap()],
            )
            .unwrap();
        assert_eq!(q.num_free(), 6);
        assert_eq!(q.in_flight(), 1);
        assert!(q.poll_used().unwrap().is_none());
        let (head, descs) = dev.pop().unwrap();
        assert_eq!(head, t.index());
        assert_eq!(descs, vec![(req.gpa(), 12, false), (resp.gpa(), 16, true)]);
        assert!(dev.pop().is_none());
        // The device reads the request and writes the response, through its
        // own map of guest memory.
        let mut got = [0u8; 12];
        dev.memory()
            .read_slice(&mut got, GuestAddress(descs[0].0))
            .unwrap();
        assert_eq!(&got, b"hello device");
        dev.memory()
            .write_slice(b"ok", GuestAddress(descs[1].0))
            .unwrap();
        dev.add_used(head, 2);
        assert!(q.has_used().unwrap());
        let u = q.poll_used().unwrap().unwrap();
        assert_eq!(u, Used { token: t, len: 2 });
        assert_eq!(resp.read_vec(0, 2).unwrap(), b"ok");
        assert_eq!(q.num_free(), 8);
        assert_eq!(q.in_flight(), 0);
        assert!(q.poll_used().unwrap().is_none());
    }

    #[test]
    fn long_chains_keep_order_and_flags() {
        let (mut a, mut q, mut dev) = queue(16, true);
        let bufs: Vec<_> = (0..8).map(|i| a.alloc(32 + i, 8).unwrap()).collect();
        let r: Vec<_> = bufs[..5].iter().map(|b| Buffer::of(b).unwrap()).collect();
        let w: Vec<_> = bufs[5..].iter().map(|b| Buffer::of(b).unwrap()).collect();
        let t = q.add(&r, &w).unwrap();
        let (head, descs) = dev.pop().unwrap();
        assert_eq!(head, t.index());
        let want: Vec<_> = bufs
            .iter()
            .enumerate()
            .map(|(i, b)| (b.gpa(), b.len() as u32, i >= 5))
            .collect();
        assert_eq!(descs, want);
        // A chain that uses every descriptor.
        let t2 = q.add(&[r[0]; 8], &[]).unwrap();
        assert_eq!(q.num_free(), 0);
        let (_, d2) = dev.pop().unwrap();
        assert_eq!(d2.len(), 8);
        dev.add_used(t2.index(), 0);
        dev.add_used(head, 99);
        assert_eq!(q.poll_used().unwrap().unwrap().token, t2);
        assert_eq!(q.poll_used().unwrap().unwrap(), Used { token: t, len: 99 });
        assert_eq!(q.num_free(), 16);
    }

    #[test]
    fn running_out_of_descriptors_is_an_error() {
        let (mut a, mut q, mut dev) = queue(8, true);
        let b = Buffer::of(&a.alloc(8, 8).unwrap()).unwrap();
        assert!(matches!(q.add(&[], &[]), Err(QueueError::EmptyChain)));
        assert!(matches!(
            q.add(&[b; 5], &[b; 4]),
            Err(QueueError::ChainTooLong { len: 9, size: 8 })
        ));
        let t1 = q.add(&[b, b], &[b]).unwrap();
        let t2 = q.add(&[b, b], &[b]).unwrap();
        match q.add(&[b, b], &[b]) {
            Err(QueueError::Full { needed: 3, free: 2 }) => {}
            other => panic!("expected Full, got {other:?}"),
        }
        // Nothing was published by the failed add.
        assert!(dev.pop().is_some() && dev.pop().is_some() && dev.pop().is_none());
        let t3 = q.add(&[b], &[b]).unwrap();
        assert!(matches!(q.add(&[b], &[]), Err(QueueError::Full { .. })));
        assert_eq!(dev.pop().unwrap().0, t3.index());
        dev.add_used(t2.index(), 0);
        assert_eq!(q.poll_used().unwrap().unwrap().token, t2);
        let t4 = q.add(&[b, b, b], &[]).unwrap();
        dev.add_used(t1.index(), 0);
        dev.add_used(t3.index(), 0);
        assert_eq!(dev.pop().unwrap().0, t4.index());
        dev.add_used(t4.index(), 0);
        let mut got: Vec<_> = std::iter::from_fn(|| q.poll_used().unwrap())
            .map(|u| u.token)
            .collect();
        got.sort();
        let mut want = vec![t1, t3, t4];
        want.sort();
        assert_eq!(got, want);
        assert_eq!(q.num_free(), 8);
    }

    /// Many iterations: the 16-bit avail and used indices wrap several times,
    /// with several chains outstanding and completed out of order.
    #[test]
    fn indices_wrap_around() {
        let (mut a, mut q, mut dev) = queue(8, true);
        let bufs: Vec<_> = (0..4).map(|_| a.alloc(64, 8).unwrap()).collect();
        let mut outstanding: VecDeque<(Token, u64)> = VecDeque::new();
        let mut device_queue: Vec<(u16, u64)> = Vec::new();
        let mut posted = 0u64;
        let mut completed = 0u64;
        let mut rng = 0x1234_5678_u64;
        let mut rand = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        while completed < 200_000 {
            // Post chains of 1-3 descriptors while they fit.
            loop {
                let n = (rand() % 3 + 1) as usize;
                if n > usize::from(q.num_free()) {
                    break;
                }
                let b = Buffer::of(&bufs[(posted % 4) as usize]).unwrap();
                let r = vec![b; n - 1];
                let t = q.add(&r, &[b]).unwrap();
                outstanding.push_back((t, posted));
                posted += 1;
            }
            while let Some((head, descs)) = dev.pop() {
                assert!(descs.last().unwrap().2, "last descriptor is writable");
                assert!(descs[..descs.len() - 1].iter().all(|d| !d.2));
                let seq = outstanding
                    .iter()
                    .find(|(t, _)| t.index() == head)
                    .map(|x| x.1)
                    .expect("device saw a chain the driver did not post");
                device_queue.push((head, seq));
            }
            // Complete a random subset, in a random order.
            let k = (rand() as usize % device_queue.len()) + 1;
            for _ in 0..k {
                let i = rand() as usize % device_queue.len();
                let (head, seq) = device_queue.swap_remove(i);
                dev.add_used(head, (seq & 0xffff) as u32);
            }
            while let Some(u) = q.poll_used().unwrap() {
                let pos = outstanding
                    .iter()
                    .position(|(t, _)| *t == u.token)
                    .expect("completion for a chain not outstanding");
                let (_, seq) = outstanding.remove(pos).unwrap();
                assert_eq!(u.len, (seq & 0xffff) as u32);
                completed += 1;
            }
        }
        assert!(posted > 3 * 65536, "indices wrapped: {posted} posts");
        assert_eq!(q.in_flight(), outstanding.len());
    }

    #[test]
    fn event_idx_kicks_only_when_asked() {
        let (mut a, mut q, mut dev) = queue(8, true);
        let b = Buffer::of(&a.alloc(8, 8).unwrap()).unwrap();
        // avail_event starts at 0: the first post (0 -> 1) crosses it.
        q.add(&[b], &[]).unwrap();
        assert!(q.kick_prepare().unwrap());
        assert!(!q.kick_prepare().unwrap(), "nothing new posted");
        // The device is polling (it does not move avail_event): no kicks.
        for _ in 0..3 {
            q.add(&[b], &[]).unwrap();
            assert!(!q.kick_prepare().unwrap());
        }
        for _ in 0..4 {
            let (h, _) = dev.pop().unwrap();
            dev.add_used(h, 0);
            q.poll_used().unwrap().unwrap();
        }
        // The device goes to sleep and arms (avail_event = 4): the next post
        // must kick.
        assert!(!dev.enable_notification(), "nothing was pending");
        q.add(&[b], &[]).unwrap(); // 4 -> 5
        assert!(q.kick_prepare().unwrap());
        // The device has not re-armed since: no kick.
        q.add(&[b], &[]).unwrap(); // 5 -> 6
        assert!(!q.kick_prepare().unwrap());
        // It serves both and arms again at 6: a batch that crosses it kicks once.
        for _ in 0..2 {
            let (h, _) = dev.pop().unwrap();
            dev.add_used(h, 0);
        }
        assert!(!dev.enable_notification());
        q.add(&[b], &[]).unwrap(); // 6 -> 7
        q.add(&[b], &[]).unwrap(); // 7 -> 8
        assert!(q.kick_prepare().unwrap());
        assert!(!q.kick_prepare().unwrap());
        // Arming while chains wait: the device is told to look again.
        assert!(dev.enable_notification());
        // Across the 16-bit wrap.
        assert!(vring_need_event(0xffff, 0x0001, 0xfffe));
        assert!(vring_need_event(0xffff, 0x0000, 0xffff));
        assert!(!vring_need_event(0x0001, 0x0001, 0xffff));
        assert!(!vring_need_event(5, 5, 5));
    }

    #[test]
    fn without_event_idx_the_no_notify_flag_decides() {
        let (mut a, mut q, mut dev) = queue(4, false);
        let b = Buffer::of(&a.alloc(8, 8).unwrap()).unwrap();
        q.add(&[b], &[]).unwrap();
        assert!(q.kick_prepare().unwrap());
        dev.disable_notification();
        q.add(&[b], &[]).unwrap();
        assert!(!q.kick_prepare().unwrap());
        dev.enable_notification();
        q.add(&[b], &[]).unwrap();
        assert!(q.kick_prepare().unwrap());
        // Calls off by default: NO_INTERRUPT set; on clears it.
        assert_eq!(q.rings().avail.read_u16(0).unwrap(), AVAIL_F_NO_INTERRUPT);
        q.set_calls(true).unwrap();
        assert_eq!(q.rings().avail.read_u16(0).unwrap(), 0);
    }

    #[test]
    fn used_event_follows_the_consumer() {
        let (mut a, mut q, mut dev) = queue(4, true);
        let b = Buffer::of(&a.alloc(8, 8).unwrap()).unwrap();
        assert_eq!(dev.used_event(), 0xffff, "calls off: behind last_used");
        q.set_calls(true).unwrap();
        assert_eq!(dev.used_event(), 0);
        for i in 1..=70_000u32 {
            q.add(&[b], &[]).unwrap();
            let (h, _) = dev.pop().unwrap();
            dev.add_used(h, 0);
            assert!(
                dev.needs_notification(),
                "calls on: completion {i} is signalled"
            );
            q.poll_used().unwrap().unwrap();
            assert_eq!(u32::from(dev.used_event()), i % 65536);
        }
        q.set_calls(false).unwrap();
        assert_eq!(dev.used_event(), (70_000u32 % 65536) as u16 - 1);
        // Calls off: the device never needs to signal a completion.
        for _ in 0..3 {
            q.add(&[b], &[]).unwrap();
            let (h, _) = dev.pop().unwrap();
            dev.add_used(h, 0);
            assert!(!dev.needs_notification());
            q.poll_used().unwrap().unwrap();
        }
    }

    #[test]
    fn a_misbehaving_device_gets_an_error_not_a_panic() {
        let (mut a, mut q, mut dev) = queue(4, true);
        let b = Buffer::of(&a.alloc(8, 8).unwrap()).unwrap();
        let t = q.add(&[b], &[]).unwrap();
        dev.pop().unwrap();
        // A used element for a descriptor that heads no chain.
        dev.add_used(3, 0);
        assert!(matches!(
            q.poll_used(),
            Err(QueueError::NotAPostedChain { id: 3 })
        ));
        // An id out of range (virtio-queue refuses to write one: a broken
        // device writes it by hand).
        dev.add_used_unchecked(999, 0);
        assert!(matches!(
            q.poll_used(),
            Err(QueueError::NotAPostedChain { id: 999 })
        ));
        // The real completion still comes through.
        dev.add_used(t.index(), 4);
        assert_eq!(q.poll_used().unwrap().unwrap(), Used { token: t, len: 4 });
        // used.idx far ahead of what is in flight.
        q.rings()
            .used
            .atomic_u16(2)
            .unwrap()
            .store(200u16.to_le(), Ordering::Release);
        assert!(matches!(
            q.poll_used(),
            Err(QueueError::UsedIndexAhead {
                used_idx: 200,
                in_flight: 0,
                ..
            })
        ));
    }

    /// The device as a real concurrent thread, echoing each request into its
    /// response buffer; the driver keeps the ring full and checks every answer.
    #[test]
    fn concurrent_device_thread() {
        const N: u64 = 100_000;
        const SIZE: u16 = 16;
        let (mut a, mut q, mut dev) = queue(SIZE, true);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let device = std::thread::spawn(move || {
            let mut served = 0u64;
            while !stop2.load(Ordering::Relaxed) {
                match dev.pop() {
                    Some((head, descs)) => {
                        let (rg, rl, _) = descs[0];
                        let (wg, _, _) = descs[1];
                        assert_eq!(rl, 8);
                        let v: u64 = dev.memory().read_obj(GuestAddress(rg)).unwrap();
                        dev.memory()
                            .write_obj(u64::from_le(v).wrapping_mul(3).to_le(), GuestAddress(wg))
                            .unwrap();
                        dev.add_used(head, 8);
                        served += 1;
                    }
                    None => std::thread::yield_now(),
                }
            }
            served
        });
        let slots: Vec<_> = (0..SIZE / 2)
            .map(|_| (a.alloc(8, 8).unwrap(), a.alloc(8, 8).unwrap()))
            .collect();
        let mut free: Vec<usize> = (0..slots.len()).collect();
        let mut by_token = std::collections::HashMap::new();
        let (mut sent, mut done) = (0u64, 0u64);
        while done < N {
            while sent < N {
                let Some(s) = free.pop() else { break };
                slots[s].0.write_u64(0, sent).unwrap();
                slots[s].1.write_u64(0, 0).unwrap();
                let t = q
                    .add(
                        &[Buffer::of(&slots[s].0).unwrap()],
                        &[Buffer::of(&slots[s].1).unwrap()],
                    )
                    .unwrap();
                by_token.insert(t, (s, sent));
                sent += 1;
            }
            match q.poll_used().unwrap() {
                Some(u) => {
                    let (s, v) = by_token.remove(&u.token).unwrap();
                    assert_eq!(u.len, 8);
                    assert_eq!(slots[s].1.read_u64(0).unwrap(), v.wrapping_mul(3));
                    free.push(s);
                    done += 1;
                }
                None => std::hint::spin_loop(),
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert_eq!(device.join().unwrap(), N);
    }
}
