//! The register file and the status page: what a driver reads about its
//! adapter and the cluster (docs/device.md sections 13 and 16).

use std::sync::atomic::Ordering;

use firmware_model::abi::{
    self, delivery_mode_code, link, link_timing_code, Registers, StatusPage, MAX_RECORD_DATA,
};
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
            cluster_error_count: self.shown_errors(node),
            link_timing: link_timing_code(&c.link),
            max_record_data: MAX_RECORD_DATA,
            delivery_mode: delivery_mode_code(&c.delivery),
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
            cluster_error_count: self.shown_errors(node),
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
        self.age_errors();
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
            let count = abi::status_page::CLUSTER_ERROR_COUNT;
            let at = |off: usize| GuestAddress(gpa + off as u64);
            let ok = mem
                .store(seq.wrapping_add(1), at(u), Ordering::Release)
                .is_ok()
                && mem.write_slice(&bytes[..u], at(0)).is_ok()
                // Around the error count, which gets one aligned store below
                // (a copy could tear it for a reader's single load).
                && mem.write_slice(&bytes[u + 8..count], at(u + 8)).is_ok()
                && mem.write_slice(&bytes[count + 8..], at(count + 8)).is_ok()
                && mem
                    .store(snap.cluster_error_count, at(count), Ordering::Release)
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

impl DeviceState {
    /// The cluster error count node `i` is shown (status page, register).
    pub(crate) fn shown_errors(&self, i: usize) -> u64 {
        if self.hub.delivery_mode().is_skewed() {
            self.nodes.get(i).map_or(0, |n| n.shown_errors)
        } else {
            self.hub.cluster_error_count()
        }
    }

    /// Skewed delivery: give each node a (seeded) moment at which the errors
    /// counted since the last look become visible to it, and show those whose
    /// moment has come. `imc_rderrcnt` "is not guaranteed to be up-to-date for
    /// all nodes in the cluster" (seed 004, Table 1); only `imc_ckerrcnt`
    /// synchronises.
    fn age_errors(&mut self) {
        if !self.hub.delivery_mode().is_skewed() {
            return;
        }
        let now = self.now();
        let count = self.hub.cluster_error_count();
        if count > self.noted_errors {
            self.noted_errors = count;
            for i in 0..self.nodes.len() {
                let at = now.saturating_add(self.hub.status_lag(NodeId(i as u8)));
                self.nodes[i].error_lag.push_back((count, at));
            }
        }
        for node in &mut self.nodes {
            while let Some(&(c, at)) = node.error_lag.front() {
                if at > now {
                    break;
                }
                node.shown_errors = node.shown_errors.max(c);
                node.error_lag.pop_front();
            }
        }
    }

    /// Node `i` learns the current cluster error count at once: an ACK
    /// answer reaches it, or its own adapter detected an error.
    pub(crate) fn status_catch_up(&mut self, i: usize) {
        let count = self.hub.cluster_error_count();
        if let Some(node) = self.nodes.get_mut(i) {
            node.shown_errors = node.shown_errors.max(count);
            node.error_lag.retain(|&(c, _)| c > count);
        }
    }

    /// When the next lagging error count becomes visible somewhere.
    pub(crate) fn next_error_visible(&self) -> Option<firmware_model::Nanos> {
        self.nodes
            .iter()
            .filter_map(|n| n.error_lag.front())
            .map(|e| e.1)
            .min()
    }
}

pub(crate) fn link_bits(up: bool, online: bool) -> u32 {
    (if up { link::UP } else { 0 }) | (if online { link::ONLINE } else { 0 })
}
