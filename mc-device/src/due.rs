//! Deliveries that were not due when the hub forwarded them (link timing, a
//! hub stall, skewed delivery): performed when due, each receiver's in its
//! global order.
//!
//! An ACK answer waits, beyond its own due time, until no item earlier in the
//! global order is still queued at any receiver: only then has every adapter
//! seen every earlier packet ("the error status of each MEMORY CHANNEL adapter
//! [is] written to successive locations", seed 004, Error Management). The
//! writer's status page is brought up to date just before the answer lands,
//! so the cluster error count a driver reads after the answer includes every
//! error up to the ACK (`imc_ckerrcnt`).

use firmware_model::{Event, Nanos};
use log::warn;

use crate::delivery::{Pending, PendingItem};
use crate::memory::scatter_write;
use crate::state::DeviceState;

impl DeviceState {
    /// Perform every queued item due by `now`. Returns how many were done
    /// and when the next one is due.
    pub(crate) fn deliver_due(&mut self, now: Nanos) -> (usize, Option<Nanos>) {
        let mut done = 0;
        let mut events = Vec::new();
        loop {
            let mut progress = false;
            // Data and events first: an ACK waits for all of them.
            for r in 0..self.pending.len() {
                while let Some(item) = self.pending[r].front() {
                    if item.at > now || matches!(item.what, Pending::Ack(_)) {
                        break;
                    }
                    let item = self.pending[r].pop().expect("front exists");
                    self.perform(r, item, &mut events);
                    done += 1;
                    progress = true;
                }
            }
            // ACK answers at the front of a queue, due, with nothing earlier
            // left anywhere.
            for r in 0..self.pending.len() {
                let ready = match self.pending[r].front() {
                    Some(PendingItem {
                        at,
                        seq,
                        what: Pending::Ack(_),
                    }) => *at <= now && !self.earlier_than(*seq, r),
                    _ => false,
                };
                if ready {
                    let item = self.pending[r].pop().expect("front exists");
                    self.perform(r, item, &mut events);
                    done += 1;
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
        self.dispatch(events);
        let next = self
            .pending
            .iter()
            .filter_map(|q| q.front())
            .map(|i| i.at)
            .min();
        (done, next)
    }

    /// Some receiver other than `except` still has an item before `seq`.
    fn earlier_than(&self, seq: u64, except: usize) -> bool {
        self.pending
            .iter()
            .enumerate()
            .any(|(r, q)| r != except && q.front().is_some_and(|i| i.seq < seq))
    }

    fn perform(&mut self, r: usize, item: PendingItem, events: &mut Vec<Event>) {
        let packet = self.hub.config().max_payload;
        match item.what {
            Pending::Data {
                page,
                page_offset,
                bytes,
                src,
            } => {
                if let Some(q) = self.queued_bytes.get_mut(src) {
                    *q = q.saturating_sub(bytes.len());
                }
                let node = &self.nodes[r];
                let (Some(atomic), Some(frames)) = (node.mem.as_ref(), node.frames.get(page))
                else {
                    // Unbound meanwhile: the receive mapping is gone.
                    return;
                };
                let mem = vm_memory::GuestAddressSpace::memory(atomic);
                if !scatter_write(&mem, frames, u64::from(page_offset), &bytes, packet) {
                    warn!(
                        "node{r}: DMA of {} bytes to page {page} failed (guest memory changed?)",
                        bytes.len()
                    );
                }
            }
            Pending::Ack(a) => {
                // The writer's status page first, then the answer: once the
                // answer is seen, the error count on the status page is current.
                self.status_catch_up(a.writer.index());
                self.refresh_status_pages();
                self.write_ack(&a);
            }
            Pending::Event(e) => {
                if let Event::Error { node, .. } = e {
                    // The adapter detected it: its own status page shows it.
                    self.status_catch_up(node.index());
                }
                events.push(e);
            }
        }
    }

    /// Write an ACK answer: every adapter's status word into the writer's
    /// frame of the ACK page.
    fn write_ack(&self, a: &firmware_model::AckReport) {
        let w = a.writer.index();
        let Some(node) = self.nodes.get(w) else {
            return;
        };
        let (Some(atomic), Some(frames)) = (node.mem.as_ref(), node.frames.get(a.page.0)) else {
            return;
        };
        let mem = vm_memory::GuestAddressSpace::memory(atomic);
        let bytes: Vec<u8> = a.words.iter().flat_map(|x| x.to_le_bytes()).collect();
        // One "packet": the answer lands whole.
        if !scatter_write(&mem, frames, u64::from(a.page_offset), &bytes, u32::MAX) {
            warn!("node{w}: ACK status write to {} failed", a.page);
        }
    }

    /// Drop what was on its way to `r` (its adapter crashed or its guest
    /// left): the bytes no longer count against their senders.
    pub(crate) fn drop_pending(&mut self, r: usize) {
        let Some(q) = self.pending.get_mut(r) else {
            return;
        };
        for item in q.items.drain(..) {
            if let Pending::Data { bytes, src, .. } = item.what {
                if let Some(b) = self.queued_bytes.get_mut(src) {
                    *b = b.saturating_sub(bytes.len());
                }
            }
        }
    }
}
