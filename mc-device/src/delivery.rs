//! The delivery sink: performs the hub's decisions as DMA between guests.
//!
//! For each delivery the model names the receiver, page and offset, and the range
//! of the sender's store; this sink copies those bytes straight from the sender's
//! transmit buffer in its guest RAM into the receiver's bound frame. Nothing else
//! in any guest is written.

use std::time::{Duration, Instant};

use firmware_model::{AckReport, Delivery, DeliverySink, Event, Nanos};
use log::warn;

use crate::memory::{scatter_copy, MemGuard, Piece};
use crate::node::DmaMap;

/// Consecutive packets for one receiver, copied as one run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingCopy {
    page: u32,
    page_offset: u32,
    store_offset: u32,
    len: u32,
}

pub(crate) struct DmaDelivery<'a> {
    /// Each node's guest memory for this batch (None: no guest connected).
    pub(crate) mems: &'a [Option<MemGuard>],
    pub(crate) frames: Vec<&'a DmaMap>,
    /// Sender and the guest-physical runs holding the store's data.
    pub(crate) src: usize,
    pub(crate) src_data: &'a [Piece],
    pub(crate) events: &'a mut Vec<Event>,
    pub(crate) acks: &'a mut Vec<AckReport>,
    /// Set when deliveries wait for their modelled due time.
    pub(crate) throttle_from: Option<Instant>,
    pub(crate) failed: u32,
    /// Per receiver: packets not yet copied. A store becomes many packets
    /// (32 bytes each by default); consecutive ones for the same receiver and
    /// page are one copy, which is what makes large stores fast.
    pub(crate) pending: Vec<Option<PendingCopy>>,
}

/// Wait until `start + at`: sleep for long waits, spin (yielding) for short ones.
pub(crate) fn wait_until(start: Instant, at: Nanos) {
    let due = start + Duration::from_nanos(at.0);
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > Duration::from_micros(200) {
            std::thread::sleep(left - Duration::from_micros(100));
        } else {
            std::thread::yield_now();
        }
    }
}

impl DmaDelivery<'_> {
    fn throttle(&self, at: Nanos) {
        if let Some(start) = self.throttle_from {
            wait_until(start, at);
        }
    }

    /// Copy receiver `r`'s pending run, if any.
    fn flush(&mut self, r: usize) {
        let Some(run) = self.pending.get_mut(r).and_then(Option::take) else {
            return;
        };
        let (Some(Some(src_mem)), Some(Some(dst_mem))) =
            (self.mems.get(self.src), self.mems.get(r))
        else {
            return;
        };
        let Some(frames) = self.frames.get(r).and_then(|f| f.get(run.page)) else {
            // The model only delivers to receive-enabled pages, and the device
            // binds frames before enabling receive; nothing to write otherwise.
            return;
        };
        let ok = scatter_copy(
            src_mem,
            self.src_data,
            u64::from(run.store_offset),
            dst_mem,
            frames,
            u64::from(run.page_offset),
            u64::from(run.len),
        );
        if !ok {
            self.failed += 1;
            warn!(
                "node{r}: DMA of {} bytes to page {} failed (guest memory changed?)",
                run.len, run.page
            );
        }
    }

    /// Perform every delivery still pending. Call once the store is done.
    pub(crate) fn finish(&mut self) {
        for r in 0..self.pending.len() {
            self.flush(r);
        }
    }
}

impl DeliverySink for DmaDelivery<'_> {
    fn deliver(&mut self, d: &Delivery) {
        self.throttle(d.at);
        let r = d.receiver.index();
        if r >= self.pending.len() {
            self.pending.resize(r + 1, None);
        }
        if let Some(run) = self.pending[r].as_mut() {
            if run.page == d.page.0
                && run.page_offset + run.len == d.page_offset
                && run.store_offset + run.len == d.packet.store_offset
            {
                run.len += d.packet.len;
                return;
            }
        }
        self.flush(r);
        self.pending[r] = Some(PendingCopy {
            page: d.page.0,
            page_offset: d.page_offset,
            store_offset: d.packet.store_offset,
            len: d.packet.len,
        });
    }

    /// ACK answers are held back and written by the caller once the writer's
    /// status page shows every error counted up to the ACK (see state.rs).
    fn ack(&mut self, a: &AckReport) {
        self.throttle(a.at);
        self.acks.push(a.clone());
    }

    fn event(&mut self, e: &Event) {
        self.events.push(*e);
    }
}

/// A sink for operations that move no data (faults, protection errors).
#[derive(Default)]
pub(crate) struct EventCollector {
    pub(crate) events: Vec<Event>,
}

impl DeliverySink for EventCollector {
    fn deliver(&mut self, _: &Delivery) {}
    fn ack(&mut self, _: &AckReport) {}
    fn event(&mut self, e: &Event) {
        self.events.push(*e);
    }
}
