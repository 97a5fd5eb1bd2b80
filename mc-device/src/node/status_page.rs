//! The status page as one adapter shows it: where it is, what was last
//! written to it, and the cluster error count this node has seen so far
//! (docs/device.md section 16). The device state builds each snapshot from
//! the hub (status.rs); writing it is the node's.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use firmware_model::abi::{self, StatusPage};
use firmware_model::Nanos;
use vm_memory::{Bytes, GuestAddress};

use super::NodeState;

/// One node's view of its status page and of the cluster error count.
#[derive(Debug, Default)]
pub(crate) struct StatusView {
    /// Where the driver registered its status page.
    gpa: Option<u64>,
    /// What was last written to it (its update count aside).
    last: Option<StatusPage>,
    /// Updates written so far.
    updates: u64,
    /// The cluster error count this node's status page shows: the true
    /// count in eager mode; in skewed mode other adapters' errors reach it
    /// late (`lag`), its own and every ACK answer bring it up to date.
    shown_errors: u64,
    /// Counts on their way to this node, each with when it becomes visible.
    lag: VecDeque<(u64, Nanos)>,
}

impl StatusView {
    /// A status page is registered.
    pub(crate) fn registered(&self) -> bool {
        self.gpa.is_some()
    }

    pub(crate) fn forget_page(&mut self) {
        self.gpa = None;
        self.last = None;
    }

    /// A page registered at `gpa` (or none): written in full at the next refresh.
    pub(crate) fn register(&mut self, gpa: Option<u64>) {
        self.gpa = gpa;
        self.last = None;
    }

    /// The count shown under skewed delivery.
    pub(crate) fn shown_errors(&self) -> u64 {
        self.shown_errors
    }

    /// `count` becomes visible at `at`.
    pub(crate) fn lag_until(&mut self, count: u64, at: Nanos) {
        self.lag.push_back((count, at));
    }

    /// Show every count whose moment has come.
    pub(crate) fn age(&mut self, now: Nanos) {
        while let Some(&(c, at)) = self.lag.front() {
            if at > now {
                break;
            }
            self.shown_errors = self.shown_errors.max(c);
            self.lag.pop_front();
        }
    }

    /// This node learns `count` at once (an ACK answer, or its own error).
    pub(crate) fn catch_up(&mut self, count: u64) {
        self.shown_errors = self.shown_errors.max(count);
        self.lag.retain(|&(c, _)| c > count);
    }

    /// When the next lagging count becomes visible.
    pub(crate) fn next_visible(&self) -> Option<Nanos> {
        self.lag.front().map(|e| e.1)
    }
}

/// The status page is no longer wholly in guest RAM (a new memory table
/// left it out): it is dropped.
#[derive(Debug)]
pub(crate) struct PageGone(pub(crate) u64);

impl NodeState {
    /// Write `snap` to the status page if it changed. The counter words are
    /// stored with single aligned 64-bit stores, the update count last, so a
    /// driver reads the error count with one load (seed 004, imc_rderrcnt).
    pub(crate) fn write_status_page(&mut self, mut snap: StatusPage) -> Result<(), PageGone> {
        let Some(gpa) = self.status.gpa else {
            return Ok(());
        };
        if self.status.last == Some(snap) {
            return Ok(());
        }
        let Some(mem) = self.memory() else {
            return Ok(());
        };
        // A sequence lock: `updates` is odd while the page is being written
        // and even once it is whole, so a reader can tell a torn copy.
        let seq = self.status.updates;
        snap.updates = seq.wrapping_add(2);
        let bytes = snap.to_bytes();
        let u = abi::status_page::UPDATES;
        let count = abi::status_page::CLUSTER_ERROR_COUNT;
        let at = |off: usize| GuestAddress(gpa + off as u64);
        let ok = mem
            .store(seq.wrapping_add(1), at(u), Ordering::Release)
            .is_ok()
            && mem.write_slice(&bytes[..u], at(0)).is_ok()
            // Around the error count, which gets one aligned store below
            // (a copy could tear it for a reader's single load).
            && mem.write_slice(&bytes[u + 8..count], at(u + 8)).is_ok()
            && mem.write_slice(&bytes[count + 8..], at(count + 8)).is_ok()
            && mem
                .store(snap.cluster_error_count, at(count), Ordering::Release)
                .is_ok()
            && mem.store(snap.updates, at(u), Ordering::Release).is_ok();
        if ok {
            snap.updates = 0;
            self.status.last = Some(snap);
            self.status.updates = seq.wrapping_add(2);
            Ok(())
        } else {
            self.status.gpa = None;
            Err(PageGone(gpa))
        }
    }
}
