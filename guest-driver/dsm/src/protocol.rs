//! The seam between the DSM core and a protocol (docs/dsm.md).
//!
//! A protocol is a node's implementation of release consistency for
//! data-race-free programs: it resolves the faults the core's handler
//! routes to it (`sigsegv::FaultHandler`), and it makes the
//! synchronisation operations carry the consistency actions — at a
//! release, the node's writes (twins and diffs, `twin`) go wherever the
//! protocol keeps them; at an acquire, the node stops trusting copies the
//! protocol says may be stale. Cashmere (write notices, directory, homes
//! that migrate) and the naive protocol (`dsm-naive`: every page at node 0,
//! every copy dropped at each acquire) implement it; home-based lazy release
//! consistency (HLRC, seed 001) fits the same places: its fault fetches
//! from the home, its release sends diffs to homes and its acquire takes
//! the write notices the lock or barrier carries.
//!
//! One value per node, shared by the node's application threads (2L); at
//! one level (1L) each processor is a node of its own.

use std::any::Any;

use mc_api::vclock;

use crate::{Allocator, DsmError, Stats, TimeBreakdown, TimedWindow};

/// The calling thread joins the virtual clock at `vt` as application
/// thread `local` of node `node` (the label its board slot shows).
pub fn join_clock(
    node: u32,
    local: u32,
    vt: u64,
) -> Result<vclock::Participant, vclock::VclockError> {
    let mut p = vclock::join(vt)?;
    p.label(node, local);
    Ok(p)
}

/// A node of a DSM protocol, as the program-facing handle [`crate::Dsm`]
/// drives it. Every method is called by the node's application threads,
/// any number at once.
pub trait Protocol: Send + Sync + 'static {
    /// The protocol's name (`mc-guest csm --protocol`'s spelling).
    fn name(&self) -> &'static str;
    /// This node's number, 0-based.
    fn node_id(&self) -> u32;
    /// Protocol nodes in the run.
    fn nodes(&self) -> u32;
    /// Application threads on this node.
    fn threads(&self) -> u32;
    /// The coherence unit, bytes.
    fn page_size(&self) -> u32;
    /// The node's heap (application view) and its allocator.
    fn heap(&self) -> &crate::vm::HeapMemory;
    fn allocator(&self) -> &Allocator;
    /// The node's timed window.
    fn window(&self) -> &TimedWindow;
    /// Called from the application's loops: answer other nodes' requests
    /// if the protocol answers them where threads poll.
    fn poll(&self) -> Result<(), DsmError>;
    /// Acquire lock `lock` (an acquire: stale copies are dropped after).
    fn lock_acquire(&self, lock: u32) -> Result<(), DsmError>;
    /// Release lock `lock` (a release: the node's writes are made visible
    /// to the next acquirer before).
    fn lock_release(&self, lock: u32) -> Result<(), DsmError>;
    /// A barrier of every thread on every node: a release, then an acquire.
    fn barrier(&self) -> Result<(), DsmError>;
    /// Write-once flag: release, then set `flag` to `value` (nonzero).
    fn flag_set(&self, flag: u32, value: u64) -> Result<(), DsmError>;
    /// Wait until `flag` is set, then acquire; returns its value.
    fn flag_wait(&self, flag: u32) -> Result<u64, DsmError>;
    /// Tell every node this one has failed (they stop waiting for it).
    fn abort(&self);
    /// The final barrier, then stop the node's protocol machinery. Once,
    /// from one thread per node, after every thread's last shared access.
    fn finish(&self) -> Result<Stats, DsmError>;
    /// What the node has counted so far.
    fn stats(&self) -> Stats;
    /// The calling thread joins the virtual clock at `vt` as the node's
    /// application thread `local` ([`join_clock`]); a protocol that charges
    /// its own thread's work to one of them says so in its own.
    fn join_clock(&self, local: u32, vt: u64) -> Result<vclock::Participant, DsmError> {
        join_clock(self.node_id(), local, vt).map_err(DsmError::protocol)
    }
    /// The protocol's own thread's time breakdown, if it has one.
    fn protocol_breakdown(&self) -> Option<TimeBreakdown>;
    /// The calling thread enters or leaves the timed part (the window,
    /// plus whatever the protocol's own thread must know).
    fn mark_start(&self) {
        self.window().mark_start(|| ());
    }
    fn mark_end(&self) {
        self.window().mark_end(|| ());
    }
    /// The protocol itself, for tools that need what only it has (Cashmere's
    /// homes, its Table II operations).
    fn as_any(&self) -> &dyn Any;
}
