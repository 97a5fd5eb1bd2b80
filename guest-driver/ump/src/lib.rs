//! UMP, Universal Message Passing (seed 004, "Universal Message Passing"
//! and Table 3), on the Memory Channel API: duplex channels between
//! endpoints named by 64-bit handles, over Memory Channel between nodes
//! and over shared memory between the tasks (threads) of one node or the
//! processes of one host, behind
//! the same calls.
//!
//! | seed 004, Table 3 | here |
//! |---|---|
//! | `ump_init` | [`Node::open`] (once per node) and [`Ump::init`] (each task) |
//! | `ump_exit` | [`Ump::exit`] |
//! | `ump_open` | [`Ump::open`] |
//! | `ump_close` | [`Ump::close`] |
//! | `ump_listen` (register an endpoint) | [`Ump::listen`] |
//! | `ump_wait` | [`Ump::wait`] ([`Ump::poll`]: without waiting) |
//! | `ump_read` | [`Ump::read`] |
//! | `ump_write` (blocking) | [`Ump::write`] |
//! | `ump_nbread` | [`Ump::nbread`] |
//! | `ump_nbwrite` (a background thread finishes it) | [`Ump::nbwrite`] |
//! | `ump_mcast` (one message to a list of channels) | [`Ump::mcast`] |
//! | `ump_info` (configuration and status) | [`Ump::info`] |
//!
//! The design is the seed's: one single-writer, single-reader ring per
//! direction of each channel, in the reader's memory, with producer and
//! consumer indexes that only their owners write (no locks on the message
//! path); rings carved sparsely from a per-node region as channels open,
//! of a configurable size; point-to-point transmit-only mappings; messages
//! of any size streamed in fragments, written once into the reader's
//! memory and read once out of it; error detection without recovery. See
//! docs/ump.md.
//!
//! Files, one job each: `wire` (a message's bytes), `link` (the memory of
//! a channel's end, per transport), `shm_file` (that memory shared by two
//! processes of one host through a mapped file), `stream` (the writer's and reader's
//! state machines), `directory` (the cluster-wide table of channels),
//! `node` (a node's shared UMP state), `outbuf` (multicast
//! messages written once), `channel` (a channel as a task holds
//! it), `task` (open, listen, close, wait), `io` (read, write, nbread,
//! nbwrite, mcast, info), `writer` (the background writer), `config`,
//! `error`.

mod channel;
mod config;
mod directory;
mod error;
mod io;
mod link;
mod model;
mod node;
mod outbuf;
mod shm_file;
mod stream;
mod task;
mod wire;
mod writer;

pub use channel::{Payload, PendingWrite};
pub use config::Config;
pub use directory::RECORDS as DIRECTORY_RECORDS;
pub use error::{Damage, ShmFileError, Transport, UmpError};
pub use firmware_model::abi::shm::HostShm;
pub use io::{ChannelInfo, Info, ReadProgress};
pub use node::Node;
pub use outbuf::{OUTBUF_MAX_PAYLOAD, OUTBUF_MIN_LIST, OUTBUF_MIN_PAYLOAD};
pub use task::{Event, Ump};
pub use wire::OVERHEAD as MESSAGE_OVERHEAD;

/// A channel, as the task that opened it names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChannelId(pub u32);

impl std::fmt::Display for ChannelId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.0)
    }
}
