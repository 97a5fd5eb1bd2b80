//! The errors of the Memory Channel API.

use std::time::Duration;

use firmware_model::abi::Status;
use firmware_model::NodeId;

/// Errors of the Memory Channel API.
#[derive(Debug, thiserror::Error)]
pub enum McError {
    #[error("adapter: {0}")]
    Device(String),
    #[error("the adapter refused the request: {status} (detail {detail})")]
    Refused { status: Status, detail: u32 },
    #[error("no region with {0}")]
    NoSuchRegion(String),
    #[error("region key {key} exists with {size} bytes, not {wanted}")]
    RegionSize { key: u32, size: u64, wanted: u64 },
    #[error("no lock set with key {0}")]
    NoSuchLockSet(u32),
    #[error("lock set key {0} already exists (exclusive creation)")]
    LockSetExists(u32),
    #[error("lock set key {key} exists with {count} locks, not {wanted}")]
    LockSetSize { key: u32, count: u32, wanted: u32 },
    #[error("out of Memory Channel space: {0}")]
    NoSpace(String),
    #[error("{what} is busy: {reason}")]
    Busy { what: String, reason: String },
    #[error("lock {index} of set {set} is not held by this node")]
    NotHeld { set: u32, index: u32 },
    #[error("lock {index} of set {set} is already held by this node")]
    AlreadyHeld { set: u32, index: u32 },
    #[error("node {node} may not attach region {id} for {direction}: the creator's permissions forbid it")]
    PermissionDenied {
        node: u8,
        id: u32,
        direction: &'static str,
    },
    #[error("point-to-point transmit to {0} is not possible here: it must be another node of the cluster, and the region an ordinary (not coherent) one")]
    BadDestination(NodeId),
    #[error("lock index {index} out of range: set {set} has {count} locks")]
    NoSuchLock { set: u32, index: u32, count: u32 },
    #[error("access of {len} bytes at offset {offset} is outside the {size}-byte region")]
    OutOfBounds {
        offset: usize,
        len: usize,
        size: usize,
    },
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, String),
    #[error("this node's adapter is offline (crashed): it is out of the cluster until it rejoins")]
    Offline,
    #[error("corrupt Memory Channel state: {0}")]
    Corrupt(String),
    #[error("the cluster layout does not fit: {0}")]
    Layout(String),
}
