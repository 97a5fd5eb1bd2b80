//! The register file and the status page contents: what a driver reads
//! about its adapter and the cluster (docs/device.md sections 13 and 16),
//! built from the hub and the node; the node writes its page
//! (node/status_page.rs).

use firmware_model::abi::{
    self, delivery_mode_code, link, link_timing_code, Registers, StatusPage, MAX_RECORD_DATA,
};
use firmware_model::{Nanos, NodeId};
use log::Level;

use super::DeviceState;

impl DeviceState {
    /// The register file as `id` sees it now.
    pub(crate) fn registers(&self, id: NodeId) -> Registers {
        let c = self.hub.config();
        let st = self.hub.error_status(id).unwrap_or_default();
        let m = self.hub.membership();
        Registers {
            node_id: u32::from(id.0),
            nodes: u32::from(c.nodes),
            page_size: c.page_size,
            max_payload: c.max_payload,
            address_space: c.address_space,
            features: abi::features::ALL,
            link_state: link_bits(st.link_up, st.online),
            error_status: st.to_word(),
            membership_epoch: m.epoch,
            members: m.members.0,
            cluster_error_count: self.shown_errors(id),
            link_timing: link_timing_code(&c.link),
            max_record_data: MAX_RECORD_DATA,
            delivery_mode: delivery_mode_code(&c.delivery),
            broken_queues: self.nodes[id.index()].guest().broken_queues(),
        }
    }

    fn status_snapshot(&self, id: NodeId) -> StatusPage {
        let st = self.hub.error_status(id).unwrap_or_default();
        let c = self.hub.node_counters(id).unwrap_or_default();
        let m = self.hub.membership();
        StatusPage {
            updates: 0,
            cluster_error_count: self.shown_errors(id),
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
            events_lost: self.nodes[id.index()].events_lost(),
        }
    }

    /// Write every status page whose contents changed.
    pub(crate) fn refresh_status_pages(&mut self) {
        self.age_errors();
        for id in self.node_ids() {
            if !self.nodes[id.index()].status().registered() {
                continue;
            }
            let snap = self.status_snapshot(id);
            let node = &mut self.nodes[id.index()];
            if let Err(gone) = node.write_status_page(snap) {
                node.log(
                    Level::Warn,
                    format_args!(
                        "status page at {:#x} is no longer in guest RAM; dropping it",
                        gone.0
                    ),
                );
            }
        }
    }

    /// The cluster error count `id` is shown (status page, register).
    pub(crate) fn shown_errors(&self, id: NodeId) -> u64 {
        if self.hub.delivery_mode().is_skewed() {
            self.nodes
                .get(id.index())
                .map_or(0, |n| n.status().shown_errors())
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
            for id in self.node_ids() {
                let at = now.saturating_add(self.hub.status_lag(id));
                self.nodes[id.index()].status_mut().lag_until(count, at);
            }
        }
        for node in &mut self.nodes {
            node.status_mut().age(now);
        }
    }

    /// `id` learns the current cluster error count at once: an ACK answer
    /// reaches it, or its own adapter detected an error.
    pub(crate) fn status_catch_up(&mut self, id: NodeId) {
        let count = self.hub.cluster_error_count();
        if let Some(node) = self.nodes.get_mut(id.index()) {
            node.status_mut().catch_up(count);
        }
    }

    /// When the next lagging error count becomes visible somewhere.
    pub(crate) fn next_error_visible(&self) -> Option<Nanos> {
        self.nodes
            .iter()
            .filter_map(|n| n.status().next_visible())
            .min()
    }
}

pub(crate) fn link_bits(up: bool, online: bool) -> u32 {
    (if up { link::UP } else { 0 }) | (if online { link::ONLINE } else { 0 })
}
