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

use firmware_model::{Event, Hub, Nanos, NodeId};

use super::{Deliveries, DmaFailure, Pending, PendingItem};
use crate::cluster_clock::ClusterClock;
use crate::memory::{scatter_write, Mems};
use crate::node::NodeState;
use crate::status::{self, StatusBoard};

impl Deliveries {
    /// Perform every queued item due by `now`, through `mems` (this pass's
    /// memory snapshot) into the receivers `to`. Returns how many were done
    /// and when the next one is due.
    pub(crate) fn deliver_due(
        &mut self,
        now: Nanos,
        mems: &Mems,
        to: &mut Receivers<'_>,
    ) -> (usize, Option<Nanos>) {
        let mut done = 0;
        let ids = NodeId::all(to.hub.nodes());
        loop {
            let mut progress = false;
            // Data and events first: an ACK waits for all of them.
            for r in ids.clone() {
                while let Some(item) = self.front(r) {
                    if item.at > now || matches!(item.what, Pending::Ack(_)) {
                        break;
                    }
                    if let Some(item) = self.pop(r) {
                        to.perform(r, item, mems);
                    }
                    done += 1;
                    progress = true;
                }
            }
            // ACK answers at the front of a queue, due, with nothing earlier
            // left anywhere.
            for r in ids.clone() {
                let ready = match self.front(r) {
                    Some(PendingItem {
                        at,
                        seq,
                        what: Pending::Ack(_),
                    }) => *at <= now && !self.earlier_than(*seq, r),
                    _ => false,
                };
                if ready {
                    if let Some(item) = self.pop(r) {
                        to.perform(r, item, mems);
                    }
                    done += 1;
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
        (done, self.next_due())
    }
}

/// What performing a queued item touches besides the queues: the receivers,
/// the counts their status pages show, and the events and failed DMA left
/// for the device state to hand out and report.
pub(crate) struct Receivers<'a> {
    hub: &'a mut Hub,
    nodes: &'a mut [NodeState],
    status: &'a mut StatusBoard,
    clock: ClusterClock,
    events: Vec<Event>,
    failures: Vec<DmaFailure>,
}

impl<'a> Receivers<'a> {
    pub(crate) fn new(
        hub: &'a mut Hub,
        nodes: &'a mut [NodeState],
        status: &'a mut StatusBoard,
        clock: ClusterClock,
    ) -> Self {
        Receivers {
            hub,
            nodes,
            status,
            clock,
            events: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// The events due (for their drivers) and the DMA that failed.
    pub(crate) fn finish(self) -> (Vec<Event>, Vec<DmaFailure>) {
        (self.events, self.failures)
    }

    /// `id` learns the current error count, and every status page is
    /// brought up to date.
    fn catch_up(&mut self, id: NodeId) {
        if let Some(node) = self.nodes.get_mut(id.index()) {
            status::catch_up(self.hub, node);
        }
        self.status.refresh(self.hub, self.nodes, self.clock);
    }

    fn perform(&mut self, r: NodeId, item: PendingItem, mems: &Mems) {
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
                    self.failures.push(DmaFailure {
                        node: r,
                        page,
                        len: bytes.len() as u64,
                    });
                }
            }
            Pending::Ack(a) => {
                // The writer's status page first, then the answer: once the
                // answer is seen, the error count on the status page is current.
                self.catch_up(a.writer);
                if let Some(f) = self.write_ack(&a, mems) {
                    self.failures.push(f);
                }
            }
            Pending::Event(e) => {
                if let Event::Error { node, .. } = e {
                    // The adapter detected it: its own status page shows it
                    // before anything queued after it lands.
                    self.catch_up(node);
                }
                self.events.push(e);
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
