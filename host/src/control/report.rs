//! The text the control socket answers `stats` and `status` with.

use mc_device::{ClusterSnapshot, FaultStatus};

/// The per-node counter table.
pub fn format_snapshot(s: &ClusterSnapshot) -> String {
    let mut t = format!(
        "membership epoch {} members {}; cluster error count {}; up {:.1} s\n",
        s.membership.epoch,
        s.membership.members,
        s.cluster_error_count,
        s.uptime.0 as f64 / 1e9
    );
    t += &format!(
        "{:<6} {:<9} {:>5} {:>10} {:>12} {:>10} {:>12} {:>7} {:>7} {:>7}\n",
        "node",
        "state",
        "conns",
        "pkts tx",
        "bytes tx",
        "pkts rx",
        "bytes rx",
        "drops",
        "errors",
        "refused"
    );
    for n in &s.nodes {
        let c = &n.counters;
        let state = match (n.status.online, n.status.link_up, n.connected) {
            (false, _, _) => "crashed",
            (true, false, _) => "link-down",
            (true, true, true) => "up",
            (true, true, false) => "idle",
        };
        t += &format!(
            "{:<6} {:<9} {:>5} {:>10} {:>12} {:>10} {:>12} {:>7} {:>7} {:>7}\n",
            n.node.to_string(),
            state,
            n.connections,
            c.packets_sent,
            c.bytes_sent,
            c.packets_received,
            c.bytes_received,
            c.drops,
            c.errors,
            c.protection_errors
        );
    }
    t += &format!(
        "hub: {} packets ({} broadcast), {} deliveries, {} drops, {} errors, {} ACKs\n",
        s.hub.packets, s.hub.broadcasts, s.hub.deliveries, s.hub.drops, s.hub.errors, s.hub.acks
    );
    t
}

pub(super) fn format_status(f: &FaultStatus, s: &ClusterSnapshot) -> String {
    let mut t = String::new();
    if f.rules.is_empty() {
        t += "packet faults: none\n";
    }
    for (fault, scope, rate) in &f.rules {
        t += &format!("packet fault: {fault} {rate} {scope}\n");
    }
    for n in &s.nodes {
        if !n.status.online {
            t += &format!("{}: crashed\n", n.node);
        } else if !n.status.link_up {
            t += &format!("{}: link down\n", n.node);
        }
    }
    if f.stalled_until > f.now {
        t += &format!(
            "hub stalled for another {:.3} ms\n",
            (f.stalled_until.0 - f.now.0) as f64 / 1e6
        );
    }
    for sf in &f.scheduled {
        t += &format!(
            "scheduled at {:.3} s: {}\n",
            sf.at.0 as f64 / 1e9,
            sf.command
        );
    }
    t += &format!(
        "cluster error count {}, drops {}, membership epoch {} members {}\n",
        s.cluster_error_count, s.hub.drops, s.membership.epoch, s.membership.members
    );
    t
}
