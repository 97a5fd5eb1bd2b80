//! The DSM core: what every page-based software DSM protocol in this
//! project stands on (docs/dsm.md). A protocol ([`Protocol`]) implements the
//! consistency model; the core gives it access detection (`sigsegv`: the
//! SIGSEGV handler, which reaches a node only through its
//! [`sigsegv::FaultHandler`]), the heap and its fixed base with per-page
//! protection (`vm`), twins and byte-granular diffs (`twin`), the one
//! waiting discipline (`wait`), allocation in the heap ([`Allocator`]), the
//! program-facing handle ([`Dsm`], [`SharedArray`]), where time goes
//! (`times`), counts ([`Stats`]) and the run's record (`record`, `gather`).
//!
//! Programs hold a [`Dsm`]; which protocol is behind it is chosen by name
//! where the program starts (`mc-guest csm --protocol`, libcsm's
//! `CSM_PROTOCOL`).

mod alloc;
mod config;
mod error;
pub mod gather;
mod handle;
mod limits;
pub mod node_barrier;
mod protocol;
pub mod record;
mod shared;
pub mod sigsegv;
mod stats;
pub mod times;
pub mod twin;
pub mod vm;
pub mod wait;
mod window;

pub use alloc::{AllocError, Allocator};
pub use config::DsmConfig;
pub use error::DsmError;
pub use handle::Dsm;
pub use limits::{MAX_HEAP_BYTES, MAX_PROTOCOL_NODES, MAX_THREADS};
pub use protocol::{join_clock, Protocol};
pub use shared::SharedArray;
pub use stats::Stats;
pub use times::{TimeBreakdown, VirtualBreakdown};
pub use window::TimedWindow;
