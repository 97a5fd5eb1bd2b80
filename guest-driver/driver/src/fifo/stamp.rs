//! Virtual-time stamping: in a predicted-time run (docs/virtual-time.md
//! s.2) each record carries the posting thread's virtual time after its
//! header (`fifo::FLAG_VTIME`), from which the hub computes the packet's
//! virtual arrival; in other runs records carry none.

use firmware_model::abi::{fifo, TxRecordHeader};

use crate::vclock;

/// The time a record carries: the posting thread's virtual time as last
/// synced, in a predicted-time run (docs/virtual-time.md); none otherwise.
pub(super) fn stamp() -> Option<u64> {
    vclock::enabled().then(vclock::stamp)
}

/// A record's length as its header carries it: records are cut to at
/// most `MAX_RECORD_DATA` bytes before they are planned (`TxFifo::post`,
/// `post_all`).
pub(super) fn record_len(data: &[u8]) -> u32 {
    u32::try_from(data.len()).expect("a record holds at most MAX_RECORD_DATA bytes")
}

/// The header of a store of `data` at `addr`, stamped or not.
pub(super) fn store_header(addr: u64, data: &[u8], vt: Option<u64>) -> TxRecordHeader {
    TxRecordHeader {
        addr,
        len: record_len(data),
        flags: if vt.is_some() { fifo::FLAG_VTIME } else { 0 },
    }
}
