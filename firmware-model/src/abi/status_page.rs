//! The status page: hot values the device keeps in guest RAM (docs/device.md
//! section 16).

use super::bytes::*;
use super::*;

/// Bytes the device writes to the status page.
pub const STATUS_PAGE_SIZE: usize = 128;

// Offsets of the fields.
pub const MAGIC: usize = 0x00;
pub const VERSION: usize = 0x04;
/// Sequence lock: odd while the device rewrites the page, even when whole.
pub const UPDATES: usize = 0x08;
/// The cluster error count: one aligned 64-bit load (imc_rderrcnt).
pub const CLUSTER_ERROR_COUNT: usize = 0x10;
pub const MEMBERSHIP_EPOCH: usize = 0x18;
pub const MEMBERS: usize = 0x20;
pub const ERROR_STATUS: usize = 0x28;
pub const LINK_STATE: usize = 0x2c;
pub const PACKETS_SENT: usize = 0x30;
pub const BYTES_SENT: usize = 0x38;
pub const PACKETS_RECEIVED: usize = 0x40;
pub const BYTES_RECEIVED: usize = 0x48;
pub const DROPS: usize = 0x50;
pub const ERRORS: usize = 0x58;
pub const PROTECTION_ERRORS: usize = 0x60;
pub const EVENTS_LOST: usize = 0x68;

/// The hot values the device keeps in guest RAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StatusPage {
    pub updates: u64,
    pub cluster_error_count: u64,
    pub membership_epoch: u64,
    pub members: u64,
    pub error_status: u32,
    pub link_state: u32,
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub drops: u64,
    pub errors: u64,
    pub protection_errors: u64,
    pub events_lost: u64,
}

impl StatusPage {
    pub fn to_bytes(&self) -> [u8; STATUS_PAGE_SIZE] {
        use status_page::*;
        let mut b = [0u8; STATUS_PAGE_SIZE];
        put_u32(&mut b, MAGIC, crate::abi::MAGIC);
        put_u32(&mut b, VERSION, ABI_VERSION);
        put_u64(&mut b, UPDATES, self.updates);
        put_u64(&mut b, CLUSTER_ERROR_COUNT, self.cluster_error_count);
        put_u64(&mut b, MEMBERSHIP_EPOCH, self.membership_epoch);
        put_u64(&mut b, MEMBERS, self.members);
        put_u32(&mut b, ERROR_STATUS, self.error_status);
        put_u32(&mut b, LINK_STATE, self.link_state);
        put_u64(&mut b, PACKETS_SENT, self.packets_sent);
        put_u64(&mut b, BYTES_SENT, self.bytes_sent);
        put_u64(&mut b, PACKETS_RECEIVED, self.packets_received);
        put_u64(&mut b, BYTES_RECEIVED, self.bytes_received);
        put_u64(&mut b, DROPS, self.drops);
        put_u64(&mut b, ERRORS, self.errors);
        put_u64(&mut b, PROTECTION_ERRORS, self.protection_errors);
        put_u64(&mut b, EVENTS_LOST, self.events_lost);
        b
    }

    pub fn from_bytes(b: &[u8]) -> Option<StatusPage> {
        use status_page::*;
        if get_u32(b, MAGIC)? != crate::abi::MAGIC {
            return None;
        }
        Some(StatusPage {
            updates: get_u64(b, UPDATES)?,
            cluster_error_count: get_u64(b, CLUSTER_ERROR_COUNT)?,
            membership_epoch: get_u64(b, MEMBERSHIP_EPOCH)?,
            members: get_u64(b, MEMBERS)?,
            error_status: get_u32(b, ERROR_STATUS)?,
            link_state: get_u32(b, LINK_STATE)?,
            packets_sent: get_u64(b, PACKETS_SENT)?,
            bytes_sent: get_u64(b, BYTES_SENT)?,
            packets_received: get_u64(b, PACKETS_RECEIVED)?,
            bytes_received: get_u64(b, BYTES_RECEIVED)?,
            drops: get_u64(b, DROPS)?,
            errors: get_u64(b, ERRORS)?,
            protection_errors: get_u64(b, PROTECTION_ERRORS)?,
            events_lost: get_u64(b, EVENTS_LOST)?,
        })
    }
}
