//! The register file and the status page contents: what a driver reads
//! about its adapter and the cluster (docs/device.md sections 13 and 16),
//! built from the hub and the node; the node writes its page
//! (node/status_page.rs).
//!
//! Under skewed delivery each node is shown the cluster error count late, at
//! a (seeded) moment of its own: [`StatusBoard`] notes when the count moved
//! and hands each node its moment. `imc_rderrcnt` "is not guaranteed to be
//! up-to-date for all nodes in the cluster" (seed 004, Table 1); only
//! `imc_ckerrcnt` synchronises.

use firmware_model::abi::{
    self, delivery_mode_code, link, link_timing_code, Registers, StatusPage, MAX_RECORD_DATA,
};
use firmware_model::{Hub, Nanos};
use log::Level;

use crate::cluster_clock::ClusterClock;
use crate::node::NodeState;

/// When each node is shown the cluster error count (skewed delivery).
#[derive(Debug, Default)]
pub(crate) struct StatusBoard {
    /// The cluster error count when status-page lags were last handed out.
    noted_errors: u64,
}

impl StatusBoard {
    /// Write every status page whose contents changed.
    pub(crate) fn refresh(&mut self, hub: &mut Hub, nodes: &mut [NodeState], clock: ClusterClock) {
        self.age_errors(hub, nodes, clock);
        for node in nodes {
            if !node.status().registered() {
                continue;
            }
            let snap = status_snapshot(hub, node);
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

    /// Skewed delivery: give each node a (seeded) moment at which the errors
    /// counted since the last look become visible to it, and show those whose
    /// moment has come.
    fn age_errors(&mut self, hub: &mut Hub, nodes: &mut [NodeState], clock: ClusterClock) {
        if !hub.delivery_mode().is_skewed() {
            return;
        }
        let now = clock.now();
        let count = hub.cluster_error_count();
        if count > self.noted_errors {
            self.noted_errors = count;
            for node in nodes.iter_mut() {
                let at = now.saturating_add(hub.status_lag(node.id()));
                node.status_mut().lag_until(count, at);
            }
        }
        for node in nodes {
            node.status_mut().age(now);
        }
    }
}

/// The register file as `node` sees it now.
pub(crate) fn registers(hub: &Hub, node: &NodeState) -> Registers {
    let id = node.id();
    let c = hub.config();
    let st = hub.error_status(id).unwrap_or_default();
    let m = hub.membership();
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
        cluster_error_count: shown_errors(hub, node),
        link_timing: link_timing_code(&c.link),
        max_record_data: MAX_RECORD_DATA,
        delivery_mode: delivery_mode_code(&c.delivery),
        broken_queues: node.guest().broken_queues(),
    }
}

fn status_snapshot(hub: &Hub, node: &NodeState) -> StatusPage {
    let id = node.id();
    let st = hub.error_status(id).unwrap_or_default();
    let c = hub.node_counters(id).unwrap_or_default();
    let m = hub.membership();
    StatusPage {
        updates: 0,
        cluster_error_count: shown_errors(hub, node),
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
        events_lost: node.events_lost(),
    }
}

/// The cluster error count `node` is shown (status page, register).
fn shown_errors(hub: &Hub, node: &NodeState) -> u64 {
    if hub.delivery_mode().is_skewed() {
        node.status().shown_errors()
    } else {
        hub.cluster_error_count()
    }
}

/// `node` learns the current cluster error count at once: an ACK answer
/// reaches it, or its own adapter detected an error.
pub(crate) fn catch_up(hub: &Hub, node: &mut NodeState) {
    node.status_mut().catch_up(hub.cluster_error_count());
}

/// When the next lagging error count becomes visible somewhere.
pub(crate) fn next_error_visible(nodes: &[NodeState]) -> Option<Nanos> {
    nodes.iter().filter_map(|n| n.status().next_visible()).min()
}

fn link_bits(up: bool, online: bool) -> u32 {
    (if up { link::UP } else { 0 }) | (if online { link::ONLINE } else { 0 })
}
