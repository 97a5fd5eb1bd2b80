//! Fake guests for tests and fuzzing: each with its own guest RAM and split
//! rings laid out in it the way a driver would (the shared rigs, rig/),
//! and the backend's queue handlers driven directly, with the model
//! (`ShadowCluster`) alongside as the oracle.

// Fuzz builds (feature "fuzzing") use only part of the harness the tests use.
#![cfg_attr(not(test), allow(dead_code))]

use firmware_model::abi::{self, CtrlRequest, CtrlResponse, Status, TxRecordHeader};
use firmware_model::{ClusterConfig, GlobalAddr, Hub, Nanos, NodeId, PctEntry, ShadowCluster};
use vhost_user_backend::{VringRwLock, VringT};
use vm_memory::{Bytes, GuestAddress, GuestAddressSpace, GuestMemoryAtomic};

use crate::cluster_clock::ClusterClock;
use crate::memory::Mem;
use crate::state::DeviceState;
use crate::tests::rig::{Backing, GuestRam, SplitRing};

pub(crate) const RAM: usize = 4 << 20;
pub(crate) const QSIZE: u16 = 64;
pub(crate) const BUF_BASE: u64 = 0x10000;
pub(crate) const FRAME_BASE: u64 = 0x100000;
/// Where each fake guest's transmit FIFO lives, and its size.
pub(crate) const FIFO_GPA: u64 = 0x300000;
pub(crate) const FIFO_SLOTS: u32 = 1024;
pub(crate) const PAGE: u64 = 8192;

/// The fake guests' FIFO layout.
pub(crate) fn fifo_layout() -> abi::fifo::Layout {
    abi::fifo::Layout::new(FIFO_SLOTS).unwrap()
}

/// Node `n` of a rig.
pub(crate) fn id(n: usize) -> NodeId {
    NodeId(u8::try_from(n).unwrap())
}

pub(crate) fn ring_base(q: u16) -> u64 {
    0x1000 + u64::from(q) * 0x3000
}

pub(crate) struct FakeGuest {
    ram: GuestRam,
    pub(crate) atomic: GuestMemoryAtomic<Mem>,
    vrings: Vec<VringRwLock>,
    pub(crate) rings: Vec<SplitRing>,
    next_buf: u64,
    next_frame: u64,
    /// The driver's next FIFO position.
    pub(crate) tail: u64,
}

/// The device-written words of a FIFO header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FifoHeader {
    pub(crate) consumed: u64,
    pub(crate) state: u32,
    pub(crate) refused: u64,
    pub(crate) last_status: u32,
    pub(crate) last_detail: u32,
    pub(crate) last_position: u64,
}

impl FakeGuest {
    pub(crate) fn new() -> Self {
        let ram = GuestRam::new(RAM, 0, Backing::Sealable).unwrap();
        let atomic = ram.atomic();
        let mut vrings = Vec::new();
        let mut rings = Vec::new();
        for q in 0..u16::try_from(abi::NUM_QUEUES).unwrap() {
            let v = VringRwLock::new(atomic.clone(), abi::MAX_QUEUE_SIZE).unwrap();
            let r = SplitRing::packed_at(&ram, ring_base(q), QSIZE);
            v.set_queue_size(QSIZE);
            v.set_queue_info(r.desc, r.avail, r.used).unwrap();
            v.set_queue_ready(true);
            v.set_enabled(true);
            vrings.push(v);
            rings.push(r);
        }
        FakeGuest {
            ram,
            atomic,
            vrings,
            rings,
            next_buf: BUF_BASE,
            next_frame: FRAME_BASE,
            tail: 0,
        }
    }

    /// Post one record the way a driver does: padding to the end of the ring
    /// if it would wrap, then header and data, then the tag (release).
    pub(crate) fn post_record(&mut self, addr: u64, data: &[u8]) -> u64 {
        let h = TxRecordHeader {
            addr,
            len: u32::try_from(data.len()).unwrap(),
            flags: 0,
        };
        self.post_raw(&h.to_bytes(), data, TxRecordHeader::slots(h.len))
    }

    /// Post one store carrying its sender's virtual time `vt` (ABI 3,
    /// `fifo::FLAG_VTIME`).
    pub(crate) fn post_stamped(&mut self, addr: u64, data: &[u8], vt: u64) -> u64 {
        let h = TxRecordHeader {
            addr,
            len: u32::try_from(data.len()).unwrap(),
            flags: abi::fifo::FLAG_VTIME,
        };
        let mut body = vt.to_le_bytes().to_vec();
        body.extend_from_slice(data);
        self.post_raw(
            &h.to_bytes(),
            &body,
            TxRecordHeader::slots_with(h.len, true),
        )
    }

    /// Post `header` and `data` as a record of `slots` slots (which a test
    /// may make disagree with the header).
    pub(crate) fn post_raw(&mut self, header: &[u8], data: &[u8], slots: u64) -> u64 {
        let to_end = fifo_layout().slots_to_end(self.tail);
        if slots > to_end && slots <= u64::from(FIFO_SLOTS) {
            let pad = TxRecordHeader::pad(to_end);
            self.write_record(&pad.to_bytes(), &[], to_end);
        }
        self.write_record(header, data, slots)
    }

    fn write_record(&mut self, header: &[u8], data: &[u8], slots: u64) -> u64 {
        let f = fifo_layout();
        let at = self.tail;
        let mem = self.mem();
        let slot = FIFO_GPA + f.slot_offset(at) as u64;
        let room = usize::try_from(f.slots_to_end(at)).unwrap() * abi::fifo::SLOT_SIZE;
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(data);
        bytes.truncate(room);
        mem.write_slice(&bytes, GuestAddress(slot)).unwrap();
        mem.store(
            f.tag(at),
            GuestAddress(FIFO_GPA + f.tag_offset(at) as u64),
            std::sync::atomic::Ordering::Release,
        )
        .unwrap();
        self.tail = at + slots.max(1);
        at
    }

    pub(crate) fn fifo_header(&self) -> FifoHeader {
        use abi::fifo::header as h;
        let mem = self.mem();
        let r64 = |o: usize| {
            mem.read_obj::<u64>(GuestAddress(FIFO_GPA + o as u64))
                .unwrap()
        };
        let r32 = |o: usize| {
            mem.read_obj::<u32>(GuestAddress(FIFO_GPA + o as u64))
                .unwrap()
        };
        FifoHeader {
            consumed: r64(h::CONSUMED),
            state: r32(h::STATE),
            refused: r64(h::REFUSED),
            last_status: r32(h::LAST_STATUS),
            last_detail: r32(h::LAST_DETAIL),
            last_position: r64(h::LAST_POSITION),
        }
    }

    /// The driver re-initialises its rings and forgets its buffers (what
    /// a reset driver does): rings zeroed, both sides' indices at 0.
    pub(crate) fn reset_rings(&mut self) {
        for (r, v) in self.rings.iter_mut().zip(&self.vrings) {
            r.reset(&self.ram);
            v.set_queue_next_avail(0);
            v.set_queue_next_used(0);
        }
        self.next_buf = BUF_BASE;
        self.tail = 0;
    }

    /// A memory table over only the first `len` bytes of this guest's RAM
    /// (what a frontend that shrinks its table sends).
    pub(crate) fn shrunk_table(&self, len: usize) -> GuestMemoryAtomic<Mem> {
        GuestMemoryAtomic::new(self.ram.prefix(len).unwrap())
    }

    /// The full table again.
    pub(crate) fn full_table(&self) -> GuestMemoryAtomic<Mem> {
        self.atomic.clone()
    }

    pub(crate) fn mem(&self) -> vm_memory::GuestMemoryLoadGuard<Mem> {
        self.atomic.memory()
    }

    pub(crate) fn post(&mut self, q: u16, bufs: &[(u64, u32, bool)]) -> u16 {
        self.rings[usize::from(q)].post(&self.ram, bufs)
    }

    /// Write descriptors verbatim (loops, broken chains) and make `head`
    /// available on queue `q`.
    pub(crate) fn post_raw_chain(
        &mut self,
        q: u16,
        descs: &[(u16, u64, u32, u16, u16)],
        head: u16,
    ) {
        let r = &mut self.rings[usize::from(q)];
        for &(i, gpa, len, flags, next) in descs {
            r.write_desc(&self.ram, i, gpa, len, flags, next);
        }
        r.make_available(&self.ram, head);
    }

    pub(crate) fn reap(&mut self, q: u16) -> Vec<(u32, u32)> {
        self.rings[usize::from(q)].reap(&self.ram)
    }

    pub(crate) fn alloc(&mut self, len: usize) -> u64 {
        let a = self.next_buf;
        self.next_buf += (len as u64).div_ceil(64) * 64 + 64;
        assert!(self.next_buf < FRAME_BASE);
        a
    }

    pub(crate) fn frames_for(&mut self, pages: u32) -> Vec<u64> {
        let n = pages as u64 * PAGE / u64::from(abi::FRAME_SIZE);
        let v = (0..n)
            .map(|k| self.next_frame + k * u64::from(abi::FRAME_SIZE))
            .collect();
        self.next_frame += n * u64::from(abi::FRAME_SIZE);
        v
    }

    pub(crate) fn ram(&self) -> Vec<u8> {
        let mut v = vec![0u8; RAM];
        self.mem().read_slice(&mut v, GuestAddress(0)).unwrap();
        v
    }
}

pub(crate) struct Rig {
    pub(crate) st: DeviceState,
    pub(crate) guests: Vec<FakeGuest>,
    pub(crate) model: Hub,
    pub(crate) shadow: ShadowCluster,
}

impl Rig {
    pub(crate) fn new(nodes: u8) -> Self {
        Rig::with_config(ClusterConfig::new(nodes))
    }

    pub(crate) fn with_config(config: ClusterConfig) -> Self {
        let hub = Hub::new(config.clone()).unwrap();
        let mut st = DeviceState::new(hub, ClusterClock::start());
        let guests: Vec<FakeGuest> = (0..config.nodes).map(|_| FakeGuest::new()).collect();
        for (i, g) in guests.iter().enumerate() {
            let guest = st.node_mut(id(i)).guest_mut();
            guest.set_memory(g.atomic.clone());
            guest.capture_vrings(|| g.vrings.clone());
        }
        let mut rig = Rig {
            st,
            guests,
            model: Hub::new(config).unwrap(),
            shadow: ShadowCluster::new(u32::try_from(PAGE).unwrap()),
        };
        for n in 0..rig.guests.len() {
            let r = rig.ctrl(
                n,
                &CtrlRequest::SetTxFifo {
                    gpa: FIFO_GPA,
                    slots: FIFO_SLOTS,
                },
            );
            assert_eq!(r.status, Status::Ok as u32, "{r:?}");
        }
        rig
    }

    /// Put node `n` back as a fresh driver leaves it: rings re-initialised,
    /// adapter reset, no status page, no events waiting, its FIFO registered
    /// afresh, and nothing left on its way anywhere. The fuzz entry points
    /// reuse one rig this way, input after input.
    pub(crate) fn reset_node(&mut self, n: usize) {
        while self.pump() > 0 || !self.st.nothing_pending() {}
        self.guests[n].reset_rings();
        for q in 0..3 {
            self.st.node_mut(id(n)).guest_mut().ring_stopped(q);
        }
        self.st.node_mut(id(n)).reset_events();
        for req in [
            CtrlRequest::Reset,
            CtrlRequest::SetStatusPage { gpa: 0 },
            CtrlRequest::SetTxFifo {
                gpa: FIFO_GPA,
                slots: FIFO_SLOTS,
            },
        ] {
            let r = self.ctrl(n, &req);
            assert_eq!(r.status, Status::Ok as u32, "{req:?}: {r:?}");
        }
        let _ = self.model.reset_adapter(id(n));
    }

    /// One pass of the hub thread: every FIFO, the deliveries due.
    pub(crate) fn pump(&mut self) -> usize {
        self.st.pass().0
    }

    pub(crate) fn ctrl(&mut self, node: usize, req: &CtrlRequest) -> CtrlResponse {
        self.ctrl_raw(node, &req.encode())
    }

    pub(crate) fn ctrl_raw(&mut self, node: usize, bytes: &[u8]) -> CtrlResponse {
        let g = &mut self.guests[node];
        let mark = g.next_buf;
        let req = g.alloc(bytes.len());
        let resp = g.alloc(16);
        g.mem().write_slice(bytes, GuestAddress(req)).unwrap();
        g.post(
            abi::CTRL_QUEUE,
            &[
                (req, u32::try_from(bytes.len()).unwrap(), false),
                (resp, 16, true),
            ],
        );
        // Ordered after the stores before it: the hub takes them first.
        while self.pump() > 0 {}
        self.st.process_ctrl(id(node));
        let g = &mut self.guests[node];
        let done = g.reap(abi::CTRL_QUEUE);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].1, 16);
        let mut b = [0u8; 16];
        g.mem().read_slice(&mut b, GuestAddress(resp)).unwrap();
        // The request's buffers are free again.
        g.next_buf = mark;
        CtrlResponse::from_bytes(&b).unwrap()
    }

    /// Program `page` on `node` in the device and in the model; bind fresh frames
    /// when receiving. Returns the frames.
    pub(crate) fn set_pct(&mut self, node: usize, page: u32, entry: PctEntry) -> Vec<u64> {
        let frames = if entry.receive {
            self.guests[node].frames_for(1)
        } else {
            vec![]
        };
        let r = self.ctrl(
            node,
            &CtrlRequest::SetPct {
                first_page: page,
                count: 1,
                entry: entry.to_bits(),
                frames: frames.clone(),
            },
        );
        assert_eq!(r.status, Status::Ok as u32, "{r:?}");
        self.model
            .set_pct(id(node), firmware_model::PageNumber(page), entry)
            .unwrap();
        frames
    }

    /// Transmit through the device and the model alike: post every record,
    /// let the hub take them, and return the FIFO header's words after it.
    /// Posted writes: a refused record does not stop the ones after it.
    pub(crate) fn transmit(&mut self, node: usize, records: &[(u64, Vec<u8>)]) -> FifoHeader {
        for (addr, data) in records {
            self.guests[node].post_record(*addr, data);
        }
        while self.pump() > 0 {}
        for (addr, data) in records {
            let _ = self
                .shadow
                .store(&mut self.model, Nanos(0), id(node), GlobalAddr(*addr), data);
        }
        self.guests[node].fifo_header()
    }

    /// Every bound receive frame of every guest holds what the model says.
    pub(crate) fn check_against_model(&self) {
        for (n, pages) in self.shadow.written_pages().into_iter().fold(
            Vec::<(NodeId, Vec<_>)>::new(),
            |mut acc, (n, p)| {
                match acc.iter_mut().find(|(m, _)| *m == n) {
                    Some((_, v)) => v.push(p),
                    None => acc.push((n, vec![p])),
                }
                acc
            },
        ) {
            for p in pages {
                let frames = self.st.node(n).frames(p.0).expect("bound").to_vec();
                let mut got = Vec::new();
                for (gpa, len) in frames {
                    let mut b = vec![0u8; len as usize];
                    self.guests[n.index()]
                        .mem()
                        .read_slice(&mut b, GuestAddress(gpa))
                        .unwrap();
                    got.extend(b);
                }
                assert_eq!(Some(&got[..]), self.shadow.page(n, p), "{n} {p}");
            }
        }
    }
}
