//! The adapter's guest-visible interface: register file, status page, and the
//! record formats of the transmit FIFO and the control and event queues.
//!
//! Both sides use this module: the backend (`mc-device`) to parse what guests post,
//! and the driver (`guest-driver`) to build it, so the layout is written down once.
//! Everything is little-endian. docs/device.md documents every field. Decoding
//! never panics: malformed input is a [`Status`].
//!
//! One module per record family: [`registers`], [`status_page`], [`transmit`],
//! [`control`], [`events`], and the [`status`] codes they share; and
//! [`clock`], the virtual clock's configuration as the host hands it to its
//! guests; [`shm`], which adapters share one host's memory.

mod bytes;
pub mod clock;
mod control;
pub mod dsm;
mod events;
pub mod reference;
mod registers;
pub mod shm;
mod status;
pub mod status_page;
#[cfg(test)]
mod tests;
mod transmit;

pub use control::*;
pub use events::*;
pub use registers::*;
pub use status::*;
pub use status_page::{StatusPage, STATUS_PAGE_SIZE};
pub use transmit::*;

/// Virtio device id given to QEMU's `vhost-user-test-device-pci` (`virtio-id=45`).
/// QEMU names it (virtio-spi) so QEMU starts, and the guests' kernels carry no
/// virtio-spi driver, so no kernel driver claims the adapter's virtio device.
pub const VIRTIO_ID: u32 = 45;
/// PCI ids the guest sees: virtio vendor, modern device id 0x1040 + virtio id.
pub const PCI_VENDOR_ID: u16 = 0x1af4;
#[allow(clippy::cast_possible_truncation)] // 45 fits
pub const PCI_DEVICE_ID: u16 = 0x1040 + VIRTIO_ID as u16;

/// Virtqueues, in order.
pub const NUM_QUEUES: usize = 3;
pub const TX_QUEUE: u16 = 0;
pub const CTRL_QUEUE: u16 = 1;
pub const EVENT_QUEUE: u16 = 2;
/// Largest queue the backend accepts (QEMU's `vq_size` must not exceed it).
pub const MAX_QUEUE_SIZE: u16 = 1024;

/// Size of the register file (QEMU's `config_size`).
pub const CONFIG_SIZE: usize = 128;
/// "MCHN": first word of the register file and of the status page.
pub const MAGIC: u32 = u32::from_le_bytes(*b"MCHN");
/// Interface version: 3 adds stamped stores ([`fifo::FLAG_VTIME`]) and the
/// arrival table ([`CtrlRequest::SetArrivalTable`]).
pub const ABI_VERSION: u32 = 3;

/// Guest frame size that receive bindings are made of.
pub const FRAME_SIZE: u32 = 4096;
/// Largest data length of one transmit record.
pub const MAX_RECORD_DATA: u32 = 64 * 1024;
/// Largest number of pages one SET_PCT request may program.
pub const MAX_PCT_PAGES_PER_REQUEST: u32 = 4096;
/// Largest readable part of a control request the device accepts (a SET_PCT
/// of the most pages with their 4 KiB frames at 8 KiB pages, with room to spare).
pub const MAX_CTRL_REQUEST_BYTES: usize = 256 * 1024;

/// Feature bits in the register file.
pub mod features {
    pub const BROADCAST: u64 = 1 << 0;
    pub const POINT_TO_POINT: u64 = 1 << 1;
    pub const LOOPBACK: u64 = 1 << 2;
    pub const ACK_PAGE: u64 = 1 << 3;
    pub const INTERRUPT: u64 = 1 << 4;
    pub const STATUS_PAGE: u64 = 1 << 5;
    /// Stores are posted through the transmit FIFO (ABI version 2).
    pub const TX_FIFO: u64 = 1 << 6;
    pub const ALL: u64 =
        BROADCAST | POINT_TO_POINT | LOOPBACK | ACK_PAGE | INTERRUPT | STATUS_PAGE | TX_FIFO;
}

/// Link-state bits (register file and status page).
pub mod link {
    pub const UP: u32 = 1 << 0;
    pub const ONLINE: u32 = 1 << 1;
}
