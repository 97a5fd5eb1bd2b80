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

use firmware_model::{Event, Nanos, NodeId};

use super::DeviceState;
use crate::delivery::{DmaFailure, Pending, PendingItem};
use crate::memory::{scatter_write, Mems};

impl DeviceState {
    /// Perform every queued item due by `now`, through `mems` (this pass's
    /// memory snapshot). Returns how many were done and when the next one is
    /// due.
    pub(crate) fn deliver_due(&mut self, now: Nanos, mems: &Mems) -> (usize, Option<Nanos>) {
        let mut done = 0;
        let mut events = Vec::new();
        let mut failures = Vec::new();
        let ids = NodeId::all(self.hub.nodes());
        loop {
            let mut progress = false;
            // Data and events first: an ACK waits for all of them.
            for r in ids.clone() {
                while let Some(item) = self.deliveries.front(r) {
                    if item.at > now || matches!(item.what, Pending::Ack(_)) {
                        break;
                    }
                    if let Some(item) = self.deliveries.pop(r) {
                        self.perform(r, item, mems, &mut events, &mut failures);
                    }
                    done += 1;
                    progress = true;
                }
            }
            // ACK answers at the front of a queue, due, with nothing earlier
            // left anywhere.
            for r in ids.clone() {
                let ready = match self.deliveries.front(r) {
                    Some(PendingItem {
                        at,
                        seq,
                        what: Pending::Ack(_),
                    }) => *at <= now && !self.deliveries.earlier_than(*seq, r),
                    _ => false,
                };
                if ready {
                    if let Some(item) = self.deliveries.pop(r) {
                        self.perform(r, item, mems, &mut events, &mut failures);
                    }
                    done += 1;
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
        self.dispatch(events);
        self.report_dma_failures(&failures);
        (done, self.deliveries.next_due())
    }

    fn perform(
        &mut self,
        r: NodeId,
        item: PendingItem,
        mems: &Mems,
        events: &mut Vec<Event>,
        failures: &mut Vec<DmaFailure>,
    ) {
        let packet = self.hub.config().max_payload;
        match item.what {
            Pending::Data {
                page,
                page_offset,
                bytes,
                stamp,
                ..
            } => {
                let (Some(mem), Some(frames)) = (mems.get(r), self.nodes[r.index()].frames(page))
                else {
                    // Unbound meanwhile: the receive mapping is gone.
                    return;
                };
                if let (Some((addr, vt)), Some(t)) = (stamp, self.nodes[r.index()].arrival()) {
                    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
                    t.stamp(mem, addr, len, vt.0);
                }
                if !scatter_write(mem, frames, u64::from(page_offset), &bytes, packet) {
                    failures.push(DmaFailure {
                        node: r,
                        page,
                        len: bytes.len() as u64,
                    });
                }
            }
            Pending::Ack(a) => {
                // The writer's status page first, then the answer: once the
                // answer is seen, the error count on the status page is current.
                self.status_catch_up(a.writer);
                self.refresh_status_pages();
                if let Some(f) = self.write_ack(&a, mems) {
                    failures.push(f);
                }
            }
            Pending::Event(e) => {
                if let Event::Error { node, .. } = e {
                    // The adapter detected it: its own status page shows it
                    // before anything queued after it lands.
                    self.status_catch_up(node);
                    self.refresh_status_pages();
                }
                events.push(e);
            }
        }
    }

    /// Write an ACK answer: every adapter's status word into the writer's
    /// frame of the ACK page.
    fn write_ack(&self, a: &firmware_model::AckReport, mems: &Mems) -> Option<DmaFailure> {
        let node = self.nodes.get(a.writer.index())?;
        let (Some(mem), Some(frames)) = (mems.get(a.writer), node.frames(a.page.0)) else {
            return None;
        };
        let bytes: Vec<u8> = a.words.iter().flat_map(|x| x.to_le_bytes()).collect();
        // One "packet": the answer lands whole.
        (!scatter_write(mem, frames, u64::from(a.page_offset), &bytes, u32::MAX)).then_some(
            DmaFailure {
                node: a.writer,
                page: a.page.0,
                len: bytes.len() as u64,
            },
        )
    }
}
