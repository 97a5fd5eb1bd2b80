//! What the hub decides, handed to the caller one action at a time.
//!
//! The model owns no guest memory. For each packet it tells a [`DeliverySink`]
//! which receiver gets which bytes of the sender's store and where, in global
//! order; the device then copies straight from the sender's memory into each
//! receiver's memory, with no intermediate buffer.

use crate::fault::FaultCommand;
use crate::packet::{Packet, PacketRun};
use crate::types::{Nanos, NodeId, NodeSet, PageNumber};

/// One packet reaching one receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub packet: Packet,
    /// The adapter receiving it (the sender itself for loopback).
    pub receiver: NodeId,
    /// Global page it writes.
    pub page: PageNumber,
    /// Byte offset within that page.
    pub page_offset: u32,
    /// When it is due at the receiver under the link timing model.
    pub at: Nanos,
    /// Its virtual arrival, when its store carried the sender's virtual
    /// time (`Hub::transmit_stamped`, vtime/): alone on the network
    /// `vtime::arrival`, later where its links were busy. `None` otherwise.
    pub vt: Option<Nanos>,
}

/// The answer to a store on an ACK page: every adapter's status word, to be
/// written to the writer's receive mapping of that page at `page_offset`,
/// word i for node i.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckReport {
    /// Position in the global order: every packet with a lower sequence number
    /// has been delivered (or lost) before this report.
    pub seq: u64,
    pub writer: NodeId,
    pub page: PageNumber,
    pub page_offset: u32,
    pub words: Vec<u32>,
    pub at: Nanos,
}

/// Why an adapter reports an error event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A packet failed its CRC check and was discarded.
    Crc,
    /// The adapter's link to the hub went down.
    LinkDown,
    /// A store was refused (not enabled for transmit, out of range).
    Protection,
}

/// Device-to-driver notifications, one per receiving adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A store wrote an interrupt-on-receive page (one event per store and page).
    PageWritten {
        node: NodeId,
        page: PageNumber,
        source: NodeId,
        at: Nanos,
    },
    /// The adapter recorded an error.
    Error {
        node: NodeId,
        kind: ErrorKind,
        at: Nanos,
    },
    /// The adapter's link changed state.
    LinkState { node: NodeId, up: bool, at: Nanos },
    /// Cluster membership changed (crash or rejoin).
    MembershipChanged {
        node: NodeId,
        epoch: u64,
        members: NodeSet,
        at: Nanos,
    },
    /// A scheduled fault took effect (reported once, to node-less observers).
    FaultApplied { command: FaultCommand, at: Nanos },
}

impl Event {
    /// The adapter whose event queue this goes to, if any.
    pub fn node(&self) -> Option<NodeId> {
        match *self {
            Event::PageWritten { node, .. }
            | Event::Error { node, .. }
            | Event::LinkState { node, .. }
            | Event::MembershipChanged { node, .. } => Some(node),
            Event::FaultApplied { .. } => None,
        }
    }
}

/// Receives the hub's decisions in global order.
pub trait DeliverySink {
    /// Copy `packet.len` bytes from offset `packet.store_offset` of the store
    /// being transmitted into `receiver`'s frame for `page` at `page_offset`.
    fn deliver(&mut self, delivery: &Delivery);
    /// A run of packets, each to every receiver in `to` (receiver, due
    /// time), where the hub's outcome is the same as packet by packet: no
    /// fault could hit them, none carries a virtual time, and each
    /// receiver's due time is the same for all of them. Means exactly what
    /// calling [`DeliverySink::deliver`] for each packet in order, and for
    /// each packet each receiver in order, means (which is what this does
    /// unless a sink does better, e.g. copies the run at once).
    fn deliver_run(&mut self, run: &PacketRun, to: &[(NodeId, Nanos)]) {
        for (packet, page_offset) in run.packets() {
            for &(receiver, at) in to {
                self.deliver(&Delivery {
                    packet,
                    receiver,
                    page: run.page,
                    page_offset,
                    at,
                    vt: None,
                });
            }
        }
    }
    /// Write an ACK page's status words.
    fn ack(&mut self, report: &AckReport);
    /// Queue an event for a driver (or an observer).
    fn event(&mut self, event: &Event);
}

/// One recorded action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SinkRecord {
    Deliver(Delivery),
    Ack(AckReport),
    Event(Event),
}

/// A sink that records everything, in order: for tests, traces and the demo.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordingSink {
    pub records: Vec<SinkRecord>,
}

impl RecordingSink {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn deliveries(&self) -> impl Iterator<Item = &Delivery> {
        self.records.iter().filter_map(|r| match r {
            SinkRecord::Deliver(d) => Some(d),
            _ => None,
        })
    }

    pub fn acks(&self) -> impl Iterator<Item = &AckReport> {
        self.records.iter().filter_map(|r| match r {
            SinkRecord::Ack(a) => Some(a),
            _ => None,
        })
    }

    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.records.iter().filter_map(|r| match r {
            SinkRecord::Event(e) => Some(e),
            _ => None,
        })
    }

    /// Deliveries to one receiver, in the order it saw them.
    pub fn received_by(&self, node: NodeId) -> impl Iterator<Item = &Delivery> {
        self.deliveries().filter(move |d| d.receiver == node)
    }
}

impl DeliverySink for RecordingSink {
    fn deliver(&mut self, delivery: &Delivery) {
        self.records.push(SinkRecord::Deliver(*delivery));
    }

    fn ack(&mut self, report: &AckReport) {
        self.records.push(SinkRecord::Ack(report.clone()));
    }

    fn event(&mut self, event: &Event) {
        self.records.push(SinkRecord::Event(*event));
    }
}
