//! The driver's side of one split virtqueue. `virtio_queue::mock` lays a
//! ring out (and zeroes it) and writes its descriptors; the available and
//! used rings are read and written here directly, because the mock's ring
//! views zero a ring whenever one is made, and a hostile driver's indices
//! must stay where it put them.

use std::time::{Duration, Instant};

use virtio_queue::desc::split::Descriptor;
use virtio_queue::desc::RawDescriptor;
use virtio_queue::mock::{DescriptorTable, MockSplitQueue};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

const F_NEXT: u16 = 1;
const F_WRITE: u16 = 2;

type Mem = GuestMemoryMmap<()>;

/// Memory a ring can be written in: guest RAM, or its mapping.
pub trait RingMemory {
    fn ring_mem(&self) -> &Mem;
}

impl RingMemory for Mem {
    fn ring_mem(&self) -> &Mem {
        self
    }
}

impl RingMemory for super::GuestRam {
    fn ring_mem(&self) -> &Mem {
        self.mem()
    }
}

/// The driver side of one split ring, in guest memory.
#[derive(Clone, Debug)]
pub struct SplitRing {
    pub size: u16,
    pub desc: u64,
    pub avail: u64,
    pub used: u64,
    next_desc: u16,
    avail_idx: u16,
    used_seen: u16,
}

impl SplitRing {
    /// A ring of `size` entries laid out from `base` (descriptors, then the
    /// available ring, then the used ring on the next 4 KiB boundary, as a
    /// legacy virtio driver lays it out).
    pub fn at(base: u64, size: u16) -> SplitRing {
        let n = u64::from(size);
        let avail = base + 16 * n;
        let used = (avail + 6 + 2 * n).div_ceil(4096) * 4096;
        SplitRing::with_rings(size, base, avail, used)
    }

    /// A ring of `size` entries where `MockSplitQueue` puts one from `base`
    /// (the rings packed one after the other).
    pub fn packed_at(mem: &impl RingMemory, base: u64, size: u16) -> SplitRing {
        let q = MockSplitQueue::create(mem.ring_mem(), GuestAddress(base), size);
        SplitRing::with_rings(size, base, q.avail_addr().0, q.used_addr().0)
    }

    /// A ring with its three parts wherever the caller says.
    pub fn with_rings(size: u16, desc: u64, avail: u64, used: u64) -> SplitRing {
        SplitRing {
            size,
            desc,
            avail,
            used,
            next_desc: 0,
            avail_idx: 0,
            used_seen: 0,
        }
    }

    fn table<'a>(&self, mem: &'a Mem) -> DescriptorTable<'a, Mem> {
        DescriptorTable::new(mem, GuestAddress(self.desc), self.size)
    }

    fn write_u16(mem: &impl RingMemory, gpa: u64, v: u16) {
        mem.ring_mem()
            .write_obj(v, GuestAddress(gpa))
            .expect("ring in RAM");
    }

    fn read_u16(mem: &impl RingMemory, gpa: u64) -> u16 {
        mem.ring_mem()
            .read_obj(GuestAddress(gpa))
            .expect("ring in RAM")
    }

    /// The guest-physical ranges the driver hands the device with this ring.
    pub fn ranges(&self) -> [(u64, usize); 3] {
        let n = usize::from(self.size);
        [
            (self.desc, 16 * n),
            (self.avail, 6 + 2 * n),
            (self.used, 6 + 8 * n),
        ]
    }

    /// Post a chain of (gpa, len, device-writable) buffers; returns its head.
    pub fn post(&mut self, mem: &impl RingMemory, bufs: &[(u64, u32, bool)]) -> u16 {
        let head = self.next_desc;
        let mut i = head;
        for (k, &(gpa, len, w)) in bufs.iter().enumerate() {
            let last = k + 1 == bufs.len();
            let flags = (if last { 0 } else { F_NEXT }) | (if w { F_WRITE } else { 0 });
            let next = (i + 1) % self.size;
            self.write_desc(mem, i, gpa, len, flags, next);
            i = next;
        }
        self.next_desc = i;
        self.make_available(mem, head);
        head
    }

    /// Write descriptor `i` verbatim (loops, heads anywhere).
    pub fn write_desc(
        &self,
        mem: &impl RingMemory,
        i: u16,
        gpa: u64,
        len: u32,
        flags: u16,
        next: u16,
    ) {
        let d = RawDescriptor::from(Descriptor::new(gpa, len, flags, next));
        self.table(mem.ring_mem())
            .store(i % self.size, d)
            .expect("descriptor in RAM");
    }

    /// Put `head` in the next available slot (whatever it names) and publish it.
    pub fn make_available(&mut self, mem: &impl RingMemory, head: u16) {
        let slot = self.avail + 4 + 2 * u64::from(self.avail_idx % self.size);
        Self::write_u16(mem, slot, head);
        self.avail_idx = self.avail_idx.wrapping_add(1);
        Self::write_u16(mem, self.avail + 2, self.avail_idx);
    }

    /// Move the available index anywhere (what a well-behaved driver never does).
    pub fn set_avail_idx(&mut self, mem: &impl RingMemory, idx: u16) {
        self.avail_idx = idx;
        Self::write_u16(mem, self.avail + 2, idx);
    }

    pub fn avail_idx(&self) -> u16 {
        self.avail_idx
    }

    /// The device's used index as it is in memory now.
    pub fn used_idx(&self, mem: &impl RingMemory) -> u16 {
        Self::read_u16(mem, self.used + 2)
    }

    /// Completions not yet seen: (head, written length).
    pub fn reap(&mut self, mem: &impl RingMemory) -> Vec<(u32, u32)> {
        let idx = self.used_idx(mem);
        let mut out = Vec::new();
        while self.used_seen != idx {
            let e = self.used + 4 + 8 * u64::from(self.used_seen % self.size);
            let elem: [u32; 2] = mem
                .ring_mem()
                .read_obj(GuestAddress(e))
                .expect("ring in RAM");
            out.push((u32::from_le(elem[0]), u32::from_le(elem[1])));
            self.used_seen = self.used_seen.wrapping_add(1);
        }
        out
    }

    /// Wait (bounded) until `n` completions are seen.
    pub fn wait_used(
        &mut self,
        mem: &impl RingMemory,
        n: usize,
        timeout: Duration,
    ) -> Vec<(u32, u32)> {
        let start = Instant::now();
        let mut got = Vec::new();
        while got.len() < n {
            got.extend(self.reap(mem));
            assert!(
                start.elapsed() < timeout,
                "only {} of {n} completions after {timeout:?}",
                got.len()
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        got
    }

    /// Forget what was posted (the driver re-initialises the ring).
    pub fn reset(&mut self, mem: &impl RingMemory) {
        self.next_desc = 0;
        self.avail_idx = 0;
        self.used_seen = 0;
        for (gpa, len) in self.ranges() {
            let _ = mem.ring_mem().write_slice(&vec![0; len], GuestAddress(gpa));
        }
    }
}
