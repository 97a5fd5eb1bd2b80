//! Deliveries due now, performed as the hub decides them: for each packet
//! the model names the receiver, page and offset, the range of the sender's
//! store, and when it is due. One due now, to a receiver with nothing older
//! still waiting, is copied straight from the sender's transmit FIFO into the
//! receiver's bound frame: one copy, no buffer. Any other (due later: link
//! timing, a hub stall, skewed delivery) is copied out of the FIFO into that
//! receiver's queue ([`Deliveries`]). Every copy goes packet by packet, front
//! to back, so a receiver that sees a packet also sees every earlier one (seed
//! 000 s.2.2: "all messages from a single source will be observed in the
//! order sent").
//!
//! Nothing here sleeps or waits: the hub thread decides when to look again.

use firmware_model::{
    AckReport, Delivery, DeliverySink, ErrorKind, Event, Nanos, NodeId, PacketRun,
};

use super::{Deliveries, Pending, PendingItem};
use crate::memory::{scatter_copy, scatter_read, Mems, Piece};
use crate::node::NodeState;

/// A DMA into a receiver's frames that failed (its memory changed under a
/// bound frame), for the device state to report on that node's behalf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DmaFailure {
    pub(crate) node: NodeId,
    pub(crate) page: u32,
    pub(crate) len: u64,
}

/// Consecutive packets for one receiver, copied as one front-to-back run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingCopy {
    page: u32,
    page_offset: u32,
    store_offset: u32,
    len: u32,
}

/// The sink the hub hands one store's decisions to.
pub(crate) struct DmaDelivery<'a> {
    pub(crate) now: Nanos,
    /// Each node's guest memory for this pass (None: no guest connected).
    pub(crate) mems: &'a Mems,
    /// Every node's device state (for the frames bound to each page).
    pub(crate) nodes: &'a [NodeState],
    pub(crate) queues: &'a mut Deliveries,
    /// Sender and the guest-physical runs holding the store's data.
    pub(crate) src: NodeId,
    pub(crate) src_data: &'a [Piece],
    /// Events due now, for the caller to dispatch.
    pub(crate) events: &'a mut Vec<Event>,
    pub(crate) packet: u32,
    /// DMA that failed, for the caller to report.
    pub(crate) failures: &'a mut Vec<DmaFailure>,
    /// Per receiver: packets due now, not yet copied (the caller's buffer,
    /// reused from store to store).
    pub(crate) runs: &'a mut Vec<Option<PendingCopy>>,
    /// The latest packet sequence seen (events carry none).
    pub(crate) seq: u64,
}

impl DmaDelivery<'_> {
    /// Copy receiver `r`'s run of packets due now, if any.
    fn flush(&mut self, r: NodeId) {
        let Some(run) = self.runs.get_mut(r.index()).and_then(Option::take) else {
            return;
        };
        let (Some(src_mem), Some(dst_mem)) = (self.mems.get(self.src), self.mems.get(r)) else {
            return;
        };
        let Some(frames) = self.nodes.get(r.index()).and_then(|n| n.frames(run.page)) else {
            // The model only delivers to receive-enabled pages, and the device
            // binds frames before enabling receive; nothing to write otherwise.
            return;
        };
        if !scatter_copy(
            src_mem,
            self.src_data,
            u64::from(run.store_offset),
            dst_mem,
            frames,
            u64::from(run.page_offset),
            u64::from(run.len),
            self.packet,
        ) {
            self.failures.push(DmaFailure {
                node: r,
                page: run.page,
                len: u64::from(run.len),
            });
        }
    }

    /// Perform every copy still pending. Call once the store is done.
    pub(crate) fn finish(&mut self) {
        for r in NodeId::all(u8::try_from(self.runs.len()).unwrap_or(u8::MAX)) {
            self.flush(r);
        }
        self.runs.clear();
    }

    /// Deliveries to `r` go through its queue from now on in this store:
    /// something older is waiting there, or this one is not due yet.
    fn must_queue(&self, r: NodeId, at: Nanos) -> bool {
        at > self.now || !self.queues.is_empty(r)
    }

    /// Write a stamped packet's virtual arrival into `r`'s arrival table,
    /// before its data is copied (node/arrival.rs).
    fn stamp(&self, r: NodeId, d: &Delivery) {
        let (Some(vt), Some(mem)) = (d.vt, self.mems.get(r)) else {
            return;
        };
        if let Some(t) = self.nodes.get(r.index()).and_then(NodeState::arrival) {
            t.stamp(mem, d.packet.addr.0, d.packet.len, vt.0);
        }
    }

    fn enqueue(&mut self, r: NodeId, item: PendingItem) {
        self.flush(r);
        self.queues.push(r, item);
    }
}

impl DmaDelivery<'_> {
    /// Extend receiver `r`'s run of bytes due now by `len` bytes of the
    /// store at `store_offset`, for `page` at `page_offset`; copies the run
    /// so far first if this does not continue it.
    fn extend_run(&mut self, r: NodeId, page: u32, page_offset: u32, store_offset: u32, len: u32) {
        let i = r.index();
        if i >= self.runs.len() {
            self.runs.resize(i + 1, None);
        }
        if let Some(run) = self.runs[i].as_mut() {
            if run.page == page
                && run.page_offset + run.len == page_offset
                && run.store_offset + run.len == store_offset
            {
                run.len += len;
                return;
            }
        }
        self.flush(r);
        self.runs[i] = Some(PendingCopy {
            page,
            page_offset,
            store_offset,
            len,
        });
    }
}

impl DeliverySink for DmaDelivery<'_> {
    /// A run due now at a receiver with nothing older waiting joins its
    /// copy whole (one copy for the run, packet order kept by the copy,
    /// memory.rs); one that must wait is queued packet by packet, as
    /// `deliver` queues each.
    fn deliver_run(&mut self, run: &PacketRun, to: &[(NodeId, Nanos)]) {
        let last_seq = run.first_seq + u64::from(run.packets.saturating_sub(1));
        for &(r, at) in to {
            if self.must_queue(r, at) {
                for (packet, page_offset) in run.packets() {
                    self.deliver(&Delivery {
                        packet,
                        receiver: r,
                        page: run.page,
                        page_offset,
                        at,
                        vt: None,
                    });
                }
            } else {
                self.extend_run(r, run.page.0, run.page_offset, run.store_offset, run.len);
            }
        }
        self.seq = self.seq.max(last_seq);
    }

    fn deliver(&mut self, d: &Delivery) {
        let r = d.receiver;
        self.seq = d.packet.seq;
        if self.must_queue(r, d.at) {
            let Some(src_mem) = self.mems.get(self.src) else {
                return;
            };
            let mut bytes = vec![0u8; d.packet.len as usize].into_boxed_slice();
            if !scatter_read(
                src_mem,
                self.src_data,
                u64::from(d.packet.store_offset),
                &mut bytes,
            ) {
                // The sender's own FIFO, checked when the record was taken.
                return;
            }
            let src = self.src;
            self.enqueue(
                r,
                PendingItem {
                    at: d.at,
                    seq: d.packet.seq,
                    what: Pending::Data {
                        page: d.page.0,
                        page_offset: d.page_offset,
                        bytes,
                        src,
                        stamp: d.vt.map(|vt| (d.packet.addr.0, vt)),
                    },
                },
            );
            return;
        }
        // Before the copy, which flush() makes later.
        self.stamp(r, d);
        self.extend_run(
            r,
            d.page.0,
            d.page_offset,
            d.packet.store_offset,
            d.packet.len,
        );
    }

    /// ACK answers always wait in the writer's queue: the hub writes one
    /// only once every earlier item is done everywhere, after bringing the
    /// writer's status page up to date.
    fn ack(&mut self, a: &AckReport) {
        self.enqueue(
            a.writer,
            PendingItem {
                at: a.at,
                seq: a.seq,
                what: Pending::Ack(a.clone()),
            },
        );
    }

    /// A receiver's own CRC discard always goes through its queue, even
    /// when due now: its status page must show the error before any later
    /// packet's data is visible to it (so a receiver that compares the
    /// count with one the writer saved detects its own loss, seed 004), and
    /// the page is written when the queue reaches it (due.rs), ahead of
    /// everything queued behind it.
    fn event(&mut self, e: &Event) {
        let at_receiver = match *e {
            Event::PageWritten { node, at, .. } => Some((node, at, false)),
            Event::Error {
                node,
                kind: ErrorKind::Crc,
                at,
            } => Some((node, at, true)),
            _ => None,
        };
        match at_receiver {
            Some((r, at, crc)) if crc || self.must_queue(r, at) => {
                let seq = self.seq;
                self.enqueue(
                    r,
                    PendingItem {
                        at,
                        seq,
                        what: Pending::Event(*e),
                    },
                );
            }
            Some((r, _, _)) => {
                // After the data it reports on.
                self.flush(r);
                self.events.push(*e);
            }
            None => self.events.push(*e),
        }
    }
}
