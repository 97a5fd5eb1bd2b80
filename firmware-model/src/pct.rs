//! The page control table: one entry per page of global address space, per adapter.
//!
//! Seed 004 ("MEMORY CHANNEL Overview"): the PCT "indicates for each page of MEMORY
//! CHANNEL global address space if that page is mapped locally and whether it is
//! mapped for transmission or reception". This model adds the per-page options the
//! seeds use: loopback, interrupt on receive (notification channels), ACK pages, and
//! Memory Channel 2's point-to-point destination.

use std::fmt;

use crate::types::{NodeId, PageNumber};

/// Where a transmit-enabled page's packets go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Destination {
    /// Every node whose PCT has the page enabled for receive (the sender only with
    /// loopback).
    Broadcast,
    /// Only this node (Memory Channel 2 point-to-point), plus the sender with loopback.
    Node(NodeId),
}

/// One page's entry in one adapter's page control table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PctEntry {
    /// Transmit enable and destination; `None` = stores to the page are refused.
    pub transmit: Option<Destination>,
    /// Receive enable: packets for this page are DMA'd into the frame the device
    /// bound for it.
    pub receive: bool,
    /// Reflect this node's own transmissions back to its receive mapping.
    pub loopback: bool,
    /// Raise a notification event when a packet for this page is received.
    pub interrupt: bool,
    /// ACK page: a store to it collects every adapter's error status.
    pub ack: bool,
}

/// PCT entry encoding used on the control queue (see docs/device.md).
pub mod bits {
    pub const TX_ENABLE: u32 = 1 << 0;
    pub const TX_POINT_TO_POINT: u32 = 1 << 1;
    pub const RX_ENABLE: u32 = 1 << 2;
    pub const LOOPBACK: u32 = 1 << 3;
    pub const INTERRUPT: u32 = 1 << 4;
    pub const ACK_PAGE: u32 = 1 << 5;
    pub const DEST_SHIFT: u32 = 8;
    pub const DEST_MASK: u32 = 0x3f << DEST_SHIFT;
    pub const DEFINED: u32 =
        TX_ENABLE | TX_POINT_TO_POINT | RX_ENABLE | LOOPBACK | INTERRUPT | ACK_PAGE | DEST_MASK;
}

/// A PCT entry that the adapter refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PctError {
    #[error("reserved PCT bits set: {0:#x}")]
    ReservedBits(u32),
    #[error("a destination node is only meaningful with point-to-point transmit")]
    DestinationWithoutPointToPoint,
    #[error("point-to-point needs transmit enable")]
    PointToPointWithoutTransmit,
    #[error("loopback needs transmit enable (it reflects this node's own writes)")]
    LoopbackWithoutTransmit,
    #[error("interrupt-on-receive needs receive enable")]
    InterruptWithoutReceive,
    #[error("an ACK page needs transmit enable (the trigger store) and receive enable (where the statuses land)")]
    AckNeedsTransmitAndReceive,
    #[error("an ACK page queries every adapter: it must be broadcast, not point-to-point")]
    AckPointToPoint,
    #[error("point-to-point destination {dest} is this node itself: use loopback")]
    DestinationIsSelf { dest: NodeId },
    #[error("point-to-point destination {dest} is not in the cluster of {nodes} nodes")]
    DestinationOutOfRange { dest: NodeId, nodes: u8 },
    #[error("{page} is outside the global address space of {pages} pages")]
    PageOutOfRange { page: PageNumber, pages: u32 },
}

impl PctEntry {
    /// Nothing enabled (the state after reset).
    pub const DISABLED: PctEntry = PctEntry {
        transmit: None,
        receive: false,
        loopback: false,
        interrupt: false,
        ack: false,
    };

    /// Transmit (broadcast), nothing else.
    pub fn transmit_broadcast() -> Self {
        PctEntry {
            transmit: Some(Destination::Broadcast),
            ..Self::DISABLED
        }
    }

    /// Transmit point-to-point to `dest`.
    pub fn transmit_to(dest: NodeId) -> Self {
        PctEntry {
            transmit: Some(Destination::Node(dest)),
            ..Self::DISABLED
        }
    }

    /// Receive only.
    pub fn receive() -> Self {
        PctEntry {
            receive: true,
            ..Self::DISABLED
        }
    }

    /// Builder: also receive.
    pub fn with_receive(mut self) -> Self {
        self.receive = true;
        self
    }

    /// Builder: also loop back.
    pub fn with_loopback(mut self) -> Self {
        self.loopback = true;
        self
    }

    /// Builder: also notify on receive.
    pub fn with_interrupt(mut self) -> Self {
        self.interrupt = true;
        self
    }

    /// An ACK page: broadcast transmit and receive.
    pub fn ack_page() -> Self {
        PctEntry {
            transmit: Some(Destination::Broadcast),
            receive: true,
            ack: true,
            ..Self::DISABLED
        }
    }

    /// Encode as the control queue's 32-bit word.
    pub fn to_bits(&self) -> u32 {
        let mut w = 0;
        match self.transmit {
            None => {}
            Some(Destination::Broadcast) => w |= bits::TX_ENABLE,
            Some(Destination::Node(n)) => {
                w |= bits::TX_ENABLE | bits::TX_POINT_TO_POINT;
                w |= (u32::from(n.0) << bits::DEST_SHIFT) & bits::DEST_MASK;
            }
        }
        if self.receive {
            w |= bits::RX_ENABLE;
        }
        if self.loopback {
            w |= bits::LOOPBACK;
        }
        if self.interrupt {
            w |= bits::INTERRUPT;
        }
        if self.ack {
            w |= bits::ACK_PAGE;
        }
        w
    }

    /// Decode a control-queue word; structural errors only (see [`PctEntry::validate`]).
    pub fn from_bits(w: u32) -> Result<Self, PctError> {
        if w & !bits::DEFINED != 0 {
            return Err(PctError::ReservedBits(w & !bits::DEFINED));
        }
        let tx = w & bits::TX_ENABLE != 0;
        let p2p = w & bits::TX_POINT_TO_POINT != 0;
        let dest = ((w & bits::DEST_MASK) >> bits::DEST_SHIFT) as u8;
        let transmit = match (tx, p2p) {
            (false, false) => None,
            (false, true) => return Err(PctError::PointToPointWithoutTransmit),
            (true, false) => Some(Destination::Broadcast),
            (true, true) => Some(Destination::Node(NodeId(dest))),
        };
        if dest != 0 && !p2p {
            return Err(PctError::DestinationWithoutPointToPoint);
        }
        Ok(PctEntry {
            transmit,
            receive: w & bits::RX_ENABLE != 0,
            loopback: w & bits::LOOPBACK != 0,
            interrupt: w & bits::INTERRUPT != 0,
            ack: w & bits::ACK_PAGE != 0,
        })
    }

    /// Check the entry for adapter `owner` in a cluster of `nodes`.
    pub fn validate(&self, owner: NodeId, nodes: u8) -> Result<(), PctError> {
        if self.loopback && self.transmit.is_none() {
            return Err(PctError::LoopbackWithoutTransmit);
        }
        if self.interrupt && !self.receive {
            return Err(PctError::InterruptWithoutReceive);
        }
        if self.ack {
            match self.transmit {
                Some(Destination::Broadcast) if self.receive => {}
                Some(Destination::Node(_)) if self.receive => {
                    return Err(PctError::AckPointToPoint)
                }
                _ => return Err(PctError::AckNeedsTransmitAndReceive),
            }
        }
        if let Some(Destination::Node(dest)) = self.transmit {
            if dest.0 >= nodes {
                return Err(PctError::DestinationOutOfRange { dest, nodes });
            }
            if dest == owner {
                return Err(PctError::DestinationIsSelf { dest });
            }
        }
        Ok(())
    }
}

impl fmt::Display for PctEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        match self.transmit {
            None => {}
            Some(Destination::Broadcast) => parts.push("tx:broadcast".to_string()),
            Some(Destination::Node(n)) => parts.push(format!("tx:{n}")),
        }
        if self.receive {
            parts.push("rx".into());
        }
        if self.loopback {
            parts.push("loopback".into());
        }
        if self.interrupt {
            parts.push("interrupt".into());
        }
        if self.ack {
            parts.push("ack".into());
        }
        if parts.is_empty() {
            f.write_str("disabled")
        } else {
            f.write_str(&parts.join(","))
        }
    }
}

/// One adapter's page control table, stored as encoded words (4 bytes a page).
#[derive(Clone, Debug)]
pub struct PageControlTable {
    owner: NodeId,
    nodes: u8,
    entries: Vec<u32>,
}

impl PageControlTable {
    /// An all-disabled table for adapter `owner` in a cluster of `nodes`.
    pub fn new(owner: NodeId, nodes: u8, pages: u32) -> Self {
        PageControlTable {
            owner,
            nodes,
            entries: vec![0; pages as usize],
        }
    }

    pub fn pages(&self) -> u32 {
        crate::saturating_u32(self.entries.len() as u64)
    }

    fn check_page(&self, page: PageNumber) -> Result<usize, PctError> {
        if page.index() < self.entries.len() {
            Ok(page.index())
        } else {
            Err(PctError::PageOutOfRange {
                page,
                pages: self.pages(),
            })
        }
    }

    /// The entry for `page`.
    pub fn get(&self, page: PageNumber) -> Result<PctEntry, PctError> {
        let i = self.check_page(page)?;
        // Stored words were validated on the way in.
        PctEntry::from_bits(self.entries[i])
    }

    /// Program `page`; an invalid entry leaves the table unchanged.
    pub fn set(&mut self, page: PageNumber, entry: PctEntry) -> Result<(), PctError> {
        let i = self.check_page(page)?;
        entry.validate(self.owner, self.nodes)?;
        self.entries[i] = entry.to_bits();
        Ok(())
    }

    /// Disable every page (adapter reset, node crash).
    pub fn clear(&mut self) {
        self.entries.iter_mut().for_each(|e| *e = 0);
    }

    /// Pages whose entry is not disabled, with their entries.
    pub fn enabled(&self) -> impl Iterator<Item = (PageNumber, PctEntry)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, w)| **w != 0)
            .filter_map(|(i, w)| {
                PctEntry::from_bits(*w)
                    .ok()
                    .map(|e| (PageNumber(crate::saturating_u32(i as u64)), e))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn invalid_combinations_are_rejected() {
        let me = NodeId(1);
        let cases = [
            (
                PctEntry {
                    loopback: true,
                    ..PctEntry::receive()
                },
                PctError::LoopbackWithoutTransmit,
            ),
            (
                PctEntry {
                    interrupt: true,
                    ..PctEntry::transmit_broadcast()
                },
                PctError::InterruptWithoutReceive,
            ),
            (
                PctEntry {
                    ack: true,
                    ..PctEntry::transmit_broadcast()
                },
                PctError::AckNeedsTransmitAndReceive,
            ),
            (
                PctEntry {
                    ack: true,
                    ..PctEntry::receive()
                },
                PctError::AckNeedsTransmitAndReceive,
            ),
            (
                PctEntry {
                    ack: true,
                    ..PctEntry::transmit_to(NodeId(0)).with_receive()
                },
                PctError::AckPointToPoint,
            ),
            (
                PctEntry::transmit_to(me),
                PctError::DestinationIsSelf { dest: me },
            ),
            (
                PctEntry::transmit_to(NodeId(4)),
                PctError::DestinationOutOfRange {
                    dest: NodeId(4),
                    nodes: 4,
                },
            ),
        ];
        for (entry, want) in cases {
            assert_eq!(entry.validate(me, 4), Err(want), "{entry}");
        }
        PctEntry::ack_page()
            .with_interrupt()
            .validate(me, 4)
            .unwrap();
        PctEntry::transmit_to(NodeId(0))
            .with_loopback()
            .with_receive()
            .validate(me, 4)
            .unwrap();
    }

    #[test]
    fn decode_rejects_malformed_words() {
        assert_eq!(
            PctEntry::from_bits(1 << 20),
            Err(PctError::ReservedBits(1 << 20))
        );
        assert_eq!(
            PctEntry::from_bits(bits::TX_POINT_TO_POINT),
            Err(PctError::PointToPointWithoutTransmit)
        );
        assert_eq!(
            PctEntry::from_bits(bits::TX_ENABLE | (3 << bits::DEST_SHIFT)),
            Err(PctError::DestinationWithoutPointToPoint)
        );
    }

    #[test]
    fn table_rejects_out_of_range_pages_and_keeps_state() {
        let mut t = PageControlTable::new(NodeId(0), 2, 16);
        t.set(PageNumber(3), PctEntry::receive()).unwrap();
        assert!(t.set(PageNumber(16), PctEntry::receive()).is_err());
        assert!(t
            .set(PageNumber(3), PctEntry::transmit_to(NodeId(0)))
            .is_err());
        assert_eq!(t.get(PageNumber(3)).unwrap(), PctEntry::receive());
        assert_eq!(t.enabled().count(), 1);
        t.clear();
        assert_eq!(t.enabled().count(), 0);
    }

    proptest! {
        #[test]
        fn bits_round_trip(w in any::<u32>()) {
            if let Ok(e) = PctEntry::from_bits(w) {
                prop_assert_eq!(e.to_bits(), w);
                prop_assert_eq!(PctEntry::from_bits(e.to_bits()), Ok(e));
            }
        }
    }
}
