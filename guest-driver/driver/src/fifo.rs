//! The transmit FIFO, driver side: posted stores (docs/device.md section 14,
//! "Transmit FIFO"; the layout is `firmware_model::abi::fifo`).
//!
//! On the real adapter a store to a transmit region is a posted PIO write:
//! "All I/O operations are fully pipelined" (seed 000 s.2.2), and the
//! processor goes on at once. Here a store claims slots in a ring in DMA
//! memory with one compare-and-swap (every thread of the node may post at
//! once; no lock), writes its record, commits it by writing the tag of its
//! first slot, and returns. The hub takes records in position order, so a
//! node's stores reach the network in FIFO order: one thread's in program
//! order, and a store made after another thread's store was seen (any
//! happens-before) after it.
//!
//! Waiting is explicit: [`TxFifo::flush`] waits until everything posted
//! before it has been handed to the hub; only an ACK-page check proves that
//! it arrived anywhere.

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use firmware_model::abi::{fifo, Status, TxRecordHeader, MAX_RECORD_DATA, TX_RECORD_HEADER_SIZE};

use crate::backoff::{poll_until_with, BackoffPolicy};
use crate::dma::DmaRegion;
use crate::error::{Error, Result};
use crate::transport::Doorbell;
use crate::vclock;

/// One store: a global address and the bytes to write there.
pub type Store<'a> = (u64, &'a [u8]);

/// What the device says about stores it refused or a FIFO it stopped taking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Stores refused since the FIFO was registered.
    pub count: u64,
    pub status: u32,
    pub detail: u32,
    /// Position of the last refused record.
    pub position: u64,
}

/// How long a poster waits for the device before it calls it stuck.
const WAIT_POLICY: BackoffPolicy = BackoffPolicy::DEFAULT;

/// The driver's side of the ring. Share it between threads (`Arc`).
#[derive(Debug)]
pub struct TxFifo {
    mem: DmaRegion,
    slots: u32,
    /// Where each slot and tag is (firmware_model::abi owns the arithmetic).
    layout: fifo::Layout,
    /// Next free position: the reservation counter the node's threads share.
    reserved: AtomicU64,
    /// Refusals already reported by [`TxFifo::flush`].
    refusals_seen: AtomicU64,
    doorbell: Arc<dyn Doorbell>,
    timeout: Duration,
}

/// Where one record (or padding) goes.
struct Planned<'a> {
    position: u64,
    header: TxRecordHeader,
    data: &'a [u8],
    /// The sender's virtual time, for a stamped record.
    vt: Option<u64>,
}

/// The time a record carries: the posting thread's virtual time as last
/// synced, in a predicted-time run (docs/virtual-time.md); none otherwise.
fn stamp() -> Option<u64> {
    vclock::enabled().then(vclock::stamp)
}

/// The header of a store of `len` bytes at `addr`, stamped or not.
fn store_header(addr: u64, len: usize, vt: Option<u64>) -> TxRecordHeader {
    TxRecordHeader {
        addr,
        len: len as u32,
        flags: if vt.is_some() { fifo::FLAG_VTIME } else { 0 },
    }
}

impl TxFifo {
    /// A FIFO over `mem` (at least `fifo::bytes(slots)`, zeroed, registered
    /// with the device by the caller). `timeout`: how long a post waits for
    /// room, and a flush for the device, before giving up.
    pub fn new(
        mem: DmaRegion,
        slots: u32,
        doorbell: Arc<dyn Doorbell>,
        timeout: Duration,
    ) -> Result<TxFifo> {
        let Some(layout) = fifo::Layout::new(slots) else {
            return Err(Error::FifoSize { slots });
        };
        let mem = mem.sub(0, fifo::bytes(slots))?;
        Ok(TxFifo {
            mem,
            slots,
            layout,
            reserved: AtomicU64::new(0),
            refusals_seen: AtomicU64::new(0),
            doorbell,
            timeout,
        })
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Guest-physical address of the FIFO (what SET_TX_FIFO names).
    pub fn gpa(&self) -> u64 {
        self.mem.gpa()
    }

    /// Positions the device has taken: stores before it are handed to the hub.
    pub fn consumed(&self) -> u64 {
        self.header_u64(fifo::header::CONSUMED)
    }

    /// Positions claimed so far (posted, or being written).
    pub fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Acquire)
    }

    /// The device's state of this FIFO.
    pub fn state(&self) -> Option<fifo::State> {
        fifo::State::from_u32(self.header_u32(fifo::header::STATE))
    }

    /// What the device has refused so far.
    pub fn refusals(&self) -> Refusal {
        Refusal {
            count: self.header_u64(fifo::header::REFUSED),
            status: self.header_u32(fifo::header::LAST_STATUS),
            detail: self.header_u32(fifo::header::LAST_DETAIL),
            position: self.header_u64(fifo::header::LAST_POSITION),
        }
    }

    fn header_u64(&self, off: usize) -> u64 {
        self.mem
            .atomic_u64(off)
            .map(|a| u64::from_le(a.load(Ordering::Acquire)))
            .unwrap_or(0)
    }

    fn header_u32(&self, off: usize) -> u32 {
        self.mem
            .atomic_u32(off)
            .map(|a| u32::from_le(a.load(Ordering::Acquire)))
            .unwrap_or(0)
    }

    /// Post one store; returns at once (the position after it). Data over
    /// 64 KiB goes as several records, adjacent in the ring.
    pub fn post(&self, addr: u64, data: &[u8]) -> Result<u64> {
        if data.len() > MAX_RECORD_DATA as usize {
            return self.post_all(&[(addr, data)]);
        }
        // The common case, without the batch's bookkeeping: claim, write,
        // commit (a padding record first if it would wrap).
        let vt = stamp();
        let header = store_header(addr, data.len(), vt);
        let need = TxRecordHeader::slots_with(header.len, vt.is_some());
        let ring = u64::from(self.slots);
        let mut from = self.reserved.load(Ordering::Relaxed);
        let (pad, at, end) = loop {
            let to_end = ring - from % ring;
            let (pad, at) = if need > to_end {
                (to_end, from + to_end)
            } else {
                (0, from)
            };
            let end = at + need;
            self.wait_for_room(end)?;
            match self.reserved.compare_exchange_weak(
                from,
                end,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break (pad, at, end),
                Err(now) => from = now,
            }
        };
        self.write_record(at, &header, vt, data)?;
        self.commit(at)?;
        if pad > 0 {
            self.mem.write(
                self.layout.slot_offset(from),
                &TxRecordHeader::pad(pad).to_bytes(),
            )?;
            self.commit(from)?;
        }
        self.ring_if_asked()?;
        Ok(end)
    }

    /// Write a record's header, its time if stamped, and its data.
    fn write_record(
        &self,
        at: u64,
        header: &TxRecordHeader,
        vt: Option<u64>,
        data: &[u8],
    ) -> Result<()> {
        let off = self.layout.slot_offset(at);
        self.mem.write(off, &header.to_bytes())?;
        if let Some(vt) = vt {
            self.mem
                .write(off + TX_RECORD_HEADER_SIZE, &vt.to_le_bytes())?;
        }
        if !data.is_empty() {
            let prefix = TxRecordHeader::prefix_bytes(vt.is_some());
            self.mem.write(off + prefix, data)?;
        }
        Ok(())
    }

    /// Write the tag that commits the record at `position`.
    fn commit(&self, position: u64) -> Result<()> {
        let tag = self.layout.tag(position);
        self.mem
            .atomic_u32(self.layout.tag_offset(position))?
            .store(tag.to_le(), Ordering::Release);
        Ok(())
    }

    /// Post stores in order, adjacent in the ring (as one write-buffer
    /// flush): the hub takes them together and merges those that continue
    /// one another. Returns the position after the last.
    pub fn post_all(&self, stores: &[Store<'_>]) -> Result<u64> {
        let mut records: Vec<Store<'_>> = Vec::with_capacity(stores.len());
        for &(addr, data) in stores {
            if data.len() > u32::MAX as usize {
                return Err(Error::StoreTooLarge { len: data.len() });
            }
            if data.is_empty() {
                // The device refuses it (EMPTY), as the interface defines.
                records.push((addr, data));
                continue;
            }
            for (k, piece) in data.chunks(MAX_RECORD_DATA as usize).enumerate() {
                records.push((addr + (k * MAX_RECORD_DATA as usize) as u64, piece));
            }
        }
        // A batch: the thread's clock is brought up to date for its stamps
        // (no gate: the poster may hold a lock the slowest thread needs).
        let vt = vclock::enabled().then(vclock::tick);
        // A group may take at most half the ring, so it always fits.
        let half = u64::from(self.slots / 2);
        let mut end = self.reserved();
        let mut start = 0;
        while start < records.len() {
            let mut taken = 0u64;
            let mut stop = start;
            while stop < records.len() {
                let s = TxRecordHeader::slots_with(records[stop].1.len() as u32, vt.is_some());
                if stop > start && taken + s > half {
                    break;
                }
                taken += s;
                stop += 1;
            }
            end = self.post_group(&records[start..stop], vt)?;
            start = stop;
        }
        Ok(end)
    }

    /// Post one store of 1 to [`MAX_RECORD_DATA`] bytes without allocating
    /// (what [`TxFifo::post_all`] does, planned on the stack): safe in a
    /// signal handler that interrupted code outside the allocator, as
    /// Cashmere's fault path is. Other sizes go through `post_all`.
    pub fn post_one(&self, addr: u64, data: &[u8]) -> Result<u64> {
        if data.is_empty() || data.len() > MAX_RECORD_DATA as usize {
            return self.post_all(&[(addr, data)]);
        }
        let ring = u64::from(self.slots);
        let vt = stamp();
        let need = TxRecordHeader::slots_with(data.len() as u32, vt.is_some());
        let mut from = self.reserved.load(Ordering::Relaxed);
        let (pad, at, end) = loop {
            let to_end = ring - from % ring;
            let (pad, at) = if need > to_end {
                (Some(to_end), from + to_end)
            } else {
                (None, from)
            };
            let end = at + need;
            self.wait_for_room(end)?;
            match self.reserved.compare_exchange_weak(
                from,
                end,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break (pad, at, end),
                Err(now) => from = now,
            }
        };
        let header = store_header(addr, data.len(), vt);
        self.write_record(at, &header, vt, data)?;
        if let Some(slots) = pad {
            self.mem.write(
                self.layout.slot_offset(from),
                &TxRecordHeader::pad(slots).to_bytes(),
            )?;
        }
        // Last to first, as post_group commits.
        self.mem
            .atomic_u32(self.layout.tag_offset(at))?
            .store(self.layout.tag(at).to_le(), Ordering::Release);
        if pad.is_some() {
            self.mem
                .atomic_u32(self.layout.tag_offset(from))?
                .store(self.layout.tag(from).to_le(), Ordering::Release);
        }
        self.ring_if_asked()?;
        Ok(end)
    }

    /// Claim room for `records` (with padding where the ring wraps), write
    /// them, commit them, ring the doorbell if the hub asked for it.
    fn post_group(&self, records: &[Store<'_>], vt: Option<u64>) -> Result<u64> {
        let mut plan: Vec<Planned<'_>> = Vec::with_capacity(records.len() + 1);
        let mut from = self.reserved.load(Ordering::Relaxed);
        let end = loop {
            plan.clear();
            let end = self.lay_out(from, records, vt, &mut plan);
            self.wait_for_room(end)?;
            match self.reserved.compare_exchange_weak(
                from,
                end,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break end,
                Err(now) => from = now,
            }
        };
        for p in &plan {
            self.write_record(p.position, &p.header, p.vt, p.data)?;
        }
        // Commit the last first: when the hub sees the first tag it finds
        // the whole group committed and takes (and merges) it in one go.
        for p in plan.iter().rev() {
            self.commit(p.position)?;
        }
        self.ring_if_asked()?;
        Ok(end)
    }

    /// Positions for `records` from `from`, padding to the end of the ring
    /// before a record that would wrap. Returns the position after them.
    fn lay_out<'a>(
        &self,
        from: u64,
        records: &[Store<'a>],
        vt: Option<u64>,
        plan: &mut Vec<Planned<'a>>,
    ) -> u64 {
        let ring = u64::from(self.slots);
        let mut at = from;
        for &(addr, data) in records {
            let need = TxRecordHeader::slots_with(data.len() as u32, vt.is_some());
            let to_end = ring - at % ring;
            if need > to_end {
                plan.push(Planned {
                    position: at,
                    header: TxRecordHeader::pad(to_end),
                    data: &[],
                    vt: None,
                });
                at += to_end;
            }
            plan.push(Planned {
                position: at,
                header: store_header(addr, data.len(), vt),
                data,
                vt,
            });
            at += need;
        }
        at
    }

    /// Wait until the ring has room up to position `end` (the hub drains it).
    fn wait_for_room(&self, end: u64) -> Result<()> {
        let ring = u64::from(self.slots);
        if end.saturating_sub(self.consumed()) <= ring {
            return Ok(());
        }
        // The hub may be asleep behind records that other threads posted
        // before it armed the doorbell: make sure it looks.
        self.ring_if_asked()?;
        vclock::wait_begin();
        let room = poll_until_with(WAIT_POLICY, self.timeout, || -> Result<Option<()>> {
            self.check_running()?;
            Ok((end.saturating_sub(self.consumed()) <= ring).then_some(()))
        });
        vclock::wait_end_quiet();
        room?.ok_or(Error::Timeout {
            what: "room in the transmit FIFO",
            after: self.timeout,
        })
    }

    /// After a commit: if the hub armed the doorbell (it is going to sleep),
    /// take it and kick. The full fence pairs with the hub's (it writes the
    /// doorbell, fences, looks at the tag): one of the two sees the other.
    fn ring_if_asked(&self) -> Result<()> {
        fence(Ordering::SeqCst);
        let bell = self.mem.atomic_u32(fifo::header::DOORBELL)?;
        if bell.load(Ordering::Relaxed) != 0 && bell.swap(0, Ordering::AcqRel) != 0 {
            self.doorbell.ring()?;
        }
        Ok(())
    }

    fn check_running(&self) -> Result<()> {
        match self.state() {
            Some(fifo::State::Broken) => {
                let r = self.refusals();
                Err(Error::FifoBroken {
                    status: r.status,
                    detail: r.detail,
                    position: r.position,
                })
            }
            _ => Ok(()),
        }
    }

    /// Wait until every store posted before this call has been handed to
    /// the hub (not: delivered; an ACK-page check proves that). Reports the
    /// first refusal the device made since the last flush, as
    /// [`Error::Refused`].
    pub fn flush(&self) -> Result<()> {
        let target = self.reserved();
        if self.consumed() < target {
            self.ring_if_asked()?;
            // The hub draining the ring is the emulator's own work: the
            // wait costs no virtual time (posted writes do not wait).
            vclock::wait_begin();
            let drained = poll_until_with(WAIT_POLICY, self.timeout, || -> Result<Option<()>> {
                self.check_running()?;
                Ok((self.consumed() >= target).then_some(()))
            });
            vclock::wait_end_quiet();
            drained?.ok_or(Error::Timeout {
                what: "the transmit FIFO to drain",
                after: self.timeout,
            })?;
        }
        self.check_running()?;
        self.take_refusal()
    }

    /// A refusal not reported yet, as an error (once).
    pub fn take_refusal(&self) -> Result<()> {
        let r = self.refusals();
        let seen = self.refusals_seen.load(Ordering::Acquire);
        if r.count > seen
            && self
                .refusals_seen
                .compare_exchange(seen, r.count, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            return Err(Error::Refused {
                request: "store",
                status: if r.status == 0 {
                    Status::DeviceError as u32
                } else {
                    r.status
                },
                detail: r.detail,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::MemfdMemory;
    use crate::transport::TransportError;
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
            let i = (*head % u64::from(slots)) as usize;
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
            assert_eq!(data[0], i as u8 + 1);
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
            let data: Vec<u8> = (0..k % 200 + 1).map(|i| (i + k) as u8).collect();
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
            let data: Vec<u8> = (0..k % 300 + 1).map(|i| i as u8).collect();
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
        let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
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
}
