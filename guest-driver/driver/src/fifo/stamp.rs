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

/// The header of a store of `len` bytes at `addr`, stamped or not.
pub(super) fn store_header(addr: u64, len: usize, vt: Option<u64>) -> TxRecordHeader {
    TxRecordHeader {
        addr,
        len: len as u32,
        flags: if vt.is_some() { fifo::FLAG_VTIME } else { 0 },
    }
}
