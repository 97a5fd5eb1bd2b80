//! Stores cut into packets and forwarded in the hub's total order: who
//! receives each packet, when, and what a fault or a down link does to it;
//! a store the PCT forbids is refused as a protection error.

use crate::fault::PacketFault;
use crate::packet::{packet_count, split_store, Packet, PacketRun};
use crate::pct::Destination;
use crate::sink::{Delivery, DeliverySink, ErrorKind, Event};
use crate::types::{rem_u32, saturating_u32, GlobalAddr, Nanos, NodeId, PageNumber};

use super::{Hub, ModelError, TransmitSummary};

impl Hub {
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

    pub(super) fn refuse<S: DeliverySink + ?Sized>(
        &mut self,
        src: NodeId,
        err: ModelError,
        now: Nanos,
        sink: &mut S,
    ) -> ModelError {
        // `src` was checked by the caller.
        let _ = self.report_protection_error(now, src, sink);
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
        self.transmit_stamped(now, src, addr, len, None, sink)
    }

    /// [`Hub::transmit`] for a store that carries its sender's virtual time
    /// `send_vt` (`None`: as `transmit`): each delivery also gets its virtual
    /// arrival (`Delivery::vt`), after whatever holds the links it needs in
    /// virtual time (vtime/links.rs).
    pub fn transmit_stamped<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        src: NodeId,
        addr: GlobalAddr,
        len: u32,
        send_vt: Option<Nanos>,
        sink: &mut S,
    ) -> Result<TransmitSummary, ModelError> {
        self.advance(now, sink);
        let s = self.check_node(src)?;
        if !self.adapters[s].status.online {
            return Err(ModelError::NodeOffline(src));
        }
        if len == 0 {
            return Err(self.refuse(src, ModelError::EmptyStore, now, sink));
        }
        let end = addr.0.checked_add(u64::from(len));
        if end.is_none_or(|e| e > self.config.address_space) {
            let err = ModelError::AddressOutOfRange {
                addr,
                len: u64::from(len),
                size: self.config.address_space,
            };
            return Err(self.refuse(src, err, now, sink));
        }
        let first = self.page_of(addr);
        let last = self.page_of(GlobalAddr(addr.0 + u64::from(len) - 1));
        let first_entry = self.adapters[s].pct.get(first)?;
        for p in first.0..=last.0 {
            let page = PageNumber(p);
            let entry = self.adapters[s].pct.get(page)?;
            if entry.transmit.is_none() {
                let err = ModelError::TransmitDisabled { node: src, page };
                return Err(self.refuse(src, err, now, sink));
            }
            if entry.ack && first != last {
                let err = ModelError::AckStoreSpansPages { page };
                return Err(self.refuse(src, err, now, sink));
            }
        }
        if first_entry.ack {
            return self.ack(now, src, addr, sink);
        }
        Ok(self.forward_store(now, src, addr, len, send_vt, sink))
    }

    pub(super) fn forward_store<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        src: NodeId,
        addr: GlobalAddr,
        len: u32,
        send_vt: Option<Nanos>,
        sink: &mut S,
    ) -> TransmitSummary {
        let s = src.index();
        if let Some(send) = send_vt {
            self.vlinks.begin_store(s, send.0);
        }
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
            for receiver in NodeId::all(self.config.nodes) {
                let r = receiver.index();
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
                        receivers.push((receiver, rx.interrupt));
                    }
                }
            }
            let chunk_offset = saturating_u32(chunk - addr.0);
            if send_vt.is_some() && self.adapters[s].status.link_up {
                // Links that are down carry nothing, in virtual time too.
                let up = receivers
                    .iter()
                    .map(|(r, _)| r.index())
                    .filter(|&r| self.adapters[r].status.link_up);
                self.vlinks
                    .place_page(s, chunk - addr.0, chunk_end - addr.0, broadcast, up);
            }
            let chunk_len = saturating_u32(chunk_end - chunk);
            if self.runs_give_the_same(src, send_vt.is_some(), &receivers) {
                self.forward_run(
                    now,
                    src,
                    GlobalAddr(chunk),
                    chunk_len,
                    chunk_offset,
                    page,
                    broadcast,
                    &receivers,
                    &mut summary,
                    &mut notify,
                    sink,
                );
                chunk = chunk_end;
                continue;
            }
            let pieces = split_store(GlobalAddr(chunk), chunk_len, self.config.max_payload);
            for (paddr, plen, offset) in pieces {
                self.forward_packet(
                    now,
                    src,
                    paddr,
                    plen,
                    chunk_offset + offset,
                    page,
                    broadcast,
                    send_vt.is_some(),
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

    /// Whether the packets of one page of a store from `src` to `receivers`
    /// may go as one run ([`Hub::forward_run`]) with the same outcome as
    /// packet by packet: every packet's hub time and every receiver's due
    /// time are the same for all of them (no serialisation time, eager
    /// delivery), nothing draws from a random stream per packet (no fault
    /// rule can hit a copy: the rule's scope misses or its rate is zero),
    /// no link on the way is down, and no packet carries a virtual time
    /// (each would arrive at its own).
    fn runs_give_the_same(&self, src: NodeId, stamped: bool, receivers: &[(NodeId, bool)]) -> bool {
        self.packet_runs
            && !stamped
            && self.clock.forwards_without_delay()
            && self.receivers.mode() == crate::skew::DeliveryMode::Eager
            && self.adapters[src.index()].status.link_up
            && receivers.iter().all(|&(r, _)| {
                self.adapters[r.index()].status.link_up && !self.faults.may_hit(src, r)
            })
    }

    /// The packets of one page of a store, when [`Hub::runs_give_the_same`]
    /// holds: the counters, sequence numbers, clocks and notifications move
    /// exactly as [`Hub::forward_packet`] for each would move them, and the
    /// sink gets one [`DeliverySink::deliver_run`], which means the same
    /// deliveries in the same order.
    #[allow(clippy::too_many_arguments)]
    fn forward_run<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        src: NodeId,
        addr: GlobalAddr,
        len: u32,
        store_offset: u32,
        page: PageNumber,
        broadcast: bool,
        receivers: &[(NodeId, bool)],
        summary: &mut TransmitSummary,
        notify: &mut Vec<(NodeId, PageNumber, Nanos)>,
        sink: &mut S,
    ) {
        let s = src.index();
        let n = packet_count(addr, len, self.config.max_payload);
        if n == 0 {
            return;
        }
        summary.packets += n;
        let c = &mut self.adapters[s].counters;
        c.packets_sent += u64::from(n);
        c.bytes_sent += u64::from(len);
        if broadcast {
            c.broadcasts_sent += u64::from(n);
        }
        let first_seq = self.seq + 1;
        self.seq += u64::from(n);
        self.counters.packets += u64::from(n);
        self.counters.bytes += u64::from(len);
        if broadcast {
            self.counters.broadcasts += u64::from(n);
        }
        // Without serialisation time every packet is forwarded at the
        // first one's hub time, and leaves the clock as the first left it.
        let first_len = len.min(self.config.max_payload - rem_u32(addr.0, self.config.max_payload));
        let hub_time = self.clock.forward(now, s, u64::from(first_len), broadcast);
        let arrival = self.clock.arrival(hub_time);
        let mut to = std::mem::take(&mut self.run_scratch);
        to.clear();
        for &(receiver, interrupt) in receivers {
            let r = receiver.index();
            // Eager: the same due time for each packet of the run.
            let at = self.receivers.due(r, arrival);
            let c = &mut self.adapters[r].counters;
            c.packets_received += u64::from(n);
            c.bytes_received += u64::from(len);
            self.counters.deliveries += u64::from(n);
            summary.deliveries += n;
            summary.done_at = summary.done_at.max(at);
            to.push((receiver, at));
            if interrupt {
                match notify
                    .iter_mut()
                    .find(|(r, p, _)| *r == receiver && *p == page)
                {
                    Some(slot) => slot.2 = at,
                    None => notify.push((receiver, page, at)),
                }
            }
        }
        let run = PacketRun {
            first_seq,
            packets: n,
            source: src,
            addr,
            len,
            store_offset,
            page,
            page_offset: rem_u32(addr.0, self.config.page_size),
            max_payload: self.config.max_payload,
        };
        sink.deliver_run(&run, &to);
        self.run_scratch = to;
    }

    /// One packet of a store to `page`, for `receivers` (index, interrupt).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn forward_packet<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        src: NodeId,
        paddr: GlobalAddr,
        plen: u32,
        store_offset: u32,
        page: PageNumber,
        broadcast: bool,
        stamped: bool,
        receivers: &[(NodeId, bool)],
        summary: &mut TransmitSummary,
        notify: &mut Vec<(NodeId, PageNumber, Nanos)>,
        sink: &mut S,
    ) {
        let s = src.index();
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
        // Serialisation of the store up to this packet's last byte, for
        // its virtual arrival at every receiver.
        let through = stamped.then(|| self.vlinks.ser(u64::from(store_offset) + u64::from(plen)));
        for &(receiver, interrupt) in receivers {
            let r = receiver.index();
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
                    let vt = through.and_then(|t| self.vlinks.arrival(r, t));
                    if let Some((_, queued)) = vt {
                        let c = &mut self.adapters[s].counters;
                        c.virtual_queueing_ns = c.virtual_queueing_ns.saturating_add(queued);
                        let h = &mut self.counters;
                        h.virtual_queueing_ns = h.virtual_queueing_ns.saturating_add(queued);
                    }
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
                        vt: vt.map(|(at, _)| Nanos(at)),
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
    pub(super) fn lost_to_down_link(&mut self, n: usize) {
        self.count_drop(n);
        self.count_error(n);
    }

    /// A packet lost without trace at node `n`.
    pub(super) fn count_drop(&mut self, n: usize) {
        self.adapters[n].counters.drops += 1;
        self.counters.drops += 1;
    }

    /// A network error node `n`'s adapter detected: in its status word and
    /// in the cluster error count.
    pub(super) fn count_error(&mut self, n: usize) {
        let a = &mut self.adapters[n];
        a.status.network_errors = a.status.network_errors.wrapping_add(1);
        a.counters.errors += 1;
        self.counters.errors += 1;
    }
}
