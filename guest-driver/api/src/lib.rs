//! The Memory Channel API, after the TruCluster Memory Channel API (seed 004,
//! Table 1), in Rust: regions allocated by cluster-wide key and attached for
//! transmit or receive, cluster spinlocks, error counts, the host list and
//! notifications.
//!
//! | TruCluster | here |
//! |---|---|
//! | `imc_asalloc` | [`MemoryChannel::region_alloc`] |
//! | `imc_asattach` | [`MemoryChannel::attach_transmit`], [`MemoryChannel::attach_receive`] |
//! | `imc_asdetach` | dropping the [`TxRegion`] / [`RxRegion`] |
//! | `imc_asdealloc` | [`MemoryChannel::region_dealloc`] |
//! | `imc_lkalloc` | [`MemoryChannel::lock_alloc`] |
//! | `imc_lkacquire` / `imc_lkrelease` | [`LockSet::acquire`] / [`LockSet::release`] |
//! | `imc_lkdealloc` | [`LockSet::dealloc`] |
//! | `imc_rderrcnt` | [`MemoryChannel::error_count`] |
//! | `imc_ckerrcnt` | [`MemoryChannel::check_errors`] |
//! | `imc_gethosts` | [`MemoryChannel::hosts`] |
//!
//! All cluster-wide bookkeeping lives in Memory Channel space (see [`layout`]),
//! updated under a cluster spinlock with old/new copies and a toggle; there is
//! no side channel between nodes. A node whose adapter crashed and rejoined is
//! brought up to date by a surviving member (`join`).
//!
//! Files, one job each, bottom up: `node` (the adapter and the memory every
//! part shares, and the one way the API waits) with what a node does by
//! itself: `store` (the store path), `error_count`, `events`, `membership`,
//! and `coherence` (where the node stands after a rejoin); `spinlock` (the
//! cluster spinlock protocol); the parts that own state of their own, each
//! handed a node or asking for what it needs through a narrow trait:
//! `table` (the region and lock-set tables in Memory Channel space),
//! `lock` (lock sets), `region` (allocation by key, attach/detach, the
//! region handles), `join` (late join); then `channel` (the handle,
//! [`MemoryChannel`], which composes them), `open` (bring-up and start-up
//! rendezvous), `connect` (the adapter and the API from a transport
//! choice, and what the environment asks for) and `barrier`. Beside them: `pct_log` (the record of PCT
//! entries a rejoin programs again), `port` (what the API needs from a
//! driver) and `adapter_port` (that, for `mc_driver`), `layout`, `error`,
//! `loss` (a wait's watch for evidence of lost packets, read through a
//! narrow trait the node implements) and `lost` (which packet, and the
//! evidence, as a wait reports them).

#![forbid(unsafe_code)]

mod adapter_port;
mod barrier;
mod channel;
mod coherence;
mod connect;
mod error;
mod error_count;
mod events;
mod host;
mod join;
pub mod layout;
mod lock;
mod loss;
mod lost;
mod membership;
mod node;
mod open;
mod pct_log;
pub mod port;
mod region;
mod spinlock;
mod store;
pub mod table;

pub use adapter_port::AdapterPort;
pub use barrier::Barrier;
pub use channel::MemoryChannel;
pub use coherence::{Coherence, Resync};
pub use connect::{connect, connect_port, ConnectError, ConnectOptions, DEFAULT_DMA_MIB};
pub use error::{Conflict, Direction, McError, RegionArea, RegionRef, Shortage, WaitFor};
pub use error_count::ErrorCheck;
pub use events::{EventSignal, Notification};
/// The name of the register file's link-timing code, for records.
pub use firmware_model::abi::link_timing_name;
/// How a program prints an error with each of its causes once.
pub use firmware_model::ErrorChain;
/// A node's number, as [`MemoryChannel::attach_transmit_to`] takes it.
pub use firmware_model::NodeId;
pub use lock::LockSet;
pub use loss::{LossWatch, LOSS_WAIT, LOSS_WAIT_EARLIER};
pub use lost::{LossEvidence, LostPacket};
/// The one way the guest side waits (re-exported for the layers above).
pub use mc_driver::backoff;
/// Futex sleeps and wakes on a word (re-exported for the layers above).
pub use mc_driver::futex;
/// The virtual clock of predicted-time runs (docs/virtual-time.md).
pub use mc_driver::vclock;
pub use membership::HostList;
pub use open::OpenOptions;
pub use port::{McPort, ReceiveMemory};
pub use region::{RxRegion, Sharing, TxRegion};
pub use store::RELIABLE_CHUNK;
pub use table::{Permissions, TableKind};
