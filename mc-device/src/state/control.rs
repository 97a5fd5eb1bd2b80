//! The control queue: PCT programming, status page registration, status
//! queries and reset (docs/device.md section 14, "Control requests").

use firmware_model::abi::{
    self, status_of, CtrlRequest, CtrlResponse, Status, FRAME_SIZE, STATUS_PAGE_SIZE,
};
use firmware_model::{saturating_u32, NodeId, PageNumber, PctEntry};
use virtio_queue::DescriptorChain;
use vm_memory::{Bytes, GuestAddress};

use crate::chain::{split_chain, status_str};
use crate::memory::{range_ok, scatter_read, MemGuard};
use crate::node::ServedQueue;

use super::DeviceState;

/// Requests served under one hold of the device lock.
pub(crate) const CTRL_BATCH: usize = 8;

/// Largest readable part of a control request (a full SET_PCT with frames).
const MAX_CTRL_BYTES: u64 = abi::MAX_CTRL_REQUEST_BYTES as u64;

impl DeviceState {
    /// Serve up to [`CTRL_BATCH`] requests of `id`'s control queue (only
    /// once its driver configured it, and not while it is broken:
    /// node/queues.rs). Returns whether more are waiting: the caller lets the
    /// device lock go before it serves them, so one guest's stream of
    /// requests cannot hold the hub and the other nodes. A request is ordered
    /// after the stores committed before it: the caller has waited for the
    /// hub to take them (transmit/progress.rs).
    pub(crate) fn process_ctrl(&mut self, id: NodeId) -> bool {
        let q = match self.nodes[id.index()]
            .guest_mut()
            .served_queue(abi::CTRL_QUEUE)
        {
            Ok(Some(q)) => q,
            Ok(None) => return false,
            Err(d) => {
                self.queue_broken(id, abi::CTRL_QUEUE, d);
                self.refresh_status_pages();
                return false;
            }
        };
        let (chains, defect) = q.chains(CTRL_BATCH);
        let full = chains.len() == CTRL_BATCH;
        self.serve_ctrl_chains(id, &q, chains);
        if let Some(d) = defect {
            self.nodes[id.index()].signal(&q);
            if let Some(d) = self.nodes[id.index()]
                .guest_mut()
                .break_queue(abi::CTRL_QUEUE, d)
            {
                self.queue_broken(id, abi::CTRL_QUEUE, d);
            }
            self.refresh_status_pages();
            return false;
        }
        // Ask for a kick at the next request (EVENT_IDX avail_event), unless
        // more are known to wait; serve again if one slipped in meanwhile.
        let more = full || q.enable_notification();
        self.nodes[id.index()].signal(&q);
        self.refresh_status_pages();
        more
    }

    fn serve_ctrl_chains(
        &mut self,
        id: NodeId,
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
                    id,
                    format_args!("control request without a 16-byte writable response"),
                );
                continue;
            };
            let resp = match c.defect {
                Some(s) => CtrlResponse::error(s, 0),
                None => {
                    let mut req = vec![0u8; usize::try_from(c.readable_len).unwrap_or(0)];
                    if scatter_read(mem, &c.readable, 0, &mut req) {
                        match CtrlRequest::decode(&req) {
                            Ok(r) => self.execute(id, mem, r),
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
                    id,
                    format_args!("control request refused: {what} (detail {})", resp.detail),
                );
            }
            let written = mem
                .write_slice(&resp.to_bytes(), GuestAddress(wgpa))
                .is_ok();
            q.add_used(
                c.head,
                if written {
                    saturating_u32(abi::CTRL_RESPONSE_SIZE as u64)
                } else {
                    0
                },
            );
        }
    }

    fn execute(&mut self, id: NodeId, mem: &MemGuard, req: CtrlRequest) -> CtrlResponse {
        let i = id.index();
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
                        return CtrlResponse::error(
                            Status::Malformed,
                            saturating_u32(frames.len() as u64),
                        );
                    }
                    for (k, f) in frames.iter().enumerate() {
                        if f % u64::from(FRAME_SIZE) != 0 || !range_ok(mem, *f, FRAME_SIZE as usize)
                        {
                            return CtrlResponse::error(
                                Status::BadAddress,
                                saturating_u32(k as u64),
                            );
                        }
                    }
                } else if !frames.is_empty() {
                    return CtrlResponse::error(
                        Status::Malformed,
                        saturating_u32(frames.len() as u64),
                    );
                }
                for k in 0..count {
                    let page = first_page + k;
                    // Frames first, so receive is never enabled without a target.
                    if entry.receive {
                        let f = &frames[k as usize * per_page..(k as usize + 1) * per_page];
                        self.nodes[i].bind_frames(page, f);
                    }
                    if let Err(e) = self.hub.set_pct(id, PageNumber(page), entry) {
                        let (s, d) = status_of(&e);
                        return CtrlResponse::error(s, d);
                    }
                    if !entry.receive {
                        self.nodes[i].unbind_frames(page);
                    }
                }
                CtrlResponse::ok(0, 0)
            }
            CtrlRequest::GetPct { page } => match self.hub.pct_entry(id, PageNumber(page)) {
                Ok(e) => CtrlResponse::ok(
                    u64::from(e.to_bits()),
                    u32::from(self.nodes[i].frames(page).is_some()),
                ),
                Err(e) => {
                    let (s, d) = status_of(&e);
                    CtrlResponse::error(s, d)
                }
            },
            CtrlRequest::SetStatusPage { gpa } => {
                if gpa == 0 {
                    self.nodes[i].status_mut().register(None);
                    return CtrlResponse::ok(0, 0);
                }
                if gpa % 8 != 0 || !range_ok(mem, gpa, STATUS_PAGE_SIZE) {
                    return CtrlResponse::error(Status::BadAddress, 0);
                }
                self.nodes[i].status_mut().register(Some(gpa));
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
                self.nodes[i].reset_adapter();
                CtrlResponse::ok(0, 0)
            }
            CtrlRequest::SetTxFifo { gpa, slots } => {
                self.nodes[i].register_tx_fifo(mem, gpa, slots)
            }
            CtrlRequest::SetArrivalTable { gpa, granule_shift } => {
                let config = self.hub.config();
                match self.nodes[i].register_arrival_table(mem, gpa, granule_shift, config) {
                    Ok(()) => CtrlResponse::ok(0, 0),
                    Err((s, d)) => CtrlResponse::error(s, d),
                }
            }
        }
    }
}
