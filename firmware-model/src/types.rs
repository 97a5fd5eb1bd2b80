//! Small value types shared by every part of the model.

use std::fmt;

/// A node (adapter) number on the hub: 0 .. cluster size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NodeId(pub u8);

impl NodeId {
    /// The node number as an index into per-node tables.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// Every node of a cluster of `nodes` adapters, in order.
    pub fn all(nodes: u8) -> impl Iterator<Item = NodeId> + Clone {
        (0..nodes).map(NodeId)
    }
}

/// `x % m`: always below `m`, so it fits in a `u32`.
pub fn rem_u32(x: u64, m: u32) -> u32 {
    u32::try_from(x % u64::from(m.max(1))).unwrap_or(u32::MAX)
}

/// `x` as a `u32`, or `u32::MAX` when it does not fit (a page number or a
/// length past every limit, which the checks after it then refuse).
pub fn saturating_u32(x: u64) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}

/// `x` as a `usize`: an offset, length or address of guest or host memory
/// kept as a `u64`. Every `u64` fits the `usize` of the 64-bit hosts and
/// guests this project runs on.
pub fn to_usize(x: u64) -> usize {
    usize::try_from(x).expect("a u64 fits the usize of a 64-bit target")
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

/// A byte address in Memory Channel global address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GlobalAddr(pub u64);

impl fmt::Display for GlobalAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A page of Memory Channel global address space (the unit the PCT describes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PageNumber(pub u32);

impl PageNumber {
    /// The page number as an index into the page control table.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for PageNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page {}", self.0)
    }
}

/// Model time in nanoseconds. The model never reads a clock: callers pass the
/// current time in, and the model stamps each delivery with the time it is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Nanos(pub u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);

    pub fn from_micros(us: u64) -> Nanos {
        Nanos(us.saturating_mul(1_000))
    }

    pub fn from_millis(ms: u64) -> Nanos {
        Nanos(ms.saturating_mul(1_000_000))
    }

    pub fn saturating_add(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(other.0))
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

/// A set of nodes as a bit mask (bit i = node i); the hub has at most 64 ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct NodeSet(pub u64);

impl NodeSet {
    pub fn contains(self, node: NodeId) -> bool {
        node.0 < 64 && self.0 & (1u64 << node.0) != 0
    }

    pub fn insert(&mut self, node: NodeId) {
        if node.0 < 64 {
            self.0 |= 1u64 << node.0;
        }
    }

    pub fn remove(&mut self, node: NodeId) {
        if node.0 < 64 {
            self.0 &= !(1u64 << node.0);
        }
    }

    pub fn len(self) -> u32 {
        self.0.count_ones()
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The members in ascending order.
    pub fn iter(self) -> impl Iterator<Item = NodeId> {
        (0u8..64)
            .filter(move |n| self.0 & (1u64 << n) != 0)
            .map(NodeId)
    }
}

impl fmt::Display for NodeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{")?;
        for (i, n) in self.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{}", n.0)?;
        }
        write!(f, "}}")
    }
}
