//! The register file: the virtio config space a driver reads (docs/device.md
//! section 13).

use crate::status::AdapterErrorStatus;
use crate::timing::LinkTiming;

use super::bytes::*;
use super::*;

/// Link-timing code in the register file.
pub fn link_timing_code(t: &LinkTiming) -> u32 {
    match t.preset_name() {
        Some("unthrottled") => 0,
        Some("mc1") => 1,
        Some("mc2") => 2,
        Some("clan") => 4,
        _ => 3,
    }
}

/// The name of a link-timing code of the register file ("custom" for a
/// timing that is no preset, or a code this build does not know).
pub fn link_timing_name(code: u32) -> &'static str {
    match code {
        0 => "unthrottled",
        1 => "mc1",
        2 => "mc2",
        4 => "clan",
        _ => "custom",
    }
}

/// Delivery-mode code in the register file.
pub fn delivery_mode_code(m: &crate::skew::DeliveryMode) -> u32 {
    u32::from(m.is_skewed())
}

/// The register file (virtio device config space). Read-only to the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Registers {
    pub node_id: u32,
    pub nodes: u32,
    pub page_size: u32,
    pub max_payload: u32,
    pub address_space: u64,
    pub features: u64,
    pub link_state: u32,
    pub error_status: u32,
    pub membership_epoch: u64,
    pub members: u64,
    pub cluster_error_count: u64,
    pub link_timing: u32,
    pub max_record_data: u32,
    /// 0 eager, 1 skewed delivery (see `firmware_model::DeliveryMode`).
    pub delivery_mode: u32,
    /// Bit q: queue q is broken (its driver moved the available index
    /// impossibly, named a descriptor outside the queue or put a ring outside
    /// RAM) and is not served until the driver re-initialises the ring.
    pub broken_queues: u32,
}

/// Register offsets.
pub mod reg {
    pub const MAGIC: usize = 0x00;
    pub const VERSION: usize = 0x04;
    pub const NODE_ID: usize = 0x08;
    pub const NODES: usize = 0x0c;
    pub const PAGE_SIZE: usize = 0x10;
    pub const MAX_PAYLOAD: usize = 0x14;
    pub const ADDRESS_SPACE: usize = 0x18;
    pub const FEATURES: usize = 0x20;
    pub const LINK_STATE: usize = 0x28;
    pub const ERROR_STATUS: usize = 0x2c;
    pub const MEMBERSHIP_EPOCH: usize = 0x30;
    pub const MEMBERS: usize = 0x38;
    pub const CLUSTER_ERROR_COUNT: usize = 0x40;
    pub const LINK_TIMING: usize = 0x48;
    pub const MAX_RECORD_DATA: usize = 0x4c;
    pub const DELIVERY_MODE: usize = 0x50;
    pub const BROKEN_QUEUES: usize = 0x54;
}

impl Registers {
    pub fn to_bytes(&self) -> [u8; CONFIG_SIZE] {
        let mut b = [0u8; CONFIG_SIZE];
        put_u32(&mut b, reg::MAGIC, MAGIC);
        put_u32(&mut b, reg::VERSION, ABI_VERSION);
        put_u32(&mut b, reg::NODE_ID, self.node_id);
        put_u32(&mut b, reg::NODES, self.nodes);
        put_u32(&mut b, reg::PAGE_SIZE, self.page_size);
        put_u32(&mut b, reg::MAX_PAYLOAD, self.max_payload);
        put_u64(&mut b, reg::ADDRESS_SPACE, self.address_space);
        put_u64(&mut b, reg::FEATURES, self.features);
        put_u32(&mut b, reg::LINK_STATE, self.link_state);
        put_u32(&mut b, reg::ERROR_STATUS, self.error_status);
        put_u64(&mut b, reg::MEMBERSHIP_EPOCH, self.membership_epoch);
        put_u64(&mut b, reg::MEMBERS, self.members);
        put_u64(&mut b, reg::CLUSTER_ERROR_COUNT, self.cluster_error_count);
        put_u32(&mut b, reg::LINK_TIMING, self.link_timing);
        put_u32(&mut b, reg::MAX_RECORD_DATA, self.max_record_data);
        put_u32(&mut b, reg::DELIVERY_MODE, self.delivery_mode);
        put_u32(&mut b, reg::BROKEN_QUEUES, self.broken_queues);
        b
    }

    /// Parse a register file; `None` if it is short or the magic/version is wrong.
    pub fn from_bytes(b: &[u8]) -> Option<Registers> {
        if get_u32(b, reg::MAGIC)? != MAGIC || get_u32(b, reg::VERSION)? != ABI_VERSION {
            return None;
        }
        Some(Registers {
            node_id: get_u32(b, reg::NODE_ID)?,
            nodes: get_u32(b, reg::NODES)?,
            page_size: get_u32(b, reg::PAGE_SIZE)?,
            max_payload: get_u32(b, reg::MAX_PAYLOAD)?,
            address_space: get_u64(b, reg::ADDRESS_SPACE)?,
            features: get_u64(b, reg::FEATURES)?,
            link_state: get_u32(b, reg::LINK_STATE)?,
            error_status: get_u32(b, reg::ERROR_STATUS)?,
            membership_epoch: get_u64(b, reg::MEMBERSHIP_EPOCH)?,
            members: get_u64(b, reg::MEMBERS)?,
            cluster_error_count: get_u64(b, reg::CLUSTER_ERROR_COUNT)?,
            link_timing: get_u32(b, reg::LINK_TIMING)?,
            max_record_data: get_u32(b, reg::MAX_RECORD_DATA)?,
            delivery_mode: get_u32(b, reg::DELIVERY_MODE)?,
            broken_queues: get_u32(b, reg::BROKEN_QUEUES)?,
        })
    }

    pub fn error(&self) -> AdapterErrorStatus {
        AdapterErrorStatus::from_word(self.error_status)
    }
}
