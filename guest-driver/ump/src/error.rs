//! UMP's errors: one variant per cause, with the values a caller acts on.
//! UMP detects errors and does not recover from them (seed 004: "UMP
//! channels provide guaranteed error detection but not recovery"): a
//! channel that reported [`UmpError::Damaged`] stays failed until closed.
//!
//! A variant that keeps its cause (`#[source]`, `#[from]`) leaves it out of
//! its message: print a `UmpError` with `mc_api::ErrorChain`, which names
//! each cause once.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use mc_api::{LossEvidence, McError};

use crate::ChannelId;

/// Errors of UMP.
#[derive(Debug, thiserror::Error)]
pub enum UmpError {
    /// The Memory Channel API failed under UMP.
    #[error("Memory Channel")]
    Mc(#[from] McError),
    #[error("bad configuration: {0}")]
    Config(String),
    #[error("no channel {0} in this task")]
    NoSuchChannel(ChannelId),
    #[error(
        "a channel between endpoints {local:#x} and {remote:#x} is already open or being opened"
    )]
    ChannelExists { local: u64, remote: u64 },
    #[error("endpoint {0:#x} is already registered to accept channels")]
    AlreadyListening(u64),
    #[error("a channel needs two distinct endpoints, not {0:#x} twice")]
    SameEndpoint(u64),
    #[error("the {transport} transport cannot reach endpoint {remote:#x} on node {node}")]
    Unreachable {
        transport: Transport,
        remote: u64,
        node: u8,
    },
    #[error("channel {0}: the peer closed it")]
    Closed(ChannelId),
    #[error("channel {channel}: the message has {len} bytes left and the buffer holds {have}")]
    BufferTooSmall {
        channel: ChannelId,
        len: u64,
        have: usize,
    },
    /// A message that was damaged or lost on the network, detected and not
    /// passed on. The channel is failed from then on.
    #[error("channel {channel}: {damage}")]
    Damaged { channel: ChannelId, damage: Damage },
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout { after: Duration, what: &'static str },
    #[error("out of UMP buffer space: {0}")]
    NoSpace(&'static str),
    #[error("cannot start UMP's background writer")]
    Thread(#[source] std::io::Error),
    /// A wait on another node's store lasted long while this node's
    /// adapter counted packets lost on its link (mc-api's `LossWatch`).
    #[error("gave up waiting for {waiting_for}: {lost} was lost on the network: {evidence}; Memory Channel does not retransmit")]
    LostPacket {
        lost: &'static str,
        waiting_for: &'static str,
        evidence: LossEvidence,
    },
    /// This node's own directory change did not come back by loopback,
    /// though the ACK page answered for every store before it.
    #[error("this node's own change of the UMP directory (its even version word) was lost on the way back to it: the ACK page answered for every store made before the check (cluster error count {errors}, {losses} packets lost on this node's link since the Memory Channel API opened); Memory Channel does not retransmit")]
    OwnChangeLost { errors: u64, losses: u64 },
    /// A channel between two processes of one host could not set up or
    /// map its shared file (or the file was not a channel's).
    #[error("shared memory between processes")]
    ShmFile(#[from] ShmFileError),
    #[error("the cluster's UMP directory is damaged: {0}")]
    Directory(&'static str),
}

/// Why a channel's shared file cannot be used. The file's path is in the
/// message; the I/O error, if any, is the source.
#[derive(Debug, thiserror::Error)]
pub enum ShmFileError {
    #[error("{what} {}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is not a UMP channel's shared-memory file of this version: {problem}", path.display())]
    Header { path: PathBuf, problem: String },
}

/// How UMP noticed a damaged or lost message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Receiver-only detection: the error count saved by the writer at the
    /// start of the message is not the reader's count after it.
    CountMoved { saved: u64, now: u64 },
    /// The writer's own check (imc_ckerrcnt through the ACK page) saw the
    /// count move while it wrote, and said so in the trailer.
    WriterCheck,
    /// The payload's CRC does not match: bytes were lost (a dropped packet
    /// leaves stale bytes behind).
    Checksum { want: u32, got: u32 },
    /// A header or trailer is missing where the stream says one is.
    Framing { at: u64 },
    /// The message's number is not the next one: a message was lost.
    Sequence { want: u32, got: u32 },
    /// The writer said so: its write failed while this message was out.
    WriterFailed,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::CountMoved { saved, now } => write!(
                f,
                "a network error happened during the message (error count {saved} when it was written, {now} after it was read)"
            ),
            Damage::WriterCheck => {
                f.write_str("the writer's error check saw a network error during the message")
            }
            Damage::Checksum { want, got } => write!(
                f,
                "the message's CRC is {got:#010x}, not {want:#010x}: data was lost on the network"
            ),
            Damage::Framing { at } => write!(
                f,
                "no message boundary at stream byte {at}: data was lost on the network"
            ),
            Damage::Sequence { want, got } => write!(
                f,
                "message number {got} arrived where {want} was due: a message was lost"
            ),
            Damage::WriterFailed => f.write_str("the writer failed while sending"),
        }
    }
}

/// Which transport a channel uses (seed 004, Figure 7: shared memory
/// between tasks on one node, Memory Channel between nodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Shared memory when the peer is on this node, Memory Channel
    /// otherwise.
    Auto,
    SharedMemory,
    MemoryChannel,
}

impl Transport {
    pub(crate) fn code(self) -> u8 {
        match self {
            Transport::Auto => 0,
            Transport::SharedMemory => 1,
            Transport::MemoryChannel => 2,
        }
    }

    pub(crate) fn from_code(c: u8) -> Transport {
        match c {
            1 => Transport::SharedMemory,
            2 => Transport::MemoryChannel,
            _ => Transport::Auto,
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Auto => "automatic",
            Transport::SharedMemory => "shared-memory",
            Transport::MemoryChannel => "Memory Channel",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firmware_model::{doubled_cause, ErrorChain};

    /// Every variant that keeps a source names it once under ErrorChain.
    #[test]
    fn each_cause_prints_once() {
        let cause = || std::io::Error::other("the distinctive cause");
        let errors = [
            UmpError::Mc(McError::JoinThread(cause())),
            UmpError::Thread(cause()),
        ];
        for e in &errors {
            assert_eq!(doubled_cause(e), None);
            let line = ErrorChain(e).to_string();
            assert_eq!(line.matches("the distinctive cause").count(), 1, "{line}");
        }
    }
}
