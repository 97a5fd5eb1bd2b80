//! Posting stores: claim slots with one compare-and-swap on the shared
//! reservation counter (padding where a record would wrap), write the
//! records, commit them by their tags, ring the doorbell if the hub asked.

use std::sync::atomic::Ordering;

use firmware_model::abi::{TxRecordHeader, MAX_RECORD_DATA, TX_RECORD_HEADER_SIZE};

use super::stamp::{record_len, stamp, store_header};
use super::{Store, TxFifo};
use crate::error::{Error, Result};
use crate::vclock;

/// Where one record (or padding) goes.
struct Planned<'a> {
    position: u64,
    header: TxRecordHeader,
    data: &'a [u8],
    /// The sender's virtual time, for a stamped record.
    vt: Option<u64>,
}

impl TxFifo {
    /// Post one store; returns at once (the position after it). Data over
    /// 64 KiB goes as several records, adjacent in the ring.
    pub fn post(&self, addr: u64, data: &[u8]) -> Result<u64> {
        if data.len() > MAX_RECORD_DATA as usize {
            return self.post_all(&[(addr, data)]);
        }
        // The common case, without the batch's bookkeeping.
        self.post_small(addr, data)
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
                let s = TxRecordHeader::slots_with(record_len(records[stop].1), vt.is_some());
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
        self.post_small(addr, data)
    }

    /// One record of at most [`MAX_RECORD_DATA`] bytes, planned on the
    /// stack: claim, write, commit (a padding record first if it would
    /// wrap). Returns the position after it.
    fn post_small(&self, addr: u64, data: &[u8]) -> Result<u64> {
        let ring = u64::from(self.slots);
        let vt = stamp();
        let header = store_header(addr, data, vt);
        let need = TxRecordHeader::slots_with(header.len, vt.is_some());
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
        self.write_record(at, &header, vt, data)?;
        if let Some(slots) = pad {
            self.mem.write(
                self.layout.slot_offset(from),
                &TxRecordHeader::pad(slots).to_bytes(),
            )?;
        }
        // Last to first, as post_group commits.
        self.commit(at)?;
        if pad.is_some() {
            self.commit(from)?;
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
            let need = TxRecordHeader::slots_with(record_len(data), vt.is_some());
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
                header: store_header(addr, data, vt),
                data,
                vt,
            });
            at += need;
        }
        at
    }
}
