//! The hub's arbitration between adapters: which node's stores enter the
//! hub's total order next, and how many.
//!
//! The real hub arbitrates between its link ports, so a node with a long
//! backlog cannot keep the others off the hub (seed 000 s.2.2: the hub is a
//! crossbar that takes one packet per port in turn). Here the hub serves the
//! nodes in passes: in each pass every node with committed stores gets one
//! turn, in a rotating order (each pass starts one node later than the last),
//! and in its turn takes at most [`PassBudget`] of records and bytes. A turn
//! always admits its first store, so every node with a backlog moves in every
//! pass; and no node's turn is longer than the budget plus one store. So a
//! store waits at most one pass behind the others' work, whatever their
//! backlogs: `(nodes - 1) * (budget + one store)` is every node's share of
//! the hub and the bound on how long another node can hold it.
//!
//! The device follows this order exactly (mc-device's hub pass); the
//! property tests below check the promises on the model.

use crate::types::NodeId;

/// How much one node may take in one turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PassBudget {
    /// Records (a merged store counts each record in it).
    pub records: u32,
    /// Data bytes (a record of no data counts one).
    pub bytes: u64,
}

impl PassBudget {
    /// The device's budget: 256 records or 64 KiB (one largest store), so a
    /// turn of one-byte stores and a turn of large ones take about as long.
    pub const DEFAULT: PassBudget = PassBudget {
        records: 256,
        bytes: 64 << 10,
    };
}

/// What is left of one node's turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    node: NodeId,
    records: u32,
    bytes: u64,
    taken: u32,
}

impl Turn {
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Whether another store may start in this turn (the first always may).
    pub fn open(&self) -> bool {
        self.taken == 0 || (self.records > 0 && self.bytes > 0)
    }

    /// At most this many records may merge into the next store.
    pub fn records_left(&self) -> u32 {
        self.records.max(1)
    }

    /// Count a store of `records` records and `bytes` bytes against the turn.
    pub fn charge(&mut self, records: u32, bytes: u64) {
        self.taken = self.taken.saturating_add(records);
        self.records = self.records.saturating_sub(records);
        self.bytes = self.bytes.saturating_sub(bytes.max(1));
    }

    /// Records taken in this turn.
    pub fn taken(&self) -> u32 {
        self.taken
    }
}

/// Round-robin arbitration between the nodes of one hub.
#[derive(Clone, Debug)]
pub struct Arbiter {
    nodes: u8,
    budget: PassBudget,
    /// The node that goes first in the next pass.
    first: u8,
}

impl Arbiter {
    pub fn new(nodes: u8, budget: PassBudget) -> Arbiter {
        Arbiter {
            nodes,
            budget,
            first: 0,
        }
    }

    pub fn budget(&self) -> PassBudget {
        self.budget
    }

    /// The turns of the next pass, in order: every node once, starting one
    /// node later than the last pass did.
    pub fn pass(&mut self) -> impl Iterator<Item = Turn> {
        let (n, first, budget) = (self.nodes, self.first, self.budget);
        if n > 0 {
            self.first = (self.first + 1) % n;
        }
        (0..n).map(move |k| Turn {
            node: NodeId(
                u8::try_from((usize::from(first) + usize::from(k)) % usize::from(n)).unwrap_or(0),
            ),
            records: budget.records,
            bytes: budget.bytes,
            taken: 0,
        })
    }

    /// One pass over `backlogs` (each node's queued store lengths, front
    /// first), as the device performs it: returns the stores taken, in the
    /// order they enter the hub, and removes them from the backlogs.
    pub fn simulate_pass(
        &mut self,
        backlogs: &mut [std::collections::VecDeque<u32>],
    ) -> Vec<(NodeId, u32)> {
        let mut out = Vec::new();
        for mut turn in self.pass() {
            let Some(q) = backlogs.get_mut(turn.node().index()) else {
                continue;
            };
            while turn.open() {
                let Some(len) = q.pop_front() else {
                    break;
                };
                turn.charge(1, u64::from(len));
                out.push((turn.node(), len));
            }
        }
        out
    }
}
