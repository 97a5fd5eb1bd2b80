//! The errors of the Memory Channel API: one variant per cause, carrying the
//! values a caller can act on (a key, an id, a size, a node, what a wait was
//! for), and the driver's own error as the source where the driver failed.

use std::fmt;
use std::time::Duration;

use firmware_model::abi::Status;
use firmware_model::{NodeId, NodeSet};

use crate::layout::Layout;
use crate::lost::{LossEvidence, LostPacket};

/// Errors of the Memory Channel API.
#[derive(Debug, thiserror::Error)]
pub enum McError {
    /// The adapter driver failed: transport, queues, DMA memory, or a
    /// control request (a PCT entry, the status page) the device refused.
    #[error("adapter driver")]
    Driver(#[from] mc_driver::Error),
    /// The device refused a store (the transmit completion's status).
    #[error("the adapter refused the request: {status} (detail {detail})")]
    Refused { status: Status, detail: u32 },
    #[error("cannot start the late-join thread")]
    JoinThread(#[source] std::io::Error),
    #[error("no region with {0}")]
    NoSuchRegion(RegionRef),
    #[error("region {0} is coherent: every node receives all of it, not some pages")]
    CoherentReceivedWhole(u32),
    #[error("region key {key} exists with {size} bytes, not {wanted}")]
    RegionSize { key: u32, size: u64, wanted: u64 },
    #[error("a region needs at least one byte")]
    EmptyRegion,
    #[error("no lock set with id {0}")]
    NoSuchLockSet(u32),
    #[error("lock set key {0} already exists (exclusive creation)")]
    LockSetExists(u32),
    #[error("lock set key {key} exists with {count} locks, not {wanted}")]
    LockSetSize { key: u32, count: u32, wanted: u32 },
    #[error("a lock set needs at least one lock")]
    EmptyLockSet,
    #[error("out of Memory Channel space: no {0}")]
    NoSpace(Shortage),
    #[error("region {region} is busy: {conflict}")]
    Busy { region: u32, conflict: Conflict },
    #[error("lock {index} of set {set} is not held by this node")]
    NotHeld { set: u32, index: u32 },
    #[error("lock {index} of set {set} is already held by this node")]
    AlreadyHeld { set: u32, index: u32 },
    #[error("node {node} may not attach region {id} for {direction}: the creator's permissions forbid it")]
    PermissionDenied {
        node: u8,
        id: u32,
        direction: Direction,
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
    #[error("timed out after {after:?} waiting for {waiting_for}")]
    Timeout {
        after: Duration,
        waiting_for: WaitFor,
    },
    /// This node's own store never came back: the ACK page answered for
    /// everything queued after it, so the network lost it (corrupted and
    /// discarded, or dropped). Memory Channel does not retransmit; an API
    /// opened `reliable` does.
    #[error(
        "gave up waiting for {waiting_for}: the store was lost on the network (the cluster \
         error count went from {errors_before} to {errors_now}); Memory Channel does not \
         retransmit: open the API reliable (mc-guest --reliable) or check errors around \
         the stores"
    )]
    Lost {
        waiting_for: WaitFor,
        errors_before: u64,
        errors_now: u64,
    },
    /// A wait for another node's store lasted long while this node's
    /// adapter counted packets lost on its link: the loss of `lost`
    /// explains it (docs/api.md, waits). Memory Channel does not
    /// retransmit.
    #[error(
        "gave up waiting for {waiting_for}: {lost} was lost on the network: {evidence}; \
         Memory Channel does not retransmit"
    )]
    LostPacket {
        waiting_for: WaitFor,
        lost: LostPacket,
        evidence: LossEvidence,
    },
    #[error("this node's adapter is offline (crashed): it is out of the cluster until it rejoins")]
    Offline,
    /// The API's handles were all dropped while the late join still ran.
    #[error("the Memory Channel API was closed")]
    Closed,
    /// A server gave up retransmitting to `joiner`: it left the cluster.
    #[error("the resync of {joiner} stopped: it left the cluster")]
    JoinerLeft { joiner: NodeId },
    /// A server gave up retransmitting to `joiner` (and tries again later):
    /// words of the coherent state kept changing.
    #[error("the resync of {joiner} stopped: words kept changing for {rounds} rounds")]
    ResyncUnsettled { joiner: NodeId, rounds: u32 },
    #[error("the {0} table in Memory Channel space is unreadable")]
    CorruptTable(TableKind),
    #[error("the {0} table keeps changing under the reader")]
    UnstableTable(TableKind),
    #[error(
        "the coherent arena ({} pages of {} bytes) with the control pages and their resync \
         window needs more than the cluster's {} Memory Channel pages{}",
        .0.arena_pages,
        .0.page_size,
        .0.pages,
        if .0.nodes > 64 { format!(" (and {} nodes is more than 64)", .0.nodes) } else { String::new() }
    )]
    LayoutDoesNotFit(Layout),
    /// The adapter's registers name a node outside its own cluster.
    #[error("the adapter says it is node {node} of a cluster of {nodes} nodes")]
    NodeOutOfRange { node: u32, nodes: u32 },
    /// The adapter answered a PCT read with a word no entry encodes.
    #[error("the adapter reports PCT entry {word:#x} for page {page}, which is not a valid entry")]
    BadPctEntry { page: u32, word: u32 },
}

/// How a region was named: by its cluster-wide key or by its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionRef {
    Key(u32),
    Id(u32),
}

impl fmt::Display for RegionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegionRef::Key(k) => write!(f, "key {k}"),
            RegionRef::Id(i) => write!(f, "id {i}"),
        }
    }
}

/// Where regions are allocated: coherent regions in the arena every node
/// receives, ordinary ones after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionArea {
    Coherent,
    Ordinary,
}

impl fmt::Display for RegionArea {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RegionArea::Coherent => "coherent",
            RegionArea::Ordinary => "ordinary region",
        })
    }
}

/// What ran out of Memory Channel space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shortage {
    /// `pages` free pages in a row in `area`.
    Pages { pages: u64, area: RegionArea },
    /// That many free cluster spinlocks in a row.
    Locks(u32),
    /// Room in a table page for one more entry.
    TableEntry { table: TableKind, capacity: usize },
}

impl fmt::Display for Shortage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shortage::Pages { pages, area } => write!(f, "{pages} free pages in the {area} area"),
            Shortage::Locks(n) => write!(f, "{n} free cluster spinlocks"),
            Shortage::TableEntry { table, capacity } => {
                write!(f, "room in the {table} table (full at {capacity} entries)")
            }
        }
    }
}

/// A direction of attachment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Transmit,
    Receive,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Transmit => "transmit",
            Direction::Receive => "receive",
        })
    }
}

/// Why a region is busy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conflict {
    /// Deallocation while these nodes have it attached.
    Attached { nodes: NodeSet },
    /// Another node holds it exclusively in this direction.
    HeldExclusively {
        holder: NodeId,
        direction: Direction,
    },
    /// An exclusive attachment while these other nodes are attached in this
    /// direction.
    AttachedElsewhere {
        direction: Direction,
        nodes: NodeSet,
    },
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::Attached { nodes } => write!(f, "attached on nodes {nodes}"),
            Conflict::HeldExclusively { holder, direction } => {
                write!(f, "{holder} holds it exclusively for {direction}")
            }
            Conflict::AttachedElsewhere { direction, nodes } => {
                write!(f, "attached for {direction} on nodes {nodes}")
            }
        }
    }
}

/// What a wait that timed out was waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitFor {
    /// These members to open the API (the start-up rendezvous).
    Rendezvous { missing: NodeSet },
    /// The answer to an ACK-page check.
    AckAnswer,
    /// A notification on an interrupt-on-receive region.
    Notification,
    /// This node's lock entry to loop back.
    LockEntry,
    /// A contended cluster spinlock.
    ClusterSpinlock,
    /// This node's join marker to loop back.
    JoinMarker,
    /// This node's own update of a table to loop back.
    OwnTableUpdate(TableKind),
    /// The adapter to rejoin the cluster (it is offline), and the node to
    /// catch up.
    Rejoin,
    /// The node to catch up after rejoining.
    CatchUp,
    /// A reliable store at `addr` to go through clean.
    CleanStore { addr: u64, tries: u32 },
    /// Every member at a barrier.
    Barrier,
}

impl fmt::Display for WaitFor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitFor::Rendezvous { missing } => write!(
                f,
                "nodes {missing} to open the Memory Channel API (are they running?)"
            ),
            WaitFor::AckAnswer => f.write_str("the ACK page answer"),
            WaitFor::Notification => f.write_str("a notification"),
            WaitFor::LockEntry => f.write_str("a lock entry to loop back"),
            WaitFor::ClusterSpinlock => f.write_str("a cluster spinlock"),
            WaitFor::JoinMarker => f.write_str("this node's join marker to loop back"),
            WaitFor::OwnTableUpdate(t) => {
                write!(f, "this node's own update of the {t} table to loop back")
            }
            WaitFor::Rejoin => f.write_str(
                "this node's adapter to rejoin the cluster and catch up (it is offline)",
            ),
            WaitFor::CatchUp => f.write_str(
                "this node to catch up with the cluster after rejoining (a member retransmits the coherent state)",
            ),
            WaitFor::CleanStore { addr, tries } => {
                write!(f, "a clean store at {addr:#x} ({tries} tries)")
            }
            WaitFor::Barrier => f.write_str("every node at the barrier"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_values() {
        let e = McError::Timeout {
            after: Duration::from_secs(60),
            waiting_for: WaitFor::Rendezvous {
                missing: NodeSet(0b110),
            },
        };
        assert_eq!(
            e.to_string(),
            "timed out after 60s waiting for nodes {1,2} to open the Memory Channel API (are they running?)"
        );
        let e = McError::Busy {
            region: 3,
            conflict: Conflict::HeldExclusively {
                holder: NodeId(2),
                direction: Direction::Receive,
            },
        };
        assert_eq!(
            e.to_string(),
            "region 3 is busy: node2 holds it exclusively for receive"
        );
        let e = McError::NoSpace(Shortage::Pages {
            pages: 9,
            area: RegionArea::Coherent,
        });
        assert_eq!(
            e.to_string(),
            "out of Memory Channel space: no 9 free pages in the coherent area"
        );
        assert_eq!(
            McError::NoSuchRegion(RegionRef::Key(7)).to_string(),
            "no region with key 7"
        );
    }

    #[test]
    fn a_driver_error_stays_the_source() {
        // A control request the device refused: the caller can still reach
        // the driver's error, and the device's status in it.
        let e = McError::from(mc_driver::Error::Refused {
            request: "set PCT",
            status: Status::Offline as u32,
            detail: 0,
        });
        assert!(matches!(e, McError::Driver(_)));
        let source = std::error::Error::source(&e).expect("the driver's error");
        let driver = source
            .downcast_ref::<mc_driver::Error>()
            .expect("of the driver");
        assert_eq!(driver.status(), Some(Status::Offline));
    }
}

/// The two tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableKind {
    Region,
    LockSet,
}

impl std::fmt::Display for TableKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TableKind::Region => "region",
            TableKind::LockSet => "lock-set",
        })
    }
}
