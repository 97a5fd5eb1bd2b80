//! The naive protocol (docs/dsm.md): a second protocol on the DSM core,
//! deliberately simple, to show what a protocol must and need not write.
//!
//! Every page lives at node 0, its home: node 0's receive mapping of the
//! master region is the only up-to-date copy. A node fetches a page from
//! node 0 at its first access after an acquire (a request word to node 0,
//! whose server thread answers with the page); it twins the page at its
//! first write; at a release it sends the byte-granular diff of every
//! written page to node 0's master copy, by Memory Channel remote writes;
//! at an acquire it does the same, then drops every copy it holds. Nothing
//! is cached across an acquire, so nothing needs a write notice, a
//! directory or a home other than node 0.
//!
//! Correctness rests on Memory Channel's total order, as Cashmere-DMS's
//! does: a node's diffs are stored before its lock release, barrier
//! arrival or flag; whoever acquires after it sends its page request
//! after seeing those, so node 0 receives the diffs before the request
//! (and node 0's own diffs and requests come back by loopback in order).
//!
//! Files: `config` (what a node starts with), `space` (the Memory Channel
//! regions), `node` (pages, faults, release, acquire), `server` (node 0's
//! answers), `handle` ([`Naive`], the protocol as the core drives it),
//! `error`.

mod config;
mod error;
mod handle;
mod node;
mod server;
mod space;

pub use config::NaiveConfig;
pub use error::NaiveError;
pub use handle::{Naive, NAME};
