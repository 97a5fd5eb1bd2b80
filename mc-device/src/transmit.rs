//! The transmit queue: records taken from a guest's transmit chains, sent
//! through the hub (the model decides who receives what, in which order) and
//! delivered by DMA (docs/device.md section 14, "Transmit records").

use firmware_model::abi::{
    self, status_of, Status, TxCompletion, TxRecordHeader, MAX_RECORD_DATA, MAX_TX_CHAIN_BYTES,
    TX_COMPLETION_SIZE, TX_RECORD_HEADER_SIZE,
};
use firmware_model::{Event, GlobalAddr, NodeId};
use log::{debug, warn, Level};
use vhost_user_backend::{VringRwLock, VringT};
use virtio_queue::QueueOwnedT;
use vm_memory::{Bytes, GuestAddress, GuestAddressSpace};

use crate::chain::{signal, split_chain, SplitChain};
use crate::delivery::DmaDelivery;
use crate::memory::{runs, scatter_read, scatter_write, MemGuard};
use crate::state::DeviceState;

/// Chains taken from one transmit queue in one pass, so one busy guest cannot
/// hold the hub away from the others.
pub(crate) const TX_BATCH: usize = 64;

impl DeviceState {
    /// Take up to [`TX_BATCH`] transmit chains from node `i` and send them
    /// through the hub. Returns how many chains were processed.
    pub(crate) fn process_tx(&mut self, i: usize) -> usize {
        let Some(q) = self.served_queue(i, abi::TX_QUEUE) else {
            return 0;
        };
        let (vring, mem) = (q.vring, q.mem);
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
        c: &SplitChain,
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
            let DeviceState { hub, nodes, .. } = &mut *self;
            let mut sink = DmaDelivery {
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
                self.guest_log(
                    i,
                    Level::Warn,
                    format_args!("store of {} bytes at {:#x} refused: {e}", hdr.len, hdr.addr),
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

    /// The transmit vrings of the guests whose memory is mapped.
    fn live_tx_vrings(&self) -> impl Iterator<Item = &VringRwLock> {
        self.nodes.iter().filter_map(|n| {
            n.mem.as_ref()?;
            n.vrings
                .as_ref()?
                .get(abi::TX_QUEUE as usize)
                .filter(|v| n.queue_live(abi::TX_QUEUE, v))
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
}
