//! The FIFO against a drain that reads the ring as the device does.

use super::*;
use crate::dma::MemfdMemory;
use crate::transport::TransportError;
use firmware_model::abi::TxRecordHeader;
use std::sync::atomic::AtomicUsize;

#[derive(Debug, Default)]
struct CountingBell(AtomicUsize);

impl Doorbell for CountingBell {
    fn ring(&self) -> std::result::Result<(), TransportError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn fifo(slots: u32) -> (Arc<TxFifo>, DmaRegion, Arc<CountingBell>) {
    let mem = DmaRegion::new(Arc::new(
        MemfdMemory::new(fifo::bytes(slots).next_multiple_of(4096), 0x4000_0000).unwrap(),
    ));
    let bell = Arc::new(CountingBell::default());
    let f = TxFifo::new(mem.clone(), slots, bell.clone(), Duration::from_secs(5)).unwrap();
    (Arc::new(f), mem, bell)
}

/// Take what is committed, as the device does; returns the records and
/// publishes `consumed`.
fn drain(mem: &DmaRegion, slots: u32, head: &mut u64) -> Vec<(u64, Vec<u8>)> {
    drain_with_times(mem, slots, head)
        .into_iter()
        .map(|(a, d, _)| (a, d))
        .collect()
}

/// [`drain`], with each record's virtual time if it carries one (the
/// clock may be on in this test binary: vclock's tests turn it on).
fn drain_with_times(
    mem: &DmaRegion,
    slots: u32,
    head: &mut u64,
) -> Vec<(u64, Vec<u8>, Option<u64>)> {
    let mut out = Vec::new();
    loop {
        let i = usize::try_from(*head % u64::from(slots)).unwrap();
        let tag = mem.read_u32(fifo::HEADER_SIZE + 4 * i).unwrap();
        if tag != fifo::tag(*head, slots) {
            break;
        }
        let off = fifo::slots_offset(slots) + fifo::SLOT_SIZE * i;
        let h = TxRecordHeader::from_bytes(&mem.read_vec(off, 16).unwrap()).unwrap();
        let n = TxRecordHeader::slots_with(h.len, h.has_vtime());
        assert!(i as u64 + n <= u64::from(slots), "a record wraps");
        match h.flags {
            0 => out.push((
                h.addr,
                mem.read_vec(off + 16, h.len as usize).unwrap(),
                None,
            )),
            fifo::FLAG_VTIME => out.push((
                h.addr,
                mem.read_vec(off + 24, h.len as usize).unwrap(),
                Some(mem.read_u64(off + 16).unwrap()),
            )),
            f => assert_eq!(f, fifo::FLAG_PAD),
        }
        *head += n;
    }
    mem.write_u64(fifo::header::CONSUMED, *head).unwrap();
    out
}

#[test]
fn in_virtual_time_every_store_carries_its_senders_time() {
    crate::vclock::test_on();
    let (f, mem, _) = fifo(128);
    let _me = crate::vclock::join(5_000_000).unwrap();
    let mut head = 0;
    f.post(0x100, &[1; 8]).unwrap();
    f.post_one(0x200, &[2; 40]).unwrap();
    f.post_all(&[(0x300, &[3; 9][..]), (0x400, &[4; 100][..])])
        .unwrap();
    let got = drain_with_times(&mem, 128, &mut head);
    assert_eq!(got.len(), 4);
    for (i, (_, data, vt)) in got.iter().enumerate() {
        let vt = vt.expect("stamped");
        assert!(vt >= 5_000_000, "record {i}: {vt}");
        assert_eq!(usize::from(data[0]), i + 1);
    }
    assert_eq!(got[3].1.len(), 100);
}

#[test]
fn single_stores_posted_without_allocating_wrap_and_interleave_in_order() {
    let (f, mem, _) = fifo(128);
    let mut head = 0;
    let mut got = Vec::new();
    let mut want = Vec::new();
    for k in 0..500u64 {
        let data: Vec<u8> = (0..k % 200 + 1).map(|i| ((i + k) & 0xff) as u8).collect();
        if k % 2 == 0 {
            f.post_one(k * 8, &data).unwrap();
        } else {
            f.post(k * 8, &data).unwrap();
        }
        want.push((k * 8, data));
        if k % 4 == 0 {
            got.extend(drain(&mem, 128, &mut head));
        }
    }
    got.extend(drain(&mem, 128, &mut head));
    assert_eq!(got, want);
    assert!(head > 10 * 128, "several laps");
    f.flush().unwrap();
}

#[test]
fn records_wrap_with_padding_and_come_out_in_order() {
    let (f, mem, _) = fifo(128);
    let mut head = 0;
    let mut got = Vec::new();
    let mut want = Vec::new();
    for k in 0..500u64 {
        let data: Vec<u8> = (0..k % 300 + 1).map(|i| (i & 0xff) as u8).collect();
        f.post(k * 8, &data).unwrap();
        want.push((k * 8, data));
        if k % 3 == 0 {
            got.extend(drain(&mem, 128, &mut head));
        }
    }
    got.extend(drain(&mem, 128, &mut head));
    assert_eq!(got, want);
    assert!(head > 10 * 128, "several laps");
    f.flush().unwrap();
}

#[test]
fn a_full_ring_waits_for_the_device_and_large_stores_split() {
    let (f, mem, _) = fifo(4096);
    let big: Vec<u8> = (0..200_000u32).map(|i| (i & 0xff) as u8).collect();
    let poster = {
        let f = f.clone();
        let big = big.clone();
        std::thread::spawn(move || {
            for _ in 0..3 {
                f.post(0x1000, &big).unwrap();
            }
        })
    };
    let mut head = 0;
    let mut got = Vec::new();
    while got.len() < 12 {
        got.extend(drain(&mem, 4096, &mut head));
        std::thread::yield_now();
    }
    poster.join().unwrap();
    // 200,000 bytes as 65,536 + 65,536 + 65,536 + 3,392, three times.
    assert_eq!(got.len(), 12);
    for store in got.chunks(4) {
        let joined: Vec<u8> = store.iter().flat_map(|r| r.1.clone()).collect();
        assert_eq!(joined, big);
        assert_eq!(store[1].0, 0x1000 + 65_536);
    }
}

#[test]
fn threads_post_without_a_lock_each_in_program_order() {
    let (f, mem, _) = fifo(1024);
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let f = f.clone();
            std::thread::spawn(move || {
                for k in 0..2000u64 {
                    f.post(t << 32 | k, &k.to_le_bytes()).unwrap();
                }
            })
        })
        .collect();
    let mut head = 0;
    let mut got = Vec::new();
    while got.len() < 8000 {
        got.extend(drain(&mem, 1024, &mut head));
    }
    for t in threads {
        t.join().unwrap();
    }
    for t in 0..4u64 {
        let mine: Vec<u64> = got
            .iter()
            .filter(|(a, _)| a >> 32 == t)
            .map(|(a, d)| {
                assert_eq!(
                    a & 0xffff_ffff,
                    u64::from_le_bytes(d[..8].try_into().unwrap())
                );
                a & 0xffff_ffff
            })
            .collect();
        assert_eq!(mine, (0..2000).collect::<Vec<_>>(), "thread {t}");
    }
}

#[test]
fn the_doorbell_rings_once_when_armed_and_refusals_surface_at_flush() {
    let (f, mem, bell) = fifo(128);
    f.post(0, b"a").unwrap();
    assert_eq!(bell.0.load(Ordering::Relaxed), 0, "not armed: no kick");
    mem.write_u32(fifo::header::DOORBELL, 1).unwrap();
    f.post(8, b"b").unwrap();
    f.post(16, b"c").unwrap();
    assert_eq!(bell.0.load(Ordering::Relaxed), 1, "one kick per arming");
    let mut head = 0;
    drain(&mem, 128, &mut head);
    mem.write_u64(fifo::header::REFUSED, 1).unwrap();
    mem.write_u32(fifo::header::LAST_STATUS, Status::TransmitDisabled as u32)
        .unwrap();
    assert!(matches!(f.flush(), Err(Error::Refused { status: 6, .. })));
    f.flush().unwrap();
    mem.write_u32(fifo::header::STATE, fifo::State::Broken as u32)
        .unwrap();
    assert!(matches!(f.flush(), Err(Error::FifoBroken { .. })));
}
