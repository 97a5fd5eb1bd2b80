//! The device side of the rings in unit tests: rust-vmm's device-side split
//! ring (`virtio_queue::Queue`, what vhost-user backends run) over a
//! `vm_memory::GuestMemoryMmap` that maps the driver's memfd at the same
//! guest-physical base as its DMA memory. The driver's own split-ring code is
//! thereby tested against the real device-side crate: it pops the chains the
//! driver made available, adds used elements, and runs EVENT_IDX from the
//! device's end (`enable_notification` writes avail_event,
//! `needs_notification` reads used_event).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use virtio_queue::{DescriptorChain, Queue, QueueT};
use vm_memory::{
    Address, Bytes, FileOffset, GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion,
};

use crate::dma::{DmaAllocator, DmaBacking, DmaRegion, MemfdMemory};
use crate::virtqueue::RingLayout;

/// Guest RAM as both sides see it: the driver's DMA region and the device's
/// guest memory map, the same memfd at the same guest-physical address.
pub(crate) struct TestRam {
    pub dma: DmaRegion,
    pub mem: Arc<GuestMemoryMmap>,
}

/// `len` bytes of guest RAM at guest-physical `gpa`.
pub(crate) fn guest_ram(len: usize, gpa: u64) -> TestRam {
    let memory = Arc::new(MemfdMemory::new(len, gpa).expect("memfd"));
    let file = memory.file().try_clone().expect("dup the memfd");
    let mapping = MmapRegion::build(
        Some(FileOffset::new(file, 0)),
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED,
    )
    .expect("the device maps guest RAM");
    let region = GuestRegionMmap::new(mapping, GuestAddress(memory.gpa())).expect("region");
    let mem = GuestMemoryMmap::from_regions(vec![region]).expect("guest memory");
    TestRam {
        dma: DmaRegion::new(memory),
        mem: Arc::new(mem),
    }
}

/// An allocator over `len` bytes of fresh guest RAM, and the device's view of it.
pub(crate) fn allocator(len: usize) -> (DmaAllocator, Arc<GuestMemoryMmap>) {
    let ram = guest_ram(len, 0x8000_0000);
    (DmaAllocator::new(ram.dma), ram.mem)
}

/// A descriptor as the device sees it: (gpa, len, device-writable).
pub(crate) type Desc = (u64, u32, bool);

/// The device end of one queue.
pub(crate) struct DeviceQueue {
    queue: Queue,
    mem: Arc<GuestMemoryMmap>,
}

impl DeviceQueue {
    /// The device end of the queue whose rings the driver put at `rings`.
    pub(crate) fn new(
        mem: &Arc<GuestMemoryMmap>,
        rings: &RingLayout,
        size: u16,
        event_idx: bool,
    ) -> DeviceQueue {
        let mut queue = Queue::new(size).expect("queue size");
        queue.set_size(size);
        queue
            .try_set_desc_table_address(GuestAddress(rings.desc.gpa()))
            .expect("descriptor table");
        queue
            .try_set_avail_ring_address(GuestAddress(rings.avail.gpa()))
            .expect("avail ring");
        queue
            .try_set_used_ring_address(GuestAddress(rings.used.gpa()))
            .expect("used ring");
        queue.set_event_idx(event_idx);
        queue.set_ready(true);
        assert!(queue.is_valid(&**mem), "the rings lie in guest memory");
        DeviceQueue {
            queue,
            mem: mem.clone(),
        }
    }

    /// The next chain the driver made available.
    pub(crate) fn pop_chain(&mut self) -> Option<DescriptorChain<Arc<GuestMemoryMmap>>> {
        self.queue.pop_descriptor_chain(self.mem.clone())
    }

    /// The next chain: its head and its descriptors, in order.
    pub(crate) fn pop(&mut self) -> Option<(u16, Vec<Desc>)> {
        let chain = self.pop_chain()?;
        let head = chain.head_index();
        let descs = chain
            .map(|d| (d.addr().0, d.len(), d.is_write_only()))
            .collect();
        Some((head, descs))
    }

    /// Return chain `head` with `len` bytes written.
    pub(crate) fn add_used(&mut self, head: u16, len: u32) {
        self.queue
            .add_used(&*self.mem, head, len)
            .expect("add_used");
    }

    /// What a broken device does: a used element naming any `id`, which
    /// `Queue::add_used` would refuse to write.
    pub(crate) fn add_used_unchecked(&mut self, id: u32, len: u32) {
        let used = GuestAddress(self.queue.used_ring());
        let next = self.queue.next_used();
        let slot = u64::from(next % self.queue.size());
        self.mem
            .write_obj(id.to_le(), used.unchecked_add(4 + 8 * slot))
            .unwrap();
        self.mem
            .write_obj(len.to_le(), used.unchecked_add(8 + 8 * slot))
            .unwrap();
        let next = next.wrapping_add(1);
        self.queue.set_next_used(next);
        self.mem
            .store(next.to_le(), used.unchecked_add(2), Ordering::Release)
            .unwrap();
    }

    /// Ask the driver for a kick on the next post (with EVENT_IDX: avail_event
    /// = the next index the device will pop). True if more is already there.
    pub(crate) fn enable_notification(&mut self) -> bool {
        self.queue
            .enable_notification(&*self.mem)
            .expect("enable_notification")
    }

    /// Ask the driver not to kick (without EVENT_IDX: the NO_NOTIFY flag).
    pub(crate) fn disable_notification(&mut self) {
        self.queue
            .disable_notification(&*self.mem)
            .expect("disable_notification")
    }

    /// Whether the device must signal the driver for the used elements added
    /// since the last call (with EVENT_IDX: whether they crossed used_event).
    pub(crate) fn needs_notification(&mut self) -> bool {
        self.queue
            .needs_notification(&*self.mem)
            .expect("needs_notification")
    }

    /// The driver's used_event (the avail ring's last field).
    pub(crate) fn used_event(&self) -> u16 {
        let at = 4 + 2 * u64::from(self.queue.size());
        u16::from_le(
            self.mem
                .read_obj(GuestAddress(self.queue.avail_ring()).unchecked_add(at))
                .unwrap(),
        )
    }

    /// Guest memory as the device maps it.
    pub(crate) fn memory(&self) -> &GuestMemoryMmap {
        &self.mem
    }
}
