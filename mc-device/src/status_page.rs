//! The register file and the status page: what a driver reads about its
//! adapter and the cluster (docs/device.md sections 13 and 16).

use std::sync::atomic::Ordering;

use firmware_model::abi::{self, link, link_timing_code, Registers, StatusPage, MAX_RECORD_DATA};
use firmware_model::NodeId;
use log::warn;
use vm_memory::{Bytes, GuestAddress, GuestAddressSpace};

use crate::state::DeviceState;

impl DeviceState {
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
            broken_queues: self.nodes[node].broken_queues,
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
}

pub(crate) fn link_bits(up: bool, online: bool) -> u32 {
    (if up { link::UP } else { 0 }) | (if online { link::ONLINE } else { 0 })
}
