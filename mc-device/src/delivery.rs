//! Deliveries: the hub's decisions performed as DMA into the receivers' RAM.
//!
//! For each packet the model names the receiver, page and offset, the range of
//! the sender's store, and when it is due. A delivery due now, to a receiver
//! with nothing older still waiting, is copied straight from the sender's
//! transmit FIFO into the receiver's bound frame: one copy, no buffer. Any
//! other (due later: link timing, a hub stall, skewed delivery) is copied out
//! of the FIFO into that receiver's [`PendingQueue`] and performed when due, in
//! the receiver's global order. Every copy goes packet by packet, front to
//! back, so a receiver that sees a packet also sees every earlier one (seed
//! 000 s.2.2: "all messages from a single source will be observed in the
//! order sent").
//!
//! Nothing here sleeps or waits: the hub thread decides when to look again.

use std::collections::VecDeque;

use firmware_model::{AckReport, Delivery, DeliverySink, ErrorKind, Event, Nanos};
use log::warn;

use crate::memory::{scatter_copy, scatter_read, MemGuard, Piece};
use crate::node::NodeState;

/// Something due at one receiver.
#[derive(Debug)]
pub(crate) enum Pending {
    /// Packet data, already copied out of the sender's FIFO.
    Data {
        page: u32,
        page_offset: u32,
        bytes: Box<[u8]>,
        /// The sender, whose queued bytes this counts against.
        src: usize,
    },
    /// The answer to an ACK-page store (at the writer).
    Ack(AckReport),
    /// An event for this receiver's driver (a page written, a CRC discard).
    Event(Event),
}

#[derive(Debug)]
pub(crate) struct PendingItem {
    pub(crate) at: Nanos,
    /// Position in the global order (for events: at most that of their
    /// packet), so an ACK answer waits for every earlier item everywhere.
    pub(crate) seq: u64,
    pub(crate) what: Pending,
}

/// One receiver's deliveries that are not due yet, in its global order.
#[derive(Debug, Default)]
pub(crate) struct PendingQueue {
    pub(crate) items: VecDeque<PendingItem>,
}

impl PendingQueue {
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn front(&self) -> Option<&PendingItem> {
        self.items.front()
    }

    pub(crate) fn pop(&mut self) -> Option<PendingItem> {
        self.items.pop_front()
    }

    fn push(&mut self, item: PendingItem) {
        self.items.push_back(item);
    }
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
    pub(crate) mems: &'a [Option<MemGuard>],
    /// Every node's device state (for the frames bound to each page).
    pub(crate) nodes: &'a [NodeState],
    pub(crate) queues: &'a mut [PendingQueue],
    /// Bytes each sender has waiting in queues (backpressure).
    pub(crate) queued_bytes: &'a mut [usize],
    /// Sender and the guest-physical runs holding the store's data.
    pub(crate) src: usize,
    pub(crate) src_data: &'a [Piece],
    /// Events due now, for the caller to dispatch.
    pub(crate) events: &'a mut Vec<Event>,
    pub(crate) packet: u32,
    pub(crate) failed: u32,
    /// Per receiver: packets due now, not yet copied (the caller's buffer,
    /// reused from store to store).
    pub(crate) runs: &'a mut Vec<Option<PendingCopy>>,
    /// The latest packet sequence seen (events carry none).
    pub(crate) seq: u64,
}

impl DmaDelivery<'_> {
    /// Copy receiver `r`'s run of packets due now, if any.
    fn flush(&mut self, r: usize) {
        let Some(run) = self.runs.get_mut(r).and_then(Option::take) else {
            return;
        };
        let (Some(Some(src_mem)), Some(Some(dst_mem))) =
            (self.mems.get(self.src), self.mems.get(r))
        else {
            return;
        };
        let Some(frames) = self.nodes.get(r).and_then(|n| n.frames.get(run.page)) else {
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
            self.failed += 1;
            warn!(
                "node{r}: DMA of {} bytes to page {} failed (guest memory changed?)",
                run.len, run.page
            );
        }
    }

    /// Perform every copy still pending. Call once the store is done.
    pub(crate) fn finish(&mut self) {
        for r in 0..self.runs.len() {
            self.flush(r);
        }
        self.runs.clear();
    }

    /// Deliveries to `r` go through its queue from now on in this store:
    /// something older is waiting there, or this one is not due yet.
    fn must_queue(&self, r: usize, at: Nanos) -> bool {
        at > self.now || self.queues.get(r).is_some_and(|q| !q.is_empty())
    }

    fn enqueue(&mut self, r: usize, item: PendingItem) {
        self.flush(r);
        if let Some(q) = self.queues.get_mut(r) {
            q.push(item);
        }
    }
}

impl DeliverySink for DmaDelivery<'_> {
    fn deliver(&mut self, d: &Delivery) {
        let r = d.receiver.index();
        self.seq = d.packet.seq;
        if self.must_queue(r, d.at) {
            let Some(Some(src_mem)) = self.mems.get(self.src) else {
                return;
            };
            let mut bytes = vec![0u8; d.packet.len as usize].into_boxed_slice();
            if !scatter_read(
                src_mem,
                self.src_data,
                u64::from(d.packet.store_offset),
                &mut bytes,
            ) {
                self.failed += 1;
                return;
            }
            if let Some(q) = self.queued_bytes.get_mut(self.src) {
                *q += bytes.len();
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
                    },
                },
            );
            return;
        }
        if r >= self.runs.len() {
            self.runs.resize(r + 1, None);
        }
        if let Some(run) = self.runs[r].as_mut() {
            if run.page == d.page.0
                && run.page_offset + run.len == d.page_offset
                && run.store_offset + run.len == d.packet.store_offset
            {
                run.len += d.packet.len;
                return;
            }
        }
        self.flush(r);
        self.runs[r] = Some(PendingCopy {
            page: d.page.0,
            page_offset: d.page_offset,
            store_offset: d.packet.store_offset,
            len: d.packet.len,
        });
    }

    /// ACK answers always wait in the writer's queue: the hub writes one
    /// only once every earlier item is done everywhere, after bringing the
    /// writer's status page up to date.
    fn ack(&mut self, a: &AckReport) {
        self.enqueue(
            a.writer.index(),
            PendingItem {
                at: a.at,
                seq: a.seq,
                what: Pending::Ack(a.clone()),
            },
        );
    }

    fn event(&mut self, e: &Event) {
        let at_receiver = match *e {
            Event::PageWritten { node, at, .. }
            | Event::Error {
                node,
                kind: ErrorKind::Crc,
                at,
            } => Some((node.index(), at)),
            _ => None,
        };
        match at_receiver {
            Some((r, at)) if self.must_queue(r, at) => {
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
            Some((r, _)) => {
                // After the data it reports on.
                self.flush(r);
                self.events.push(*e);
            }
            None => self.events.push(*e),
        }
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
