//! The adapter over a fake transport whose device is a test thread
//! serving the rings with virtio-queue's device side (no backend).

use super::*;
use crate::test_device::{guest_ram, DeviceQueue};
use crate::transport::Doorbell;
use crate::transport::TransportError;
use firmware_model::abi::{CtrlRequest, CtrlResponse, TxRecordHeader};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use vm_memory::GuestMemoryMmap;
use vm_memory::{Bytes, GuestAddress};

type Rings = Arc<Mutex<Vec<Option<(RingLayout, u16)>>>>;

struct FakeTransport {
    dma: DmaRegion,
    rings: Rings,
    kicks: Arc<[AtomicUsize; 3]>,
}

impl Transport for FakeTransport {
    fn registers(&mut self) -> Result<Registers, TransportError> {
        Ok(Registers {
            node_id: 1,
            nodes: 2,
            page_size: 8192,
            max_payload: 32,
            address_space: 512 << 20,
            ..Default::default()
        })
    }
    fn dma(&self) -> &DmaRegion {
        &self.dma
    }
    fn event_idx(&self) -> bool {
        true
    }
    fn max_queue_size(&self, _queue: u16) -> u16 {
        64
    }
    fn setup_queue(
        &mut self,
        queue: u16,
        size: u16,
        rings: &RingLayout,
    ) -> Result<(), TransportError> {
        let mut r = self.rings.lock().unwrap();
        r[usize::from(queue)] = Some((rings.clone(), size));
        Ok(())
    }
    fn start(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
    fn notify(&self, queue: u16) -> Result<(), TransportError> {
        self.kicks[usize::from(queue)].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn doorbell(&self, queue: u16) -> Result<Arc<dyn Doorbell>, TransportError> {
        Ok(Arc::new(CountedKick {
            kicks: self.kicks.clone(),
            queue,
        }))
    }
}

#[derive(Debug)]
struct CountedKick {
    kicks: Arc<[AtomicUsize; 3]>,
    queue: u16,
}

impl Doorbell for CountedKick {
    fn ring(&self) -> Result<(), TransportError> {
        self.kicks[usize::from(self.queue)].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// What the fake device does.
#[derive(Default)]
struct Knobs {
    /// Do not serve the control queue.
    ctrl_paused: AtomicBool,
    /// Do not take records from the transmit FIFO.
    tx_paused: AtomicBool,
    /// Arm the FIFO's doorbell after each pass, as a hub going to sleep does.
    arm_doorbell: AtomicBool,
    stop: AtomicBool,
    /// Records the device saw: (addr, data).
    seen: Mutex<Vec<(u64, Vec<u8>)>>,
}

struct Rig {
    adapter: Adapter<FakeTransport>,
    knobs: Arc<Knobs>,
    kicks: Arc<[AtomicUsize; 3]>,
    device: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.knobs.stop.store(true, Ordering::Relaxed);
        if let Some(d) = self.device.take() {
            let _ = d.join();
        }
    }
}

fn rig(opts: AdapterOptions) -> Rig {
    let ram = guest_ram(8 << 20, 0x2000_0000);
    let rings: Rings = Arc::new(Mutex::new(vec![None, None, None]));
    let kicks: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
    let t = FakeTransport {
        dma: ram.dma.clone(),
        rings: rings.clone(),
        kicks: kicks.clone(),
    };
    let knobs = Arc::new(Knobs::default());
    let k = knobs.clone();
    let mem = ram.mem.clone();
    let r = rings.clone();
    // The device runs while the adapter comes up: it answers SET_TX_FIFO.
    let device = std::thread::spawn(move || {
        let queues = loop {
            let q: Vec<_> = r.lock().unwrap().iter().flatten().cloned().collect();
            if q.len() == 3 {
                break q;
            }
            std::thread::yield_now();
        };
        device(mem, queues, k)
    });
    let adapter = Adapter::new(t, opts).unwrap();
    Rig {
        adapter,
        knobs,
        kicks,
        device: Some(device),
    }
}

fn device(mem: Arc<GuestMemoryMmap>, queues: Vec<(RingLayout, u16)>, k: Arc<Knobs>) {
    let mut ctrl = DeviceQueue::new(&mem, &queues[1].0, queues[1].1, true);
    // (gpa, slots, head) of the registered FIFO.
    let mut fifo: Option<(u64, u32, u64)> = None;
    while !k.stop.load(Ordering::Relaxed) {
        let mut idle = true;
        if !k.ctrl_paused.load(Ordering::Relaxed) {
            if let Some(chain) = ctrl.pop_chain() {
                idle = false;
                let head = chain.head_index();
                let mut req = Vec::new();
                chain
                    .clone()
                    .reader(&mem)
                    .unwrap()
                    .read_to_end(&mut req)
                    .unwrap();
                let resp = match CtrlRequest::decode(&req) {
                    Ok(CtrlRequest::GetStatus) => CtrlResponse::ok(42, 7),
                    Ok(CtrlRequest::SetTxFifo { gpa, slots }) => {
                        fifo = Some((gpa, slots, 0));
                        CtrlResponse::ok(0, 0)
                    }
                    Ok(_) => CtrlResponse::ok(0, 0),
                    Err(s) => CtrlResponse::error(s, 0),
                };
                let mut w = chain.writer(&mem).unwrap();
                w.write_all(&resp.to_bytes()).unwrap();
                ctrl.add_used(head, u32::try_from(w.bytes_written()).unwrap());
            }
        }
        if let (Some((gpa, slots, head)), false) =
            (fifo.as_mut(), k.tx_paused.load(Ordering::Relaxed))
        {
            let start = *head;
            take_records(&mem, *gpa, *slots, head, &k.seen);
            idle &= *head == start;
            mem.store(*head, GuestAddress(*gpa), Ordering::Release)
                .unwrap();
            if k.arm_doorbell.load(Ordering::Relaxed) && *head == start {
                mem.store(1u32, GuestAddress(*gpa + 8), Ordering::SeqCst)
                    .unwrap();
            }
        }
        if idle {
            std::thread::yield_now();
        }
    }
}

/// Take committed records from the FIFO at `gpa`, as the device does.
fn take_records(
    mem: &GuestMemoryMmap,
    gpa: u64,
    slots: u32,
    head: &mut u64,
    seen: &Mutex<Vec<(u64, Vec<u8>)>>,
) {
    loop {
        let i = *head % u64::from(slots);
        let tag: u32 = mem
            .load(GuestAddress(gpa + 64 + 4 * i), Ordering::Acquire)
            .unwrap();
        if tag != fifo::tag(*head, slots) {
            return;
        }
        let at = gpa + fifo::slots_offset(slots) as u64 + 32 * i;
        let mut h = [0u8; 16];
        mem.read_slice(&mut h, GuestAddress(at)).unwrap();
        let h = TxRecordHeader::from_bytes(&h).unwrap();
        if h.flags == 0 {
            let mut d = vec![0u8; h.len as usize];
            mem.read_slice(&mut d, GuestAddress(at + 16)).unwrap();
            seen.lock().unwrap().push((h.addr, d));
        }
        *head += TxRecordHeader::slots(h.len);
    }
}

fn fast() -> AdapterOptions {
    AdapterOptions {
        queue_size: 64,
        fifo_slots: MIN_FIFO_SLOTS,
        event_buffers: 8,
        timeout: Duration::from_millis(200),
        spin: 100,
    }
}

#[test]
fn control_requests_round_trip_and_kick_every_time() {
    let mut r = rig(fast());
    for _ in 0..10 {
        assert_eq!(r.adapter.get_status().unwrap(), (42, 7));
    }
    // Ten requests, and SET_TX_FIFO at bring-up.
    assert_eq!(
        r.kicks[abi::CTRL_QUEUE as usize].load(Ordering::Relaxed),
        11
    );
    // Event buffers were posted and the device told.
    assert_eq!(
        r.kicks[abi::EVENT_QUEUE as usize].load(Ordering::Relaxed),
        1
    );
}

#[test]
fn a_control_timeout_is_reported_and_recovered() {
    let mut r = rig(fast());
    r.knobs.ctrl_paused.store(true, Ordering::Relaxed);
    assert!(matches!(r.adapter.get_status(), Err(Error::Timeout { .. })));
    assert!(matches!(r.adapter.get_status(), Err(Error::Busy(_))));
    r.knobs.ctrl_paused.store(false, Ordering::Relaxed);
    // The late answer is reaped, then the new request goes through.
    let start = Instant::now();
    loop {
        match r.adapter.get_status() {
            Ok(v) => {
                assert_eq!(v, (42, 7));
                break;
            }
            Err(Error::Busy(_)) if start.elapsed() < Duration::from_secs(5) => {
                std::thread::yield_now()
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn stores_are_posted_and_kick_only_when_asked() {
    let r = rig(fast());
    // The device takes nothing: stores still return at once.
    r.knobs.tx_paused.store(true, Ordering::Relaxed);
    for i in 0..50u64 {
        r.adapter.store(i * 8, &i.to_le_bytes()).unwrap();
        r.adapter.fifo().post_all(&[(1, b"abc")]).unwrap();
    }
    assert!(r.knobs.seen.lock().unwrap().is_empty());
    assert!(matches!(r.adapter.flush(), Err(Error::Timeout { .. })));
    r.knobs.tx_paused.store(false, Ordering::Relaxed);
    r.adapter.flush().unwrap();
    let seen = r.knobs.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 100);
    for (i, pair) in (0..50u64).zip(seen.chunks(2)) {
        assert_eq!(pair[0], (i * 8, i.to_le_bytes().to_vec()));
        assert_eq!(pair[1], (1, b"abc".to_vec()));
    }
    // The device never armed the doorbell: no kick on the transmit queue.
    assert_eq!(r.kicks[abi::TX_QUEUE as usize].load(Ordering::Relaxed), 0);
    // Once it does, the next store kicks (once).
    r.knobs.arm_doorbell.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(20));
    r.adapter.store(0, b"x").unwrap();
    r.adapter.flush().unwrap();
    assert!(r.kicks[abi::TX_QUEUE as usize].load(Ordering::Relaxed) >= 1);
}

#[test]
fn fifo_limits_are_checked_at_bring_up() {
    let ram = guest_ram(8 << 20, 0x2000_0000);
    for slots in [1000, 128, 1 << 25] {
        let t = FakeTransport {
            dma: ram.dma.clone(),
            rings: Arc::new(Mutex::new(vec![None, None, None])),
            kicks: Arc::new(Default::default()),
        };
        let opts = AdapterOptions {
            fifo_slots: slots,
            ..fast()
        };
        assert!(matches!(
            Adapter::new(t, opts),
            Err(Error::FifoSize { slots: s }) if s == slots
        ));
    }
}

#[test]
fn receive_memory_is_frames_of_whole_pages() {
    let mut r = rig(fast());
    let rx = r.adapter.alloc_receive(3).unwrap();
    assert_eq!(rx.pages(), 3);
    let f = rx.frames();
    assert_eq!(f.len(), 6);
    assert_eq!(f[0] % 8192, 0);
    assert!(f.windows(2).all(|w| w[1] == w[0] + 4096));
    assert!(r.adapter.alloc_receive(0).is_err());
    assert!(matches!(
        r.adapter.alloc_receive(100_000),
        Err(Error::Dma(crate::dma::DmaError::OutOfMemory { .. }))
    ));
    // The "device" writes into a frame; the driver sees it.
    rx.region().write(8192 + 5, b"dma").unwrap();
    rx.wait_for(8192 + 5, b"dma", Duration::from_secs(1))
        .unwrap();
    assert!(rx
        .wait_for(0, b"nothing", Duration::from_millis(10))
        .is_err());
    assert!(matches!(r.adapter.status(), Err(Error::NoStatusPage)));
}
