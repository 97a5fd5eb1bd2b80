//! Cluster membership as this node sees it: the members from the status page
//! (imc_gethosts) and the membership changes the device reported.

use firmware_model::abi::event_type;
use firmware_model::NodeId;

use crate::node::Node;
use crate::port::McPort;

/// Members of the cluster (imc_gethosts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostList {
    pub epoch: u64,
    pub members: Vec<NodeId>,
}

impl Node {
    /// Current cluster members (bit i = node i), from the status page.
    pub(crate) fn members_mask(&self) -> u64 {
        let m = self.port().status().members;
        if m == 0 {
            self.regs.members
        } else {
            m
        }
    }

    /// Cluster members and the membership epoch (imc_gethosts).
    pub(crate) fn hosts(&self) -> HostList {
        let s = self.port().status();
        HostList {
            epoch: s.membership_epoch,
            members: (0..64)
                .filter(|n| s.members & (1u64 << n) != 0)
                .map(NodeId)
                .collect(),
        }
    }

    /// Membership changes seen since the last call: (epoch, members).
    pub(crate) fn membership_changes(&self) -> Vec<(u64, u64)> {
        self.pump_events();
        let mut ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        ev.retain(|e| {
            if e.kind == event_type::MEMBERSHIP {
                out.push((e.v0, e.v1));
                false
            } else {
                true
            }
        });
        out
    }
}
