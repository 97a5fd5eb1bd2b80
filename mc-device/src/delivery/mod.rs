//! Deliveries: the hub's decisions performed as DMA into the receivers' RAM.
//!
//! A delivery due now, to a receiver with nothing older still waiting, is
//! copied straight from the sender's FIFO into the receiver's frames (dma.rs).
//! Any other is copied into that receiver's queue of [`Deliveries`] and
//! performed when due (due.rs), in the receiver's global order. The queues
//! also count, per sender, the bytes of its stores still waiting: the
//! transmit side stops taking from a sender whose count is too high, as a
//! full write buffer stalls the processor. That count changes only here,
//! when an item is queued and when it leaves.

mod dma;
mod due;

use std::collections::VecDeque;

use firmware_model::{AckReport, Delivery, DeliverySink, Event, Nanos, NodeId};

pub(crate) use dma::{DmaDelivery, DmaFailure, PendingCopy};
pub(crate) use due::Receivers;

/// Something due at one receiver.
#[derive(Debug)]
pub(crate) enum Pending {
    /// Packet data, already copied out of the sender's FIFO.
    Data {
        page: u32,
        page_offset: u32,
        bytes: Box<[u8]>,
        /// The sender, whose queued bytes this counts against.
        src: NodeId,
        /// Global address and virtual arrival of a stamped packet, for the
        /// receiver's arrival table (written before the data).
        stamp: Option<(u64, Nanos)>,
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

/// Every receiver's deliveries not yet due, and each sender's bytes in them.
#[derive(Debug, Default)]
pub(crate) struct Deliveries {
    /// Per receiver, in its global order.
    queues: Vec<VecDeque<PendingItem>>,
    /// Per sender: bytes of its stores waiting in `queues`.
    queued_bytes: Vec<usize>,
}

impl Deliveries {
    pub(crate) fn new(nodes: u8) -> Deliveries {
        let n = usize::from(nodes);
        Deliveries {
            queues: (0..n).map(|_| VecDeque::new()).collect(),
            queued_bytes: vec![0; n],
        }
    }

    /// Bytes of `src`'s stores waiting in any queue.
    pub(crate) fn queued_by(&self, src: NodeId) -> usize {
        self.queued_bytes.get(src.index()).copied().unwrap_or(0)
    }

    pub(crate) fn is_empty(&self, r: NodeId) -> bool {
        self.queues.get(r.index()).is_none_or(VecDeque::is_empty)
    }

    /// Nothing waits anywhere.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn all_empty(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }

    pub(crate) fn front(&self, r: NodeId) -> Option<&PendingItem> {
        self.queues.get(r.index()).and_then(VecDeque::front)
    }

    pub(crate) fn push(&mut self, r: NodeId, item: PendingItem) {
        if let Pending::Data { bytes, src, .. } = &item.what {
            if let Some(q) = self.queued_bytes.get_mut(src.index()) {
                *q += bytes.len();
            }
        }
        if let Some(q) = self.queues.get_mut(r.index()) {
            q.push_back(item);
        }
    }

    pub(crate) fn pop(&mut self, r: NodeId) -> Option<PendingItem> {
        let item = self.queues.get_mut(r.index())?.pop_front()?;
        self.release(&item);
        Some(item)
    }

    /// Drop what was on its way to `r` (its adapter crashed or its guest
    /// left): the bytes no longer count against their senders.
    pub(crate) fn drop_for(&mut self, r: NodeId) {
        let Some(q) = self.queues.get_mut(r.index()) else {
            return;
        };
        let items = std::mem::take(q);
        for item in &items {
            self.release(item);
        }
    }

    fn release(&mut self, item: &PendingItem) {
        if let Pending::Data { bytes, src, .. } = &item.what {
            if let Some(b) = self.queued_bytes.get_mut(src.index()) {
                *b = b.saturating_sub(bytes.len());
            }
        }
    }

    /// Some receiver other than `except` still has an item before `seq`.
    pub(crate) fn earlier_than(&self, seq: u64, except: NodeId) -> bool {
        self.queues
            .iter()
            .enumerate()
            .any(|(r, q)| r != except.index() && q.front().is_some_and(|i| i.seq < seq))
    }

    /// When the next item anywhere is due.
    pub(crate) fn next_due(&self) -> Option<Nanos> {
        self.queues
            .iter()
            .filter_map(VecDeque::front)
            .map(|i| i.at)
            .min()
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
