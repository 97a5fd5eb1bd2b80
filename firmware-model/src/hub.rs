//! The hub and the adapters on it: who receives what, in which order.
//!
//! One [`Hub`] is one cluster. Every store any adapter transmits goes through
//! [`Hub::transmit`], which is the single serialisation point: packets get
//! consecutive sequence numbers, and every receiver is told about them in that
//! order (total order; per-source FIFO follows). Seed 000 s.2.2: "The network
//! guarantees that broadcast messages will be observed in the same order by all
//! receivers, and that all messages from a single source will be observed in the
//! order sent."

use crate::config::{ClusterConfig, ConfigError};
use crate::counters::{HubCounters, NodeCounters};
use crate::fault::{FaultCommand, FaultError, FaultScope, PacketFault, PacketFaults, Rate};
use crate::packet::{split_store, Packet};
use crate::pct::{Destination, PageControlTable, PctEntry, PctError};
use crate::sink::{AckReport, Delivery, DeliverySink, ErrorKind, Event};
use crate::skew::ReceiverClocks;
use crate::status::AdapterErrorStatus;
use crate::timing::LinkClock;
use crate::types::{GlobalAddr, Nanos, NodeId, NodeSet, PageNumber};

/// Bytes of one ACK status word.
pub const ACK_WORD_BYTES: u32 = 4;

/// Anything the model refuses. Nothing is changed by a refused request except,
/// where a guest's store is at fault, that adapter's protection error count.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("{node} is not in the cluster of {nodes} nodes")]
    NoSuchNode { node: NodeId, nodes: u8 },
    #[error("{0} has crashed; it must rejoin before it can transmit")]
    NodeOffline(NodeId),
    #[error("a store must write at least one byte")]
    EmptyStore,
    #[error("store of {len} bytes at {addr} is outside the global address space of {size} bytes")]
    AddressOutOfRange {
        addr: GlobalAddr,
        len: u64,
        size: u64,
    },
    #[error("{node} has {page} not enabled for transmit")]
    TransmitDisabled { node: NodeId, page: PageNumber },
    #[error("a store to ACK {page} must not extend past that page")]
    AckStoreSpansPages { page: PageNumber },
    #[error("ACK slot at offset {offset} needs {bytes} bytes, past the end of the {page_size}-byte page")]
    AckSlotOutOfPage {
        offset: u32,
        bytes: u32,
        page_size: u32,
    },
    #[error(transparent)]
    Pct(#[from] PctError),
    #[error(transparent)]
    Fault(#[from] FaultError),
    #[error(transparent)]
    Config(#[from] ConfigError),
}

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
    /// Reused by `forward_store` (receivers of one page), so a store
    /// allocates nothing.
    receivers_scratch: Vec<(usize, bool)>,
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
            config,
            adapters,
            schedule: Vec::new(),
            seq: 0,
            epoch: 1,
            counters: HubCounters::default(),
            receivers_scratch: Vec::new(),
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
        PageNumber((addr.0 / u64::from(self.config.page_size)) as u32)
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
        for (i, a) in self.adapters.iter().enumerate() {
            if a.status.online {
                members.insert(NodeId(i as u8));
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

    fn check_fault(&self, command: &FaultCommand) -> Result<(), ModelError> {
        command.check_bounds()?;
        for n in command.nodes() {
            if n.0 >= self.config.nodes {
                return Err(FaultError::NoSuchNode {
                    node: n,
                    nodes: self.config.nodes,
                }
                .into());
            }
        }
        Ok(())
    }

    /// Apply `command` at time `now`, after any scheduled faults due by then.
    pub fn apply_fault<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        command: FaultCommand,
        sink: &mut S,
    ) -> Result<(), ModelError> {
        self.advance(now, sink);
        self.check_fault(&command)?;
        self.apply_now(now, command, sink)
    }

    /// Schedule `command` for model time `at` (a fault plan's timeline). Faults
    /// scheduled for the same time apply in the order they were scheduled.
    pub fn schedule_fault(&mut self, at: Nanos, command: FaultCommand) -> Result<(), ModelError> {
        self.check_fault(&command)?;
        let pos = self.schedule.partition_point(|f| f.at <= at);
        self.schedule.insert(pos, ScheduledFault { at, command });
        Ok(())
    }

    /// Apply every scheduled fault due at or before `now`. A scheduled command
    /// that no longer makes sense (crash of a crashed node) is reported as an
    /// event and skipped.
    pub fn advance<S: DeliverySink + ?Sized>(&mut self, now: Nanos, sink: &mut S) {
        let due = self.schedule.partition_point(|f| f.at <= now);
        let ready: Vec<ScheduledFault> = self.schedule.drain(..due).collect();
        for f in ready {
            // Skipping is the only sensible outcome for a stale plan entry; the
            // FaultApplied event is only sent for commands that took effect.
            let _ = self.apply_now(f.at, f.command, sink);
        }
    }

    fn apply_now<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        command: FaultCommand,
        sink: &mut S,
    ) -> Result<(), ModelError> {
        match command {
            FaultCommand::Packets { fault, scope, rate } => self.faults.add(fault, scope, rate),
            FaultCommand::ClearPackets => self.faults.clear(),
            FaultCommand::LinkDown(n) => {
                let a = &mut self.adapters[n.index()];
                if a.status.link_up {
                    a.status.link_up = false;
                    self.count_error(n.index());
                    sink.event(&Event::LinkState {
                        node: n,
                        up: false,
                        at: now,
                    });
                    sink.event(&Event::Error {
                        node: n,
                        kind: ErrorKind::LinkDown,
                        at: now,
                    });
                }
            }
            FaultCommand::LinkUp(n) => {
                let a = &mut self.adapters[n.index()];
                if !a.status.link_up {
                    a.status.link_up = true;
                    sink.event(&Event::LinkState {
                        node: n,
                        up: true,
                        at: now,
                    });
                }
            }
            FaultCommand::Crash(n) => {
                let a = &mut self.adapters[n.index()];
                if !a.status.online {
                    return Err(FaultError::AlreadyCrashed(n).into());
                }
                a.status.online = false;
                a.pct.clear();
                self.epoch += 1;
                self.announce_membership(now, sink);
            }
            FaultCommand::Rejoin(n) => {
                let a = &mut self.adapters[n.index()];
                if a.status.online {
                    return Err(FaultError::NotCrashed(n).into());
                }
                // A fresh adapter: clean status, empty PCT, link up.
                a.status = AdapterErrorStatus {
                    online: true,
                    link_up: true,
                    ..Default::default()
                };
                a.pct.clear();
                self.epoch += 1;
                self.announce_membership(now, sink);
            }
            FaultCommand::StallHub { duration } => self.clock.stall(now.saturating_add(duration)),
        }
        sink.event(&Event::FaultApplied { command, at: now });
        Ok(())
    }

    fn announce_membership<S: DeliverySink + ?Sized>(&self, now: Nanos, sink: &mut S) {
        let m = self.membership();
        for node in m.members.iter() {
            sink.event(&Event::MembershipChanged {
                node,
                epoch: m.epoch,
                members: m.members,
                at: now,
            });
        }
    }

    /// Record that `node`'s driver made a request the adapter refused (a store
    /// the PCT forbids, a malformed descriptor, a write to a read-only register):
    /// its protection error count goes up and it gets an error event. Nothing else
    /// in the cluster changes.
    pub fn report_protection_error<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        node: NodeId,
        sink: &mut S,
    ) -> Result<(), ModelError> {
        let i = self.check_node(node)?;
        let a = &mut self.adapters[i];
        a.status.protection_errors = a.status.protection_errors.wrapping_add(1);
        a.counters.protection_errors += 1;
        sink.event(&Event::Error {
            node,
            kind: ErrorKind::Protection,
            at: now,
        });
        Ok(())
    }

    fn refuse<S: DeliverySink + ?Sized>(
        &mut self,
        src: usize,
        err: ModelError,
        now: Nanos,
        sink: &mut S,
    ) -> ModelError {
        // `src` was checked by the caller.
        let _ = self.report_protection_error(now, NodeId(src as u8), sink);
        err
    }

    /// Node `src` stores `len` bytes at global address `addr` at time `now`.
    ///
    /// The store is checked against `src`'s PCT as a whole: if any page it
    /// touches is not enabled for transmit, nothing is sent, the adapter's
    /// protection error count goes up and an error is returned. Otherwise it is
    /// cut into packets (see [`split_store`]) and each is handed to `sink` for
    /// every receiver, in global order. A store to an ACK page instead produces
    /// one [`AckReport`].
    pub fn transmit<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        src: NodeId,
        addr: GlobalAddr,
        len: u32,
        sink: &mut S,
    ) -> Result<TransmitSummary, ModelError> {
        self.advance(now, sink);
        let s = self.check_node(src)?;
        if !self.adapters[s].status.online {
            return Err(ModelError::NodeOffline(src));
        }
        if len == 0 {
            return Err(self.refuse(s, ModelError::EmptyStore, now, sink));
        }
        let end = addr.0.checked_add(u64::from(len));
        if end.is_none_or(|e| e > self.config.address_space) {
            let err = ModelError::AddressOutOfRange {
                addr,
                len: u64::from(len),
                size: self.config.address_space,
            };
            return Err(self.refuse(s, err, now, sink));
        }
        let first = self.page_of(addr);
        let last = self.page_of(GlobalAddr(addr.0 + u64::from(len) - 1));
        let first_entry = self.adapters[s].pct.get(first)?;
        for p in first.0..=last.0 {
            let page = PageNumber(p);
            let entry = self.adapters[s].pct.get(page)?;
            if entry.transmit.is_none() {
                let err = ModelError::TransmitDisabled { node: src, page };
                return Err(self.refuse(s, err, now, sink));
            }
            if entry.ack && first != last {
                let err = ModelError::AckStoreSpansPages { page };
                return Err(self.refuse(s, err, now, sink));
            }
        }
        if first_entry.ack {
            return self.ack(now, s, addr, sink);
        }
        Ok(self.forward_store(now, s, addr, len, sink))
    }

    fn forward_store<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        s: usize,
        addr: GlobalAddr,
        len: u32,
        sink: &mut S,
    ) -> TransmitSummary {
        let src = NodeId(s as u8);
        let page_size = u64::from(self.config.page_size);
        let mut summary = TransmitSummary {
            done_at: now,
            ..Default::default()
        };
        // (receiver, page, due time) of interrupt-on-receive deliveries: one
        // notification per receiver and page once the whole store has landed.
        let mut notify: Vec<(NodeId, PageNumber, Nanos)> = Vec::new();
        // Who receives is decided once per page (every packet of a page has
        // the same receivers); the faults are still drawn per packet and
        // receiver, in the same order.
        let mut receivers = std::mem::take(&mut self.receivers_scratch);
        let end = addr.0 + u64::from(len);
        let mut chunk = addr.0;
        while chunk < end {
            let page = self.page_of(GlobalAddr(chunk));
            let chunk_end = end.min((u64::from(page.0) + 1) * page_size);
            // Checked by the caller for every page of the store.
            let entry = self.adapters[s].pct.get(page).unwrap_or_default();
            let broadcast = entry.transmit == Some(Destination::Broadcast);
            receivers.clear();
            for r in 0..self.adapters.len() {
                let receiver = NodeId(r as u8);
                let eligible = if r == s {
                    entry.loopback && entry.receive
                } else {
                    match entry.transmit {
                        Some(Destination::Broadcast) => true,
                        Some(Destination::Node(d)) => d == receiver,
                        None => false,
                    }
                };
                if !eligible || !self.adapters[r].status.online {
                    continue;
                }
                if let Ok(rx) = self.adapters[r].pct.get(page) {
                    if rx.receive {
                        receivers.push((r, rx.interrupt));
                    }
                }
            }
            let chunk_offset = (chunk - addr.0) as u32;
            let pieces = split_store(
                GlobalAddr(chunk),
                (chunk_end - chunk) as u32,
                self.config.max_payload,
            );
            for (paddr, plen, offset) in pieces {
                self.forward_packet(
                    now,
                    s,
                    paddr,
                    plen,
                    chunk_offset + offset,
                    page,
                    broadcast,
                    &receivers,
                    &mut summary,
                    &mut notify,
                    sink,
                );
            }
            chunk = chunk_end;
        }
        self.receivers_scratch = receivers;
        for (node, page, at) in notify {
            sink.event(&Event::PageWritten {
                node,
                page,
                source: src,
                at,
            });
        }
        summary
    }

    /// One packet of a store to `page`, for `receivers` (index, interrupt).
    #[allow(clippy::too_many_arguments)]
    fn forward_packet<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        s: usize,
        paddr: GlobalAddr,
        plen: u32,
        store_offset: u32,
        page: PageNumber,
        broadcast: bool,
        receivers: &[(usize, bool)],
        summary: &mut TransmitSummary,
        notify: &mut Vec<(NodeId, PageNumber, Nanos)>,
        sink: &mut S,
    ) {
        let src = NodeId(s as u8);
        summary.packets += 1;
        let c = &mut self.adapters[s].counters;
        c.packets_sent += 1;
        c.bytes_sent += u64::from(plen);
        if broadcast {
            c.broadcasts_sent += 1;
        }
        if !self.adapters[s].status.link_up {
            // Lost on the sender's own link: it never reaches the hub.
            self.lost_to_down_link(s);
            summary.lost += 1;
            return;
        }
        self.seq += 1;
        self.counters.packets += 1;
        self.counters.bytes += u64::from(plen);
        if broadcast {
            self.counters.broadcasts += 1;
        }
        let packet = Packet {
            seq: self.seq,
            source: src,
            addr: paddr,
            len: plen,
            store_offset,
        };
        let page_offset = packet.page_offset(self.config.page_size);
        let hub_time = self.clock.forward(now, s, u64::from(plen), broadcast);
        let arrival = self.clock.arrival(hub_time);
        for &(r, interrupt) in receivers {
            let receiver = NodeId(r as u8);
            let at = self.receivers.due(r, arrival);
            if !self.adapters[r].status.link_up {
                self.lost_to_down_link(r);
                summary.lost += 1;
                continue;
            }
            match self.faults.decide(src, receiver) {
                Some(PacketFault::Drop) => {
                    self.count_drop(r);
                    summary.lost += 1;
                }
                Some(PacketFault::Corrupt) => {
                    self.count_error(r);
                    summary.lost += 1;
                    sink.event(&Event::Error {
                        node: receiver,
                        kind: ErrorKind::Crc,
                        at,
                    });
                }
                None => {
                    let c = &mut self.adapters[r].counters;
                    c.packets_received += 1;
                    c.bytes_received += u64::from(plen);
                    self.counters.deliveries += 1;
                    summary.deliveries += 1;
                    summary.done_at = summary.done_at.max(at);
                    sink.deliver(&Delivery {
                        packet,
                        receiver,
                        page,
                        page_offset,
                        at,
                    });
                    if interrupt {
                        match notify
                            .iter_mut()
                            .find(|(n, p, _)| *n == receiver && *p == page)
                        {
                            Some(slot) => slot.2 = at,
                            None => notify.push((receiver, page, at)),
                        }
                    }
                }
            }
        }
    }

    /// A packet lost because node `n`'s link is down: a drop, and a network
    /// error at `n`, whose adapter knows its link is down. Counting only the
    /// transition to down would let "save the count, write, check" (seed 004)
    /// pass over a store lost while the link was down when the count was
    /// saved after it went down and the link was back up by the check.
    fn lost_to_down_link(&mut self, n: usize) {
        self.count_drop(n);
        self.count_error(n);
    }

    /// A packet lost without trace at node `n`.
    fn count_drop(&mut self, n: usize) {
        self.adapters[n].counters.drops += 1;
        self.counters.drops += 1;
    }

    /// A network error node `n`'s adapter detected: in its status word and
    /// in the cluster error count.
    fn count_error(&mut self, n: usize) {
        let a = &mut self.adapters[n];
        a.status.network_errors = a.status.network_errors.wrapping_add(1);
        a.counters.errors += 1;
        self.counters.errors += 1;
    }

    fn ack<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        s: usize,
        addr: GlobalAddr,
        sink: &mut S,
    ) -> Result<TransmitSummary, ModelError> {
        let page_size = self.config.page_size;
        let page = self.page_of(addr);
        let offset = (addr.0 % u64::from(page_size)) as u32 & !(ACK_WORD_BYTES - 1);
        let bytes = ACK_WORD_BYTES * u32::from(self.config.nodes);
        if offset + bytes > page_size {
            let err = ModelError::AckSlotOutOfPage {
                offset,
                bytes,
                page_size,
            };
            return Err(self.refuse(s, err, now, sink));
        }
        self.adapters[s].counters.acks += 1;
        let mut summary = TransmitSummary {
            ack: true,
            done_at: now,
            ..Default::default()
        };
        if !self.adapters[s].status.link_up {
            self.count_drop(s);
            summary.lost = 1;
            return Ok(summary);
        }
        self.seq += 1;
        self.counters.acks += 1;
        // The request crosses the hub in global order, so every earlier packet
        // has been delivered or lost before the statuses are read; the answers
        // then travel back: two one-way latencies.
        let hub_time = self.clock.forward(now, s, u64::from(ACK_WORD_BYTES), true);
        // The answer is due after every earlier packet is due at every
        // receiver (and in the writer's own order of deliveries).
        let answer = self
            .clock
            .arrival(self.clock.arrival(hub_time))
            .max(self.receivers.latest());
        let at = self.receivers.due(s, answer);
        let words = self.adapters.iter().map(|a| a.status.to_word()).collect();
        let writer = NodeId(s as u8);
        sink.ack(&AckReport {
            seq: self.seq,
            writer,
            page,
            page_offset: offset,
            words,
            at,
        });
        if self.adapters[s]
            .pct
            .get(page)
            .map(|e| e.interrupt)
            .unwrap_or(false)
        {
            sink.event(&Event::PageWritten {
                node: writer,
                page,
                source: writer,
                at,
            });
        }
        summary.done_at = at;
        Ok(summary)
    }
}

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
