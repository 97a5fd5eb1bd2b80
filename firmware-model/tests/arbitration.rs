//! The hub's arbitration (firmware_model::arbiter): round robin with a budget
//! per node and pass, checked on random backlogs.

use std::collections::VecDeque;

use firmware_model::abi::MAX_RECORD_DATA;
use firmware_model::{Arbiter, NodeId, PassBudget};
use proptest::prelude::*;

fn backlogs() -> impl Strategy<Value = Vec<VecDeque<u32>>> {
    // Up to 8 nodes, each with up to 600 stores of 1 byte .. 64 KiB, often
    // empty, often many small ones (a lap of one-byte stores), sometimes big.
    prop::collection::vec(
        prop_oneof![
            Just(Vec::new()),
            prop::collection::vec(1u32..=8, 0..600),
            prop::collection::vec(1u32..=MAX_RECORD_DATA, 0..40),
        ],
        1..8,
    )
    .prop_map(|v| v.into_iter().map(VecDeque::from).collect())
}

fn budgets() -> impl Strategy<Value = PassBudget> {
    (1u32..=300, 1u64..=(128 << 10)).prop_map(|(records, bytes)| PassBudget { records, bytes })
}

proptest! {
    /// In every pass: every node with a backlog takes at least one store;
    /// none takes more than its budget of records, nor more than its budget
    /// of bytes plus one store; and each node's stores go in its own order.
    #[test]
    fn every_backlogged_node_moves_each_pass_within_its_budget(
        mut queues in backlogs(),
        budget in budgets(),
    ) {
        let n = u8::try_from(queues.len()).unwrap();
        let mut arb = Arbiter::new(n, budget);
        let original = queues.clone();
        let mut seen: Vec<Vec<u32>> = vec![Vec::new(); queues.len()];
        for _ in 0..10_000 {
            if queues.iter().all(VecDeque::is_empty) {
                break;
            }
            let waiting: Vec<bool> = queues.iter().map(|q| !q.is_empty()).collect();
            let pass = arb.simulate_pass(&mut queues);
            for (i, w) in waiting.iter().enumerate() {
                let mine: Vec<u32> = pass
                    .iter()
                    .filter(|(id, _)| id.index() == i)
                    .map(|(_, len)| *len)
                    .collect();
                prop_assert_eq!(*w, !mine.is_empty(), "node {} moved iff it had a backlog", i);
                prop_assert!(mine.len() <= budget.records.max(1) as usize);
                let bytes: u64 = mine.iter().map(|l| u64::from(*l)).sum();
                let last = mine.last().map_or(0, |l| u64::from(*l));
                prop_assert!(bytes <= budget.bytes + last);
                seen[i].extend(mine);
            }
        }
        for (i, q) in original.iter().enumerate() {
            prop_assert_eq!(&seen[i], &q.iter().copied().collect::<Vec<_>>());
        }
    }

    /// A node's first store waits behind at most one turn of every other
    /// node, whatever their backlogs: the share of the hub each node is
    /// promised (docs/device.md s.20).
    #[test]
    fn a_store_waits_at_most_one_turn_of_each_other_node(
        mut queues in backlogs(),
        budget in budgets(),
        victim_at in 0usize..8,
        passes_before in 0usize..20,
    ) {
        let n = queues.len();
        let victim = victim_at % n;
        let mut arb = Arbiter::new(u8::try_from(n).unwrap(), budget);
        for _ in 0..passes_before {
            arb.simulate_pass(&mut queues);
        }
        queues[victim].push_back(1);
        let before = queues[victim].len();
        let pass = arb.simulate_pass(&mut queues);
        // Served in this pass if it was the first thing waiting...
        if before == 1 {
            let at = pass
                .iter()
                .position(|(id, _)| id.index() == victim)
                .expect("the victim's store goes in this pass");
            let ahead = &pass[..at];
            prop_assert!(ahead.len() <= (n - 1) * budget.records.max(1) as usize);
            let bytes: u64 = ahead.iter().map(|(_, l)| u64::from(*l)).sum();
            prop_assert!(
                bytes <= (n as u64 - 1) * (budget.bytes + u64::from(MAX_RECORD_DATA))
            );
        }
    }
}

/// Each pass starts one node later: over `n` passes every node goes first
/// once.
#[test]
fn the_first_turn_rotates() {
    for n in 1..=8u8 {
        let mut arb = Arbiter::new(n, PassBudget::DEFAULT);
        let firsts: Vec<NodeId> = (0..n)
            .map(|_| arb.pass().next().expect("a turn").node())
            .collect();
        let mut sorted = firsts.clone();
        sorted.sort();
        assert_eq!(sorted, (0..n).map(NodeId).collect::<Vec<_>>(), "{firsts:?}");
    }
}
