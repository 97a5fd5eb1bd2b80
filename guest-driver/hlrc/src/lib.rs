//! Home-based Lazy Release Consistency (HLRC), seed 001 s.3-4, as the
//! protocol's state and decisions, with no transport.
//!
//! Seed 001 builds HLRC (its ref. 35, Zhou, Iftode and Li) on VIA: each page
//! has a home; a writer twins a page and at the end of its interval (a
//! release, or a barrier's release half) sends the diffs to the pages'
//! homes, which apply them; write notices travel with lock grants and
//! barriers; an acquire invalidates the pages the notices name; a fault
//! fetches the whole page from its home. What the seed leaves to its
//! references is ours, and marked so where it is chosen:
//!
//! - intervals are numbered per node from 1, and a node's vector time holds,
//!   for every node, the newest interval of that node whose notices it has
//!   seen ([`VectorTime`]);
//! - a page's home knows, per writer, the newest interval whose diff it has
//!   applied ([`PageVersions`]); a fault asks the home for the page once the
//!   home has every diff the faulting node's notices name
//!   ([`PageNeeds`]), as HLRC's "flush timestamps" do;
//! - a lock's manager is its home node, and requests queue at the last
//!   requester, a distributed queue ([`LockManager`]);
//! - a barrier has one manager, which merges every node's notices and sends
//!   each node the ones it has not seen ([`BarrierManager`]); or, as seed
//!   001 s.6's what-if, every node broadcasts its arrival and merges all of
//!   them itself ([`BarrierMode::Broadcast`]).
//!
//! The messages themselves, and the pages and diffs, go through the DSM
//! core's mailbox and the emulated adapter; this crate decides what they
//! say. Diffs are the core's byte-exact diffs (seed 001 s.4.3 packs
//! "modified words"; a word that two nodes write a byte each of would then
//! lose one of them).

mod barrier;
mod board;
pub mod engine;
mod error;
mod handle;
mod homes;
mod intervals;
mod locks;
pub mod mailbox;
mod node;
mod pages;
mod received;
mod ring;
mod vector_time;
mod versions;
pub mod wire;

pub use barrier::{BarrierError, BarrierManager, BarrierMode, BarrierRelease};
pub use error::HlrcError;
pub use handle::{Hlrc, HlrcConfig, NAME, NAME_BROADCAST};
pub use homes::{HomeError, HomePolicy, Homes};
pub use intervals::{Interval, IntervalId, IntervalLog, OutOfOrder, WriteNotice};
pub use locks::{LockManager, LockReply, LockState};
pub use vector_time::VectorTime;
pub use versions::{PageNeeds, PageVersions};

/// A node of the cluster, numbered from 0.
pub type Node = usize;

/// A page of the shared heap, numbered from 0.
pub type Page = usize;
