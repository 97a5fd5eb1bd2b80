//! A node as log lines name it (`node3`): a leaf module, so the guest-log
//! limiter and the node state can both name nodes.

use std::fmt;

use firmware_model::NodeId;

pub(crate) struct Node(pub(crate) NodeId);

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0 .0)
    }
}
