//! The cluster's device state and the work done on it: transmit, control and
//! event queues, status pages. One mutex guards it all; the hub thread and the
//! vhost-user workers take it for short, bounded pieces of work.

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::Instant;

use firmware_model::abi::{
    self, link, link_timing_code, status_of, CtrlRequest, CtrlResponse, EventRecord, Registers,
    Status, StatusPage, TxCompletion, TxRecordHeader, EVENT_SIZE, FRAME_SIZE, MAX_RECORD_DATA,
    MAX_TX_CHAIN_BYTES, STATUS_PAGE_SIZE, TX_COMPLETION_SIZE, TX_RECORD_HEADER_SIZE,
};
use firmware_model::{
    Event, FaultCommand, GlobalAddr, Hub, ModelError, Nanos, NodeId, PageNumber, PctEntry,
};
use log::{debug, info, warn};
use vhost_user_backend::{VringRwLock, VringT};
use virtio_queue::{DescriptorChain, QueueOwnedT};
use vm_memory::{Bytes, GuestAddress, GuestAddressSpace};

use crate::dma::{DmaSink, EventCollector};
use crate::memory::{range_ok, runs, scatter_read, scatter_write, MemGuard, Piece};
use crate::node::NodeState;

/// Largest readable part of a control request (a full SET_PCT with frames).
const MAX_CTRL_BYTES: u64 = abi::MAX_CTRL_REQUEST_BYTES as u64;
/// Chains taken from one transmit queue in one pass, so one busy guest cannot
/// hold the hub away from the others.
pub(crate) const TX_BATCH: usize = 64;

pub(crate) struct ClusterState {
    pub(crate) hub: Hub,
    pub(crate) nodes: Vec<NodeState>,
    pub(crate) start: Instant,
    pub(crate) throttle: bool,
}

/// A descriptor chain split into its readable and writable parts.
struct Chain {
    head: u16,
    readable: Vec<Piece>,
    readable_len: u64,
    writable: Option<Piece>,
    /// Why the chain's layout is unusable, if it is.
    defect: Option<Status>,
}

fn split_chain(chain: DescriptorChain<MemGuard>, mem: &MemGuard, max_readable: u64) -> Chain {
    let mut c = Chain {
        head: chain.head_index(),
        readable: Vec::new(),
        readable_len: 0,
        writable: None,
        defect: None,
    };
    for desc in chain {
        let (addr, len) = (desc.addr().0, desc.len());
        if !range_ok(mem, addr, len as usize) {
            c.defect.get_or_insert(Status::BadAddress);
            continue;
        }
        if desc.is_write_only() {
            c.writable.get_or_insert((addr, len));
        } else {
            if c.writable.is_some() {
                // Readable after writable breaks the virtio layout rule.
                c.defect.get_or_insert(Status::Malformed);
            }
            c.readable_len += u64::from(len);
            if c.readable_len > max_readable {
                // Keep walking (the chain length is bounded by the queue) to
                // find the completion buffer, but keep no more data.
                c.defect.get_or_insert(Status::TooLarge);
                continue;
            }
            c.readable.push((addr, len));
        }
    }
    c
}

fn status_str(code: u32) -> String {
    Status::from_u32(code).map_or_else(|| format!("status {code}"), |s| s.to_string())
}

impl ClusterState {
    pub(crate) fn now(&self) -> Nanos {
        Nanos(self.start.elapsed().as_nanos() as u64)
    }

    fn guest_error(&mut self, node: usize, what: fmt::Arguments<'_>) {
        warn!("node{node}: {what}");
        let mut sink = EventCollector::default();
        let now = self.now();
        let _ = self
            .hub
            .report_protection_error(now, NodeId(node as u8), &mut sink);
        self.dispatch(sink.events);
    }

    /// The register file as node `node` sees it now.
    pub(crate) fn registers(&self, node: usize) -> Registers {
        let c = self.hub.config();
        let st = self
            .hub
            .error_status(NodeId(node as u8))
            .unwrap_or_default();
        let m = self.hub.membership();
        Registers {
            node_id: node as u32,
            nodes: u32::from(c.nodes),
            page_size: c.page_size,
            max_payload: c.max_payload,
            address_space: c.address_space,
            features: abi::features::ALL,
            link_state: link_bits(st.link_up, st.online),
            error_status: st.to_word(),
            membership_epoch: m.epoch,
            members: m.members.0,
            cluster_error_count: self.hub.cluster_error_count(),
            link_timing: link_timing_code(&c.link),
            max_record_data: MAX_RECORD_DATA,
        }
    }

    fn status_snapshot(&self, node: usize) -> StatusPage {
        let id = NodeId(node as u8);
        let st = self.hub.error_status(id).unwrap_or_default();
        let c = self.hub.node_counters(id).unwrap_or_default();
        let m = self.hub.membership();
        StatusPage {
            updates: 0,
            cluster_error_count: self.hub.cluster_error_count(),
            membership_epoch: m.epoch,
            members: m.members.0,
            error_status: st.to_word(),
            link_state: link_bits(st.link_up, st.online),
            packets_sent: c.packets_sent,
            bytes_sent: c.bytes_sent,
            packets_received: c.packets_received,
            bytes_received: c.bytes_received,
            drops: c.drops,
            errors: c.errors,
            protection_errors: c.protection_errors,
            events_lost: self.nodes[node].events_lost,
        }
    }

    /// Write every status page whose contents changed. The counter words are
    /// stored with single aligned 64-bit stores, the update count last, so a
    /// driver reads the error count with one load (seed 004, imc_rderrcnt).
    pub(crate) fn refresh_status_pages(&mut self) {
        for i in 0..self.nodes.len() {
            let Some(gpa) = self.nodes[i].status_page else {
                continue;
            };
            let mut snap = self.status_snapshot(i);
            if self.nodes[i].last_status == Some(snap) {
                continue;
            }
            // A sequence lock: `updates` is odd while the page is being written
            // and even once it is whole, so a reader can tell a torn copy. The
            // error count is also a single aligned store (one load for readers).
            let seq = self.nodes[i].status_updates;
            snap.updates = seq.wrapping_add(2);
            let Some(atomic) = self.nodes[i].mem.as_ref() else {
                continue;
            };
            let mem = atomic.memory();
            let bytes = snap.to_bytes();
            let u = abi::status_page::UPDATES;
            let at = |off: usize| GuestAddress(gpa + off as u64);
            let ok = mem
                .store(seq.wrapping_add(1), at(u), Ordering::Release)
                .is_ok()
                && mem.write_slice(&bytes[..u], at(0)).is_ok()
                && mem.write_slice(&bytes[u + 8..], at(u + 8)).is_ok()
                && mem
                    .store(
                        snap.cluster_error_count,
                        at(abi::status_page::CLUSTER_ERROR_COUNT),
                        Ordering::Release,
                    )
                    .is_ok()
                && mem.store(snap.updates, at(u), Ordering::Release).is_ok();
            if ok {
                snap.updates = 0;
                self.nodes[i].last_status = Some(snap);
                self.nodes[i].status_updates = seq.wrapping_add(2);
            } else {
                warn!("node{i}: status page at {gpa:#x} is no longer in guest RAM; dropping it");
                self.nodes[i].status_page = None;
            }
        }
    }

    /// Queue each event for the adapter it concerns and hand out what fits in
    /// the posted event buffers.
    pub(crate) fn dispatch(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut touched = vec![false; self.nodes.len()];
        for e in &events {
            match (e.node(), EventRecord::from_event(e)) {
                (Some(n), Some(rec)) => {
                    if let Some(node) = self.nodes.get_mut(n.index()) {
                        if node.mem.is_some() {
                            node.queue_event(rec);
                            touched[n.index()] = true;
                        }
                    }
                }
                _ => {
                    if let Event::FaultApplied { command, at } = e {
                        info!("fault applied at {:.3} ms: {command}", at.0 as f64 / 1e6);
                    }
                }
            }
        }
        for (i, t) in touched.into_iter().enumerate() {
            if t {
                self.flush_events(i);
            }
        }
    }

    /// Fill posted event buffers with pending events.
    pub(crate) fn flush_events(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let want = node.pending_events.len() + usize::from(node.overflow_unreported > 0);
        if want == 0 {
            return;
        }
        let (Some(vrings), Some(atomic)) = (node.vrings.as_ref(), node.mem.as_ref()) else {
            return;
        };
        let Some(vring) = vrings.get(abi::EVENT_QUEUE as usize).cloned() else {
            return;
        };
        let mem = atomic.memory();
        let chains: Vec<_> = match vring.get_mut().get_queue_mut().iter(mem.clone()) {
            Ok(it) => it.take(want).collect(),
            Err(_) => return,
        };
        let mut bad = 0;
        for chain in chains {
            let c = split_chain(chain, &mem, u64::MAX);
            let target = c
                .writable
                .filter(|w| c.defect.is_none() && w.1 as usize >= EVENT_SIZE);
            let Some((gpa, _)) = target else {
                let _ = vring.add_used(c.head, 0);
                bad += 1;
                continue;
            };
            let rec = if node.overflow_unreported > 0 {
                let r = EventRecord::overflow(node.overflow_unreported);
                node.overflow_unreported = 0;
                r
            } else {
                match node.pending_events.pop_front() {
                    Some(r) => r,
                    None => break,
                }
            };
            let written = mem.write_slice(&rec.to_bytes(), GuestAddress(gpa)).is_ok();
            let _ = vring.add_used(c.head, if written { EVENT_SIZE as u32 } else { 0 });
        }
        // Ask for a kick when the driver posts more buffers.
        let _ = vring.enable_notification();
        signal(&vring, i, "event");
        if bad > 0 {
            self.guest_error(i, format_args!("{bad} event buffer(s) unusable (need one writable buffer of {EVENT_SIZE} bytes)"));
        }
    }

    /// Take up to [`TX_BATCH`] transmit chains from node `i` and send them
    /// through the hub. Returns how many chains were processed.
    pub(crate) fn process_tx(&mut self, i: usize) -> usize {
        let node = &self.nodes[i];
        let (Some(vrings), Some(atomic)) = (node.vrings.as_ref(), node.mem.as_ref()) else {
            return 0;
        };
        let Some(vring) = vrings.get(abi::TX_QUEUE as usize).cloned() else {
            return 0;
        };
        let mem = atomic.memory();
        let chains: Vec<_> = match vring.get_mut().get_queue_mut().iter(mem.clone()) {
            Ok(it) => it.take(TX_BATCH).collect(),
            Err(_) => return 0,
        };
        if chains.is_empty() {
            return 0;
        }
        let n = chains.len();
        let mems: Vec<Option<MemGuard>> = self
            .nodes
            .iter()
            .map(|n| n.mem.as_ref().map(|a| a.memory()))
            .collect();
        let mut events = Vec::new();
        let mut guest_faults: Vec<String> = Vec::new();
        for chain in chains {
            let c = split_chain(chain, &mem, u64::from(MAX_TX_CHAIN_BYTES));
            let Some((wgpa, wlen)) = c.writable.filter(|w| w.1 as usize >= TX_COMPLETION_SIZE)
            else {
                let _ = vring.add_used(c.head, 0);
                guest_faults.push("transmit chain without an 8-byte writable completion".into());
                continue;
            };
            let (status, done) = match c.defect {
                Some(s) => (s, 0),
                None => self.transmit_records(i, &mem, &mems, &c, &mut events),
            };
            if status != Status::Ok
                && !matches!(
                    status,
                    Status::TransmitDisabled
                        | Status::OutOfRange
                        | Status::Empty
                        | Status::AckSlot
                        | Status::Offline
                )
            {
                // Layout faults the model never saw: count them here.
                guest_faults.push(format!("transmit chain refused: {status}"));
            }
            let completion = TxCompletion {
                status: status as u32,
                records_done: done,
            };
            let written = mem
                .write_slice(&completion.to_bytes(), GuestAddress(wgpa))
                .is_ok();
            debug!(
                "node{i}: tx chain {} -> {status} ({done} records, completion buffer {wlen} B)",
                c.head
            );
            let _ = vring.add_used(
                c.head,
                if written {
                    TX_COMPLETION_SIZE as u32
                } else {
                    0
                },
            );
        }
        signal(&vring, i, "transmit");
        drop(mems);
        for f in guest_faults {
            self.guest_error(i, format_args!("{f}"));
        }
        self.dispatch(events);
        n
    }

    fn transmit_records(
        &mut self,
        i: usize,
        mem: &MemGuard,
        mems: &[Option<MemGuard>],
        c: &Chain,
        events: &mut Vec<Event>,
    ) -> (Status, u32) {
        let total = c.readable_len;
        let mut off = 0u64;
        let mut done = 0u32;
        let now = self.now();
        // Deliveries wait for their due time when the user asked for hardware
        // timing, and always while the hub is stalled (a fault): unthrottled,
        // a stall is the only thing that makes a delivery due later.
        let stalled = self.hub.stalled_until() > now;
        let throttle_from = (self.throttle || stalled).then_some(self.start);
        let mut acks = Vec::new();
        while off < total {
            let mut h = [0u8; TX_RECORD_HEADER_SIZE];
            if total - off < TX_RECORD_HEADER_SIZE as u64
                || !scatter_read(mem, &c.readable, off, &mut h)
            {
                return (Status::Malformed, done);
            }
            let Some(hdr) = TxRecordHeader::from_bytes(&h) else {
                return (Status::Malformed, done);
            };
            if hdr.flags != 0 {
                return (Status::Malformed, done);
            }
            if hdr.len > MAX_RECORD_DATA {
                return (Status::TooLarge, done);
            }
            let data_off = off + TX_RECORD_HEADER_SIZE as u64;
            if data_off + u64::from(hdr.len) > total {
                return (Status::Malformed, done);
            }
            let data = runs(&c.readable, data_off, u64::from(hdr.len));
            let ClusterState { hub, nodes, .. } = &mut *self;
            let mut sink = DmaSink {
                mems,
                frames: nodes.iter().map(|n| &n.frames).collect(),
                src: i,
                src_data: &data,
                events,
                acks: &mut acks,
                throttle_from,
                failed: 0,
                pending: Vec::new(),
            };
            let sent = hub.transmit(
                now,
                NodeId(i as u8),
                GlobalAddr(hdr.addr),
                hdr.len,
                &mut sink,
            );
            sink.finish();
            if !acks.is_empty() {
                // The writer's status page first, then the answer: once the
                // answer is seen, the error count on the status page is current.
                self.refresh_status_pages();
                for a in acks.drain(..) {
                    self.write_ack(&a, mems);
                }
            }
            if let Err(e) = sent {
                let (s, detail) = status_of(&e);
                warn!(
                    "node{i}: store of {} bytes at {:#x} refused: {e}",
                    hdr.len, hdr.addr
                );
                debug!("node{i}: refusal detail {detail}");
                return (s, done);
            }
            done += 1;
            off = (off + TxRecordHeader::record_size(hdr.len)).min(total);
        }
        (Status::Ok, done)
    }

    fn write_ack(&self, a: &firmware_model::AckReport, mems: &[Option<MemGuard>]) {
        let w = a.writer.index();
        let (Some(Some(mem)), Some(node)) = (mems.get(w), self.nodes.get(w)) else {
            return;
        };
        let Some(frames) = node.frames.get(a.page.0) else {
            return;
        };
        let bytes: Vec<u8> = a.words.iter().flat_map(|x| x.to_le_bytes()).collect();
        if !scatter_write(mem, frames, u64::from(a.page_offset), &bytes) {
            warn!("node{w}: ACK status write to {} failed", a.page);
        }
    }

    /// Serve node `i`'s control queue.
    pub(crate) fn process_ctrl(&mut self, i: usize) {
        let node = &self.nodes[i];
        let (Some(vrings), Some(atomic)) = (node.vrings.as_ref(), node.mem.as_ref()) else {
            return;
        };
        let Some(vring) = vrings.get(abi::CTRL_QUEUE as usize).cloned() else {
            return;
        };
        let mem = atomic.memory();
        loop {
            let chains: Vec<_> = match vring.get_mut().get_queue_mut().iter(mem.clone()) {
                Ok(it) => it.collect(),
                Err(_) => return,
            };
            self.serve_ctrl_chains(i, &vring, &mem, chains);
            // Ask for a kick at the next request (EVENT_IDX avail_event); serve
            // again if one slipped in meanwhile.
            if !vring.enable_notification().unwrap_or(false) {
                break;
            }
        }
        signal(&vring, i, "control");
        self.refresh_status_pages();
    }

    fn serve_ctrl_chains(
        &mut self,
        i: usize,
        vring: &VringRwLock,
        mem: &MemGuard,
        chains: Vec<DescriptorChain<MemGuard>>,
    ) {
        for chain in chains {
            let c = split_chain(chain, mem, MAX_CTRL_BYTES);
            let Some((wgpa, _)) = c
                .writable
                .filter(|w| w.1 as usize >= abi::CTRL_RESPONSE_SIZE)
            else {
                let _ = vring.add_used(c.head, 0);
                self.guest_error(
                    i,
                    format_args!("control request without a 16-byte writable response"),
                );
                continue;
            };
            let resp = match c.defect {
                Some(s) => CtrlResponse::error(s, 0),
                None => {
                    let mut req = vec![0u8; c.readable_len as usize];
                    if scatter_read(mem, &c.readable, 0, &mut req) {
                        match CtrlRequest::decode(&req) {
                            Ok(r) => self.execute(i, mem, r),
                            Err(s) => CtrlResponse::error(s, 0),
                        }
                    } else {
                        CtrlResponse::error(Status::BadAddress, 0)
                    }
                }
            };
            if resp.status != Status::Ok as u32 {
                let what = status_str(resp.status);
                self.guest_error(
                    i,
                    format_args!("control request refused: {what} (detail {})", resp.detail),
                );
            }
            let written = mem
                .write_slice(&resp.to_bytes(), GuestAddress(wgpa))
                .is_ok();
            let _ = vring.add_used(
                c.head,
                if written {
                    abi::CTRL_RESPONSE_SIZE as u32
                } else {
                    0
                },
            );
        }
    }

    fn execute(&mut self, i: usize, mem: &MemGuard, req: CtrlRequest) -> CtrlResponse {
        let id = NodeId(i as u8);
        let pages = self.hub.config().page_count();
        match req {
            CtrlRequest::SetPct {
                first_page,
                count,
                entry,
                frames,
            } => {
                if u64::from(first_page) + u64::from(count) > u64::from(pages) {
                    return CtrlResponse::error(Status::OutOfRange, first_page);
                }
                let entry = match PctEntry::from_bits(entry) {
                    Ok(e) => e,
                    Err(e) => {
                        return CtrlResponse::error(Status::InvalidPct, abi::pct_error_code(&e))
                    }
                };
                if let Err(e) = entry.validate(id, self.hub.nodes()) {
                    return CtrlResponse::error(Status::InvalidPct, abi::pct_error_code(&e));
                }
                let per_page = (self.hub.config().page_size / FRAME_SIZE) as usize;
                if entry.receive {
                    if frames.len() != count as usize * per_page {
                        return CtrlResponse::error(Status::Malformed, frames.len() as u32);
                    }
                    for (k, f) in frames.iter().enumerate() {
                        if f % u64::from(FRAME_SIZE) != 0 || !range_ok(mem, *f, FRAME_SIZE as usize)
                        {
                            return CtrlResponse::error(Status::BadAddress, k as u32);
                        }
                    }
                } else if !frames.is_empty() {
                    return CtrlResponse::error(Status::Malformed, frames.len() as u32);
                }
                for k in 0..count {
                    let page = first_page + k;
                    // Frames first, so receive is never enabled without a target.
                    if entry.receive {
                        let f = &frames[k as usize * per_page..(k as usize + 1) * per_page];
                        self.nodes[i].frames.bind(page, f);
                    }
                    if let Err(e) = self.hub.set_pct(id, PageNumber(page), entry) {
                        let (s, d) = status_of(&e);
                        return CtrlResponse::error(s, d);
                    }
                    if !entry.receive {
                        self.nodes[i].frames.unbind(page);
                    }
                }
                CtrlResponse::ok(0, 0)
            }
            CtrlRequest::GetPct { page } => match self.hub.pct_entry(id, PageNumber(page)) {
                Ok(e) => CtrlResponse::ok(
                    u64::from(e.to_bits()),
                    u32::from(self.nodes[i].frames.get(page).is_some()),
                ),
                Err(e) => {
                    let (s, d) = status_of(&e);
                    CtrlResponse::error(s, d)
                }
            },
            CtrlRequest::SetStatusPage { gpa } => {
                if gpa == 0 {
                    self.nodes[i].status_page = None;
                    return CtrlResponse::ok(0, 0);
                }
                if gpa % 8 != 0 || !range_ok(mem, gpa, STATUS_PAGE_SIZE) {
                    return CtrlResponse::error(Status::BadAddress, 0);
                }
                self.nodes[i].status_page = Some(gpa);
                self.nodes[i].last_status = None;
                // Written in full before the answer, so the driver can read it
                // as soon as the request completes.
                self.refresh_status_pages();
                CtrlResponse::ok(0, 0)
            }
            CtrlRequest::GetStatus => {
                let word = self.hub.error_status(id).map(|s| s.to_word()).unwrap_or(0);
                CtrlResponse::ok(self.hub.cluster_error_count(), word)
            }
            CtrlRequest::Reset => {
                let _ = self.hub.reset_adapter(id);
                self.nodes[i].frames.clear();
                CtrlResponse::ok(0, 0)
            }
        }
    }

    /// The transmit vrings of the guests whose memory is mapped.
    fn live_tx_vrings(&self) -> impl Iterator<Item = &VringRwLock> {
        self.nodes.iter().filter_map(|n| {
            n.mem.as_ref()?;
            n.vrings.as_ref()?.get(abi::TX_QUEUE as usize)
        })
    }

    /// Arm transmit-queue notifications before the hub sleeps. Returns true if
    /// work arrived meanwhile (then do not sleep).
    pub(crate) fn arm_tx_notifications(&self) -> bool {
        let mut pending = false;
        for v in self.live_tx_vrings() {
            pending |= v.enable_notification().unwrap_or(false);
        }
        pending
    }

    /// Stop transmit-queue kicks while the hub polls.
    pub(crate) fn disarm_tx_notifications(&self) {
        for v in self.live_tx_vrings() {
            let _ = v.disable_notification();
        }
    }

    /// A guest went away: reset its adapter and forget its memory.
    pub(crate) fn disconnected(&mut self, i: usize) {
        let _ = self.hub.reset_adapter(NodeId(i as u8));
        self.nodes[i].forget_guest();
    }

    /// Apply a fault now (control socket, fault plans).
    pub(crate) fn apply_fault(&mut self, cmd: FaultCommand) -> Result<(), ModelError> {
        let mut sink = EventCollector::default();
        let now = self.now();
        let r = self.hub.apply_fault(now, cmd, &mut sink);
        if let FaultCommand::Crash(n) | FaultCommand::Rejoin(n) = cmd {
            if r.is_ok() {
                // The adapter's PCT is gone, so is its DMA map.
                if let Some(node) = self.nodes.get_mut(n.index()) {
                    node.frames.clear();
                }
            }
        }
        self.dispatch(sink.events);
        self.refresh_status_pages();
        r
    }

    /// Time until the next scheduled fault, if any.
    pub(crate) fn next_fault_in(&self) -> Option<std::time::Duration> {
        let next = self.hub.scheduled_faults().first()?.at;
        Some(std::time::Duration::from_nanos(
            next.0.saturating_sub(self.now().0),
        ))
    }

    /// Apply scheduled faults due by now.
    pub(crate) fn advance(&mut self) {
        if self
            .hub
            .scheduled_faults()
            .first()
            .is_some_and(|f| f.at <= self.now())
        {
            let mut sink = EventCollector::default();
            let now = self.now();
            self.hub.advance(now, &mut sink);
            self.dispatch(sink.events);
            self.refresh_status_pages();
        }
    }
}

fn link_bits(up: bool, online: bool) -> u32 {
    (if up { link::UP } else { 0 }) | (if online { link::ONLINE } else { 0 })
}

fn signal(vring: &VringRwLock, node: usize, queue: &str) {
    match vring.needs_notification() {
        Ok(true) => {
            if let Err(e) = vring.signal_used_queue() {
                warn!("node{node}: cannot signal the {queue} queue: {e}");
            }
        }
        Ok(false) => {}
        Err(e) => warn!("node{node}: {queue} queue notification check failed: {e}"),
    }
}

impl ClusterState {
    /// A guest wrote the read-only register file.
    pub(crate) fn refuse_config_write(&mut self, node: usize, offset: u32, len: usize) {
        self.guest_error(
            node,
            format_args!("write of {len} bytes to read-only register offset {offset:#x} refused"),
        );
        self.refresh_status_pages();
    }
}
