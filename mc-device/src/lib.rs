//! The Memory Channel adapter as a vhost-user backend.
//!
//! One [`Cluster`] is one hub and one adapter per node; each adapter is served on
//! its own vhost-user socket, to which a QEMU guest (through
//! `vhost-user-test-device-pci`) or a virtual guest attaches. Guest stores arrive
//! as records on the transmit queue, go through the hub (the `firmware-model`,
//! which decides who receives what, in which order) and land by DMA in the
//! receiving guests' RAM at the frames their page control table names. This crate
//! adds no semantics of its own: it moves bytes and reports errors.
//!
//! See docs/device.md for the guest-visible interface.
//!
//! ```
//! use firmware_model::{ClusterConfig, NodeId};
//! use mc_device::{Cluster, ClusterOptions};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let cluster = Cluster::start(ClusterOptions::new(ClusterConfig::new(2), dir.path())).unwrap();
//! // QEMU attaches here: -chardev socket,id=mc0,path=<this> ...
//! assert!(cluster.socket_path(NodeId(1)).unwrap().ends_with("node1.sock"));
//! assert_eq!(cluster.snapshot().membership.members.len(), 2);
//! cluster.shutdown();
//! ```

#![deny(clippy::cast_possible_truncation)]

mod chain;
mod cluster;
mod cluster_clock;
mod delivery;
mod device;
mod error;
mod guarded_vring;
mod guest_log;
mod hub_loop;
mod mem_table;
mod memory;
mod node;
mod node_name;
mod server;
mod socket_dir;
mod state;
mod status;
mod store_order;
mod transmit;
mod vhost_user;

pub use cluster::{Cluster, ClusterOptions, ClusterSnapshot, FaultStatus, NodeSnapshot};
pub use error::DeviceError;

// Test-only code, in one folder (tests/): the unit tests, the rigs they share
// with the integration tests (feature `test-rig`), and the fuzz entry points
// (feature `fuzzing`). Neither feature is on in a build of the device.
#[cfg(any(test, feature = "test-rig"))]
mod tests;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub use tests::fuzz;
#[cfg(any(test, feature = "test-rig"))]
pub use tests::rig as test_rig;
