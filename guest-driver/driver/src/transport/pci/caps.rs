//! The virtio PCI capabilities (virtio 1.x, 4.1.4): the vendor-specific
//! capabilities (id 0x09) in a function's configuration space that say in
//! which BAR, at which offset and how long the common configuration, notify,
//! ISR and device configuration structures are.
//!
//! virtio-bindings has no virtio_pci module, so the capability layout
//! (`struct virtio_pci_cap`, `struct virtio_pci_notify_cap`) is spelled out here.

use super::sysfs::CONFIG_HEADER;

/// `virtio_pci_cap.cfg_type` values (4.1.4).
pub mod cap_type {
    /// VIRTIO_PCI_CAP_COMMON_CFG
    pub const COMMON: u8 = 1;
    /// VIRTIO_PCI_CAP_NOTIFY_CFG
    pub const NOTIFY: u8 = 2;
    /// VIRTIO_PCI_CAP_ISR_CFG
    pub const ISR: u8 = 3;
    /// VIRTIO_PCI_CAP_DEVICE_CFG
    pub const DEVICE: u8 = 4;
}

/// PCI capability id of a vendor-specific capability.
const CAP_ID_VENDOR: u8 = 0x09;
/// Status register bit: the function has a capability list.
const STATUS_CAP_LIST: u16 = 0x10;
/// Where the first capability pointer is.
const CAP_POINTER: usize = 0x34;
/// `struct virtio_pci_cap` and `struct virtio_pci_notify_cap` sizes.
const CAP_LEN: usize = 16;
const NOTIFY_CAP_LEN: usize = 20;
/// More hops than a 256-byte space can hold capabilities: a loop.
const MAX_HOPS: usize = 48;

/// Why a configuration space's capability list cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CapError {
    #[error("config space is {len} bytes, need at least {CONFIG_HEADER}")]
    ConfigTooShort { len: usize },
    #[error("the function has no capability list (status bit 4 clear)")]
    NoCapabilityList,
    #[error("bad capability pointer {ptr:#x}")]
    BadPointer { ptr: usize },
    #[error("virtio capability at {at:#x} runs past config space")]
    Truncated { at: usize },
    #[error("notify capability at {at:#x} is short")]
    ShortNotify { at: usize },
}

/// One virtio PCI capability (`struct virtio_pci_cap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtioCap {
    pub cfg_type: u8,
    pub bar: u8,
    pub offset: u32,
    pub length: u32,
    /// notify_off_multiplier (notify capability only).
    pub notify_off_multiplier: u32,
}

/// Walk the capability list of a type-0 config space and return the virtio
/// vendor capabilities. Loops and out-of-range pointers are errors.
pub fn parse_virtio_caps(config: &[u8]) -> Result<Vec<VirtioCap>, CapError> {
    if config.len() < CONFIG_HEADER {
        return Err(CapError::ConfigTooShort { len: config.len() });
    }
    let status = u16::from_le_bytes([config[6], config[7]]);
    if status & STATUS_CAP_LIST == 0 {
        return Err(CapError::NoCapabilityList);
    }
    let u32_at =
        |o: usize| u32::from_le_bytes([config[o], config[o + 1], config[o + 2], config[o + 3]]);
    let mut caps = Vec::new();
    let mut ptr = usize::from(config[CAP_POINTER] & 0xfc);
    let mut hops = 0;
    while ptr != 0 {
        hops += 1;
        if hops > MAX_HOPS || ptr < CONFIG_HEADER || ptr + 2 > config.len() {
            return Err(CapError::BadPointer { ptr });
        }
        let id = config[ptr];
        let next = usize::from(config[ptr + 1] & 0xfc);
        if id == CAP_ID_VENDOR {
            if ptr + CAP_LEN > config.len() {
                return Err(CapError::Truncated { at: ptr });
            }
            let cfg_type = config[ptr + 3];
            let notify_off_multiplier = if cfg_type == cap_type::NOTIFY {
                if ptr + NOTIFY_CAP_LEN > config.len() {
                    return Err(CapError::ShortNotify { at: ptr });
                }
                u32_at(ptr + 16)
            } else {
                0
            };
            caps.push(VirtioCap {
                cfg_type,
                bar: config[ptr + 4],
                offset: u32_at(ptr + 8),
                length: u32_at(ptr + 12),
                notify_off_multiplier,
            });
        }
        ptr = next;
    }
    Ok(caps)
}

/// The first capability of type `cfg_type`, as virtio asks drivers to use
/// (4.1.4: "the driver SHOULD use the first instance").
pub fn find(caps: &[VirtioCap], cfg_type: u8) -> Option<VirtioCap> {
    caps.iter().find(|c| c.cfg_type == cfg_type).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_walk() {
        let mut c = vec![0u8; 256];
        c[6] = 0x10;
        c[0x34] = 0x40;
        // An MSI-X cap, then two virtio caps.
        c[0x40..0x44].copy_from_slice(&[0x11, 0x50, 0, 0]);
        let cap = |c: &mut Vec<u8>, at: usize, next: u8, ty: u8, bar: u8, off: u32, len: u32| {
            c[at] = 0x09;
            c[at + 1] = next;
            c[at + 2] = 16;
            c[at + 3] = ty;
            c[at + 4] = bar;
            c[at + 8..at + 12].copy_from_slice(&off.to_le_bytes());
            c[at + 12..at + 16].copy_from_slice(&len.to_le_bytes());
        };
        cap(&mut c, 0x50, 0x64, 1, 4, 0, 0x1000);
        cap(&mut c, 0x64, 0, 2, 4, 0x3000, 0x1000);
        c[0x64 + 16..0x64 + 20].copy_from_slice(&4u32.to_le_bytes());
        let caps = parse_virtio_caps(&c).unwrap();
        assert_eq!(caps.len(), 2);
        assert_eq!(caps[0].cfg_type, cap_type::COMMON);
        assert_eq!(
            (caps[1].bar, caps[1].offset, caps[1].notify_off_multiplier),
            (4, 0x3000, 4)
        );
        assert_eq!(find(&caps, cap_type::NOTIFY), Some(caps[1]));
        assert_eq!(find(&caps, cap_type::ISR), None);
        // A notify capability cut off by the end of config space.
        assert_eq!(
            parse_virtio_caps(&c[..0x64 + 18]),
            Err(CapError::ShortNotify { at: 0x64 })
        );
        assert_eq!(
            parse_virtio_caps(&c[..0x30]),
            Err(CapError::ConfigTooShort { len: 0x30 })
        );
        // A loop is an error, not a hang.
        c[0x65] = 0x50;
        assert!(matches!(
            parse_virtio_caps(&c),
            Err(CapError::BadPointer { .. })
        ));
        c[6] = 0;
        assert_eq!(parse_virtio_caps(&c), Err(CapError::NoCapabilityList));
    }
}
