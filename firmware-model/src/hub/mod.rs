//! The hub and the adapters on it: who receives what, in which order.
//!
//! One [`Hub`] is one cluster. Every store any adapter transmits goes through
//! [`Hub::transmit`], which is the single serialisation point: packets get
//! consecutive sequence numbers, and every receiver is told about them in that
//! order (total order; per-source FIFO follows). Seed 000 s.2.2: "The network
//! guarantees that broadcast messages will be observed in the same order by all
//! receivers, and that all messages from a single source will be observed in the
//! order sent."
//!
//! The hub's jobs, one file each: `faults.rs` (fault commands, the schedule,
//! membership), `forward.rs` (stores cut into packets and forwarded),
//! `ack.rs` (ACK-page answers); `error.rs` says what the model refuses.

mod ack;
mod error;
mod faults;
mod forward;

use crate::config::ClusterConfig;
use crate::counters::{HubCounters, NodeCounters};
use crate::fault::{FaultCommand, FaultScope, PacketFault, PacketFaults, Rate};
use crate::pct::{PageControlTable, PctEntry};
use crate::skew::ReceiverClocks;
use crate::status::AdapterErrorStatus;
use crate::timing::LinkClock;
use crate::types::{saturating_u32, GlobalAddr, Nanos, NodeId, NodeSet, PageNumber};
use crate::vtime::VirtualLinks;

pub use error::ModelError;

/// Bytes of one ACK status word.
pub const ACK_WORD_BYTES: u32 = 4;

/// What one transmitted store became.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TransmitSummary {
    /// Packets the sender's adapter emitted.
    pub packets: u32,
    /// Deliveries into receivers.
    pub deliveries: u32,
    /// Packet copies lost (drop fault, link down) or discarded (CRC).
    pub lost: u32,
    /// The store was an ACK page trigger.
    pub ack: bool,
    /// Latest due time of anything this store produced (`now` if nothing).
    pub done_at: Nanos,
}

/// Cluster membership.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Membership {
    /// Incremented at every crash and rejoin.
    pub epoch: u64,
    pub members: NodeSet,
}

#[derive(Clone, Debug)]
struct AdapterState {
    pct: PageControlTable,
    status: AdapterErrorStatus,
    counters: NodeCounters,
}

/// A scheduled fault, applied by [`Hub::advance`] once model time reaches `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduledFault {
    pub at: Nanos,
    pub command: FaultCommand,
}

/// One Memory Channel cluster: its adapters and their hub.
#[derive(Clone, Debug)]
pub struct Hub {
    config: ClusterConfig,
    adapters: Vec<AdapterState>,
    clock: LinkClock,
    receivers: ReceiverClocks,
    faults: PacketFaults,
    schedule: Vec<ScheduledFault>,
    seq: u64,
    epoch: u64,
    counters: HubCounters,
    /// Where stamped packets wait for busy links, in virtual time.
    vlinks: VirtualLinks,
    /// Reused by `forward_store` (receivers of one page), so a store
    /// allocates nothing.
    receivers_scratch: Vec<(NodeId, bool)>,
    /// Reused by `forward_run` (receivers and due times of one run).
    run_scratch: Vec<(NodeId, Nanos)>,
    /// Forward a page's packets as one run where the outcome is the same
    /// (forward.rs); off: always packet by packet (the reference path).
    packet_runs: bool,
}

impl Hub {
    /// A cluster with every adapter online, links up and PCTs disabled.
    pub fn new(config: ClusterConfig) -> Result<Self, ModelError> {
        config.validate()?;
        let pages = config.page_count();
        let adapters = (0..config.nodes)
            .map(|n| AdapterState {
                pct: PageControlTable::new(NodeId(n), config.nodes, pages),
                status: AdapterErrorStatus {
                    online: true,
                    link_up: true,
                    ..Default::default()
                },
                counters: NodeCounters::default(),
            })
            .collect();
        Ok(Hub {
            clock: LinkClock::new(config.link, usize::from(config.nodes)),
            receivers: ReceiverClocks::new(config.delivery, usize::from(config.nodes)),
            faults: PacketFaults::new(config.fault_seed),
            vlinks: VirtualLinks::new(
                crate::vtime::VirtualLink::for_link(&config.link),
                usize::from(config.nodes),
                config.max_payload,
            ),
            config,
            adapters,
            schedule: Vec::new(),
            seq: 0,
            epoch: 1,
            counters: HubCounters::default(),
            receivers_scratch: Vec::new(),
            run_scratch: Vec::new(),
            packet_runs: true,
        })
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    pub fn nodes(&self) -> u8 {
        self.config.nodes
    }

    fn check_node(&self, node: NodeId) -> Result<usize, ModelError> {
        if node.0 < self.config.nodes {
            Ok(node.index())
        } else {
            Err(ModelError::NoSuchNode {
                node,
                nodes: self.config.nodes,
            })
        }
    }

    /// Global page holding `addr`.
    pub fn page_of(&self, addr: GlobalAddr) -> PageNumber {
        PageNumber(saturating_u32(addr.0 / u64::from(self.config.page_size)))
    }

    /// A node's page control table.
    pub fn pct(&self, node: NodeId) -> Result<&PageControlTable, ModelError> {
        let i = self.check_node(node)?;
        Ok(&self.adapters[i].pct)
    }

    /// One PCT entry.
    pub fn pct_entry(&self, node: NodeId, page: PageNumber) -> Result<PctEntry, ModelError> {
        Ok(self.pct(node)?.get(page)?)
    }

    /// Program one PCT entry of `node`; an invalid entry changes nothing.
    pub fn set_pct(
        &mut self,
        node: NodeId,
        page: PageNumber,
        entry: PctEntry,
    ) -> Result<(), ModelError> {
        let i = self.check_node(node)?;
        if !self.adapters[i].status.online {
            return Err(ModelError::NodeOffline(node));
        }
        self.adapters[i].pct.set(page, entry)?;
        Ok(())
    }

    /// Reset one adapter as a driver (re)initialising it would: PCT disabled,
    /// error status cleared. Membership, links and counters are unchanged.
    pub fn reset_adapter(&mut self, node: NodeId) -> Result<(), ModelError> {
        let i = self.check_node(node)?;
        let a = &mut self.adapters[i];
        a.pct.clear();
        a.status.network_errors = 0;
        a.status.protection_errors = 0;
        Ok(())
    }

    pub fn error_status(&self, node: NodeId) -> Result<AdapterErrorStatus, ModelError> {
        Ok(self.adapters[self.check_node(node)?].status)
    }

    /// The cluster-wide error count (what `imc_rderrcnt` reads): every network
    /// error any adapter has detected. Never decreases.
    pub fn cluster_error_count(&self) -> u64 {
        self.counters.errors
    }

    pub fn membership(&self) -> Membership {
        let mut members = NodeSet::default();
        for (id, a) in NodeId::all(self.config.nodes).zip(&self.adapters) {
            if a.status.online {
                members.insert(id);
            }
        }
        Membership {
            epoch: self.epoch,
            members,
        }
    }

    pub fn node_counters(&self, node: NodeId) -> Result<NodeCounters, ModelError> {
        Ok(self.adapters[self.check_node(node)?].counters)
    }

    pub fn hub_counters(&self) -> HubCounters {
        self.counters
    }

    /// Forward packets one by one everywhere (`false`), or as runs where
    /// the outcome is the same (`true`, the default). Both give the same
    /// deliveries, counters and clocks (the property tests compare them);
    /// the packet-by-packet path is the reference.
    pub fn set_packet_runs(&mut self, on: bool) {
        self.packet_runs = on;
    }

    /// Sequence number of the last packet or ACK given a place in the global order.
    pub fn last_seq(&self) -> u64 {
        self.seq
    }

    /// Active packet fault rules, in the order they are checked.
    pub fn packet_faults(&self) -> &[(PacketFault, FaultScope, Rate)] {
        self.faults.rules()
    }

    /// Faults scheduled but not yet applied, in the order they will apply.
    pub fn scheduled_faults(&self) -> &[ScheduledFault] {
        &self.schedule
    }

    /// When receivers see what the hub forwarded (eager or skewed).
    pub fn delivery_mode(&self) -> crate::skew::DeliveryMode {
        self.receivers.mode()
    }

    /// How late `node`'s status page may show the next error another adapter
    /// detected: zero in eager mode, a seeded draw in skewed mode
    /// (`imc_rderrcnt` "is not guaranteed to be up-to-date", seed 004).
    pub fn status_lag(&mut self, node: NodeId) -> Nanos {
        self.receivers.status_lag(node.index())
    }

    /// The hub forwards nothing before this time.
    pub fn stalled_until(&self) -> Nanos {
        self.clock.stalled_until()
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod vtime_tests;
