//! A deterministic model of the DEC PCI Memory Channel adapter and its hub.
//!
//! This crate decides *who receives what, in which order*: page control tables,
//! packets, the hub's total order, loopback, broadcast and point-to-point, ACK
//! pages, error status and counts, seeded faults and link timing. It does no I/O,
//! reads no clock and owns no guest memory: the device drives it and performs the
//! deliveries it reports through a [`DeliverySink`]. Every other part of the
//! project is tested against it.
//!
//! ```
//! use firmware_model::*;
//!
//! let mut hub = Hub::new(ClusterConfig::new(3)).unwrap();
//! let page = PageNumber(4);
//! hub.set_pct(NodeId(0), page, PctEntry::transmit_broadcast()).unwrap();
//! hub.set_pct(NodeId(1), page, PctEntry::receive()).unwrap();
//! hub.set_pct(NodeId(2), page, PctEntry::receive()).unwrap();
//!
//! let mut sink = RecordingSink::new();
//! let addr = GlobalAddr(4 * 8192 + 16);
//! let sent = hub.transmit(Nanos(0), NodeId(0), addr, 8, &mut sink).unwrap();
//! assert_eq!((sent.packets, sent.deliveries), (1, 2));
//! ```
#![forbid(unsafe_code)]
#![deny(clippy::cast_possible_truncation)]

pub mod abi;
pub mod arbiter;
pub mod config;
pub mod counters;
pub mod error_chain;
pub mod fault;
pub mod hub;
pub mod packet;
pub mod pct;
pub mod shadow;
pub mod sink;
pub mod skew;
pub mod status;
pub mod timing;
pub mod types;
pub mod vtime;

pub use arbiter::{Arbiter, PassBudget, Turn};
pub use config::{ClusterConfig, ConfigError};
pub use counters::{HubCounters, NodeCounters};
pub use error_chain::{doubled_cause, ErrorChain};
pub use fault::{
    parse_duration, FaultCommand, FaultError, FaultScope, FaultSyntaxError, PacketFault, Rate,
};
pub use hub::{Hub, Membership, ModelError, ScheduledFault, TransmitSummary, ACK_WORD_BYTES};
pub use packet::{packet_count, split_store, Packet, PacketRun};
pub use pct::{Destination, PageControlTable, PctEntry, PctError};
pub use shadow::ShadowCluster;
pub use sink::{AckReport, Delivery, DeliverySink, ErrorKind, Event, RecordingSink, SinkRecord};
pub use skew::{DeliveryMode, SkewParams, UnknownDeliveryMode};
pub use status::AdapterErrorStatus;
pub use timing::{LinkTiming, UnknownLinkPreset};
pub use types::{
    rem_u32, saturating_u32, to_usize, GlobalAddr, Nanos, NodeId, NodeSet, PageNumber,
};
