//! Transmit records and chain completions (docs/device.md section 14,
//! "Transmit records").

use super::bytes::*;

/// Header of one transmit record; `len` data bytes follow, then padding to 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxRecordHeader {
    /// Global address of the store.
    pub addr: u64,
    /// Data bytes.
    pub len: u32,
    /// Reserved, must be 0.
    pub flags: u32,
}

pub const TX_RECORD_HEADER_SIZE: usize = 16;
/// The writable completion at the end of every transmit chain.
pub const TX_COMPLETION_SIZE: usize = 8;

impl TxRecordHeader {
    pub fn to_bytes(&self) -> [u8; TX_RECORD_HEADER_SIZE] {
        let mut b = [0u8; TX_RECORD_HEADER_SIZE];
        put_u64(&mut b, 0, self.addr);
        put_u32(&mut b, 8, self.len);
        put_u32(&mut b, 12, self.flags);
        b
    }

    pub fn from_bytes(b: &[u8]) -> Option<TxRecordHeader> {
        Some(TxRecordHeader {
            addr: get_u64(b, 0)?,
            len: get_u32(b, 8)?,
            flags: get_u32(b, 12)?,
        })
    }

    /// Bytes this record occupies in the chain, header and padding included.
    pub fn record_size(len: u32) -> u64 {
        TX_RECORD_HEADER_SIZE as u64 + u64::from(len).div_ceil(8) * 8
    }
}

/// Completion of a transmit chain: how far the device got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxCompletion {
    pub status: u32,
    /// Records transmitted before the first refused one (all of them if Ok).
    pub records_done: u32,
}

impl TxCompletion {
    pub fn to_bytes(&self) -> [u8; TX_COMPLETION_SIZE] {
        let mut b = [0u8; TX_COMPLETION_SIZE];
        put_u32(&mut b, 0, self.status);
        put_u32(&mut b, 4, self.records_done);
        b
    }

    pub fn from_bytes(b: &[u8]) -> Option<TxCompletion> {
        Some(TxCompletion {
            status: get_u32(b, 0)?,
            records_done: get_u32(b, 4)?,
        })
    }
}
