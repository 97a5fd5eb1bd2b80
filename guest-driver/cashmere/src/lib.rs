//! Cashmere-2L, CSM-DMS: page-based software distributed shared memory on the
//! Memory Channel API (seed 000 s.2; seed 002 s.3-6). See docs/cashmere.md.
//!
//! Every node runs the same program: [`Csm::start`] with the heap size, then
//! [`Csm::alloc`] (the same allocations in the same order on every node give
//! the same addresses), shared data accessed through [`SharedArray`], and
//! [`Csm::lock_acquire`] / [`Csm::lock_release`], [`Csm::barrier`],
//! [`Csm::flag_set`] / [`Csm::flag_wait`]. Data-race-free programs see
//! release consistency. Several threads of a node share its frames and its
//! protocol state (2L); one thread per node is 1L.
//!
//! Cashmere is a protocol of the DSM core (`dsm-core`, docs/dsm.md): `dsm`
//! implements `dsm_core::Protocol` for [`Csm`], so programs holding a
//! `dsm_core::Dsm` run on it; the core owns access detection (`sigsegv`),
//! the heap's mappings (`vm`), twins and diffs (`twin`), the waiting
//! discipline (`wait`), shared arrays, counts, where time goes (`times`)
//! and the run's record (`record`, `gather`), which Cashmere uses by the
//! same names.
//!
//! Files: `handle` (the node's handle, [`Csm`]: start, the timed window,
//! allocation, counts), `dsm` (Cashmere as the core's protocol), `config`
//! and `variant` (what a node starts with), `choices` (what the node's
//! protocol chooses, in one value), `sync_api`
//! (locks, barriers, flags, the final barrier, as programs call them),
//! `bench_hooks` (what the benchmark times); `node/` (a node: its fields
//! private to the folder, its methods there, the protocol's parts each in a
//! module of its own: `fault`, `fetch`, `requests`, `release`, `acquire`;
//! `startup` building a node, `protocol_thread` the thread that answers
//! other nodes; the owners it is made of: `working_copies`, `served`,
//! `protocol_control`), `state` (its protocol state), `adb_interest` (a
//! home's count of a page's consumers, CSM-ADB), `stale` (the Stale
//! vector), `migration_answers` (the at-most-once reply cache); `loss`
//! (noticing lost stores), `seams` (the variant traits), `dms_data` /
//! `dms_meta` / `dms_sync` (CSM-DMS on Memory Channel), `ms_data` (data by
//! messages), `msg_meta` / `msg_sync` (metadata and synchronisation by
//! messages: CSM-S, CSM-None), `adb` (CSM-ADB's broadcast buffers),
//! `mailbox` (each node's interrupting mailbox), `space` (where that lives
//! in Memory Channel space), `site` (protocol nodes on adapters), `homes`,
//! `error`.

mod adb;
mod adb_interest;
mod bench_hooks;
mod choices;
mod config;
mod dms_data;
mod dms_meta;
mod dms_sync;
mod dsm;
mod error;
mod handle;
mod homes;
mod loss;
mod mailbox;
mod messages;
mod migration_answers;
mod ms_data;
mod msg_meta;
mod msg_sync;
mod node;
pub mod seams;
mod site;
pub mod space;
mod stale;
mod state;
mod sync_api;
mod variant;

// The DSM core's parts, by the names Cashmere's modules use for them.
pub use dsm_core::{gather, record, twin};
use dsm_core::{sigsegv, times, vm, wait};

pub use config::Config;
pub use dsm::NAME;
pub use dsm_core::{
    SharedArray, Stats, TimeBreakdown, VirtualBreakdown, MAX_HEAP_BYTES, MAX_PROTOCOL_NODES,
    MAX_THREADS,
};
pub use error::{BarrierWait, CsmError};
pub use handle::Csm;
pub use homes::{HomeAssignment, HomesError};
pub use space::CsmSpace;
pub use state::PageState;
pub use variant::{CsmVariant, Levels, MessageDetection, UnknownDetection, UnknownVariant};
