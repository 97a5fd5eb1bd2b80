//! The control queue: PCT programming, status page registration, status
//! queries and reset (docs/device.md section 14, "Control requests").

use firmware_model::abi::{
    self, fifo, status_of, CtrlRequest, CtrlResponse, Status, FRAME_SIZE, STATUS_PAGE_SIZE,
};
use std::sync::atomic::Ordering;

use firmware_model::{NodeId, PageNumber, PctEntry};
use virtio_queue::DescriptorChain;
use vm_memory::{Bytes, GuestAddress, GuestAddressSpace, GuestMemoryBackend};

use crate::chain::{split_chain, status_str};
use crate::memory::{range_ok, scatter_read, MemGuard};
use crate::node::RegisteredFifo;
use crate::ring_access::ServedQueue;
use crate::state::DeviceState;

/// Largest readable part of a control request (a full SET_PCT with frames).
const MAX_CTRL_BYTES: u64 = abi::MAX_CTRL_REQUEST_BYTES as u64;

impl DeviceState {
    /// Serve node `i`'s control queue (only once its driver configured it,
    /// and not while it is broken: ring_access.rs). Every store already
    /// committed in the node's transmit FIFO is taken first: a control
    /// request is ordered after the stores before it, as the real adapter's
    /// register writes come after earlier posted writes on the PCI bus (a
    /// region detached right after a store still sends that store).
    pub(crate) fn process_ctrl(&mut self, i: usize) {
        self.take_committed_stores(i);
        let Some(q) = self.served_queue(i, abi::CTRL_QUEUE) else {
            return;
        };
        loop {
            let (chains, defect) = q.chains(usize::MAX);
            self.serve_ctrl_chains(i, &q, chains);
            if let Some(d) = defect {
                q.signal();
                self.break_queue(i, abi::CTRL_QUEUE, d);
                self.refresh_status_pages();
                return;
            }
            // Ask for a kick at the next request (EVENT_IDX avail_event); serve
            // again if one slipped in meanwhile.
            if !q.enable_notification() {
                break;
            }
        }
        q.signal();
        self.refresh_status_pages();
    }

    fn serve_ctrl_chains(
        &mut self,
        i: usize,
        q: &ServedQueue,
        chains: Vec<DescriptorChain<MemGuard>>,
    ) {
        let mem = &q.mem;
        for chain in chains {
            let c = split_chain(chain, mem, MAX_CTRL_BYTES);
            let Some((wgpa, _)) = c
                .writable
                .filter(|w| w.1 as usize >= abi::CTRL_RESPONSE_SIZE)
            else {
                q.add_used(c.head, 0);
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
            q.add_used(
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
                self.nodes[i].fifo = None;
                CtrlResponse::ok(0, 0)
            }
            CtrlRequest::SetTxFifo { gpa, slots } => self.set_tx_fifo(i, mem, gpa, slots),
        }
    }
}

impl DeviceState {
    /// Register (or with `gpa == 0` forget) node `i`'s transmit FIFO. It must
    /// be 4096-aligned and lie in one piece of guest RAM. The device clears
    /// the tag array and the header, so a ring used before commits nothing.
    fn set_tx_fifo(&mut self, i: usize, mem: &MemGuard, gpa: u64, slots: u32) -> CtrlResponse {
        if gpa == 0 {
            self.nodes[i].fifo = None;
            return CtrlResponse::ok(0, 0);
        }
        if !fifo::valid_slots(slots) {
            return CtrlResponse::error(Status::Malformed, slots);
        }
        let bytes = fifo::bytes(slots);
        if gpa % 4096 != 0 || mem.get_slice(GuestAddress(gpa), bytes).is_err() {
            return CtrlResponse::error(Status::BadAddress, 0);
        }
        let clear = vec![0u8; fifo::slots_offset(slots)];
        if mem.write_slice(&clear, GuestAddress(gpa)).is_err() {
            return CtrlResponse::error(Status::BadAddress, 0);
        }
        let _ = mem.store(
            fifo::State::Running as u32,
            GuestAddress(gpa + fifo::header::STATE as u64),
            Ordering::Release,
        );
        self.nodes[i].fifo = Some(RegisteredFifo::new(gpa, slots));
        CtrlResponse::ok(0, 0)
    }
}

impl DeviceState {
    /// Take every record committed in node `i`'s FIFO now (bounded: at most
    /// one ring's worth, so a guest that keeps posting cannot hold this).
    pub(crate) fn take_committed_stores(&mut self, i: usize) {
        let Some(slots) = self.nodes[i].fifo.map(|f| u64::from(f.slots)) else {
            return;
        };
        let mems: Vec<_> = self
            .nodes
            .iter()
            .map(|n| n.mem.as_ref().map(GuestAddressSpace::memory))
            .collect();
        let mut taken = 0u64;
        while taken < slots {
            let n = self.process_fifo(i, &mems) as u64;
            if n == 0 {
                break;
            }
            taken += n;
        }
    }
}
