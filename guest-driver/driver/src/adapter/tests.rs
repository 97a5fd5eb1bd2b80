//! The adapter over a fake transport whose device is a test thread
//! serving the rings with virtio-queue's device side (no backend).

use super::*;
use crate::test_device::{guest_ram, DeviceQueue};
use crate::transport::TransportError;
use firmware_model::abi::{CtrlRequest, CtrlResponse, TxRecordHeader, TX_RECORD_HEADER_SIZE};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use vm_memory::GuestMemoryMmap;

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
}

/// What the fake device does.
#[derive(Default)]
struct Knobs {
    /// Do not serve the control queue.
    ctrl_paused: AtomicBool,
    /// Consume transmit chains without writing their completion.
    tx_silent: AtomicBool,
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
    let adapter = Adapter::new(t, opts).unwrap();
    let knobs = Arc::new(Knobs::default());
    let k = knobs.clone();
    let queues: Vec<_> = rings.lock().unwrap().iter().flatten().cloned().collect();
    let mem = ram.mem.clone();
    let device = std::thread::spawn(move || device(mem, queues, k));
    Rig {
        adapter,
        knobs,
        kicks,
        device: Some(device),
    }
}

fn device(mem: Arc<GuestMemoryMmap>, queues: Vec<(RingLayout, u16)>, k: Arc<Knobs>) {
    let mut tx = DeviceQueue::new(&mem, &queues[0].0, queues[0].1, true);
    let mut ctrl = DeviceQueue::new(&mem, &queues[1].0, queues[1].1, true);
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
                    Ok(_) => CtrlResponse::ok(0, 0),
                    Err(s) => CtrlResponse::error(s, 0),
                };
                let mut w = chain.writer(&mem).unwrap();
                w.write_all(&resp.to_bytes()).unwrap();
                ctrl.add_used(head, w.bytes_written() as u32);
            }
        }
        if let Some(chain) = tx.pop_chain() {
            idle = false;
            let head = chain.head_index();
            let mut recs = Vec::new();
            chain
                .clone()
                .reader(&mem)
                .unwrap()
                .read_to_end(&mut recs)
                .unwrap();
            let mut off = 0;
            let mut n = 0;
            while off < recs.len() {
                let h = TxRecordHeader::from_bytes(&recs[off..]).unwrap();
                let s = off + TX_RECORD_HEADER_SIZE;
                k.seen
                    .lock()
                    .unwrap()
                    .push((h.addr, recs[s..s + h.len as usize].to_vec()));
                off += TxRecordHeader::record_size(h.len) as usize;
                n += 1;
            }
            if k.tx_silent.load(Ordering::Relaxed) {
                tx.add_used(head, 0);
            } else {
                let c = TxCompletion {
                    status: 0,
                    records_done: n,
                };
                let mut w = chain.writer(&mem).unwrap();
                w.write_all(&c.to_bytes()).unwrap();
                tx.add_used(head, w.bytes_written() as u32);
            }
        }
        if idle {
            std::thread::yield_now();
        }
    }
}

fn fast() -> AdapterOptions {
    AdapterOptions {
        queue_size: 64,
        tx_buffers: 4,
        tx_buffer_size: 4096,
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
    assert_eq!(
        r.kicks[abi::CTRL_QUEUE as usize].load(Ordering::Relaxed),
        10
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
fn transmit_streams_and_kicks_only_when_asked() {
    let mut r = rig(fast());
    let mut tickets = Vec::new();
    for i in 0..50u64 {
        let v = i.to_le_bytes();
        tickets.push(
            r.adapter
                .post_transmit(&[(i * 8, &v), (1, b"abc")])
                .unwrap(),
        );
    }
    let mut done = r.adapter.drain_transmit().unwrap();
    // Completions reaped while waiting for buffers are kept too.
    done.sort_by_key(|d| d.0);
    assert_eq!(done.len(), 50);
    for (t, c) in &done {
        assert_eq!((c.status, c.records_done), (0, 2), "{t:?}");
    }
    assert_eq!(done.iter().map(|d| d.0).collect::<Vec<_>>(), tickets);
    let seen = r.knobs.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 100);
    for i in 0..50u64 {
        assert_eq!(seen[2 * i as usize], (i * 8, i.to_le_bytes().to_vec()));
        assert_eq!(seen[2 * i as usize + 1], (1, b"abc".to_vec()));
    }
    // The fake device never arms avail_event: one kick (crossing 0), no more.
    assert_eq!(r.kicks[abi::TX_QUEUE as usize].load(Ordering::Relaxed), 1);
    assert!(matches!(
        r.adapter.wait_transmit(tickets[0]),
        Err(Error::NotInFlight(t)) if t == tickets[0]
    ));
    let c = r.adapter.transmit(&[(0, b"x")]).unwrap();
    assert_eq!(c.records_done, 1);
}

#[test]
fn transmit_limits_and_missing_completions() {
    let mut r = rig(fast());
    assert!(matches!(r.adapter.transmit(&[]), Err(Error::EmptyTransmit)));
    let big = vec![0u8; 5000];
    assert!(matches!(
        r.adapter.transmit(&[(0, &big)]),
        Err(Error::RecordsTooLarge {
            size: 5016,
            capacity: 4096
        })
    ));
    assert_eq!(r.adapter.tx_capacity(), 4096);
    r.knobs.tx_silent.store(true, Ordering::Relaxed);
    let c = r.adapter.transmit(&[(0, b"lost")]).unwrap();
    assert_eq!(c.status, Status::DeviceError as u32);
    r.knobs.tx_silent.store(false, Ordering::Relaxed);
    assert_eq!(r.adapter.transmit(&[(0, b"ok")]).unwrap().status, 0);
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
