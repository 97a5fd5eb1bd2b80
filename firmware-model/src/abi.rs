//! The adapter's guest-visible interface: register file, status page, and the
//! record formats of the transmit, control and event queues.
//!
//! Both sides use this module: the backend (`mc-device`) to parse what guests post,
//! and the driver (`guest-driver`) to build it, so the layout is written down once.
//! Everything is little-endian. docs/device.md documents every field. Decoding
//! never panics: malformed input is a [`Status`].

use crate::hub::ModelError;
use crate::pct::PctError;
use crate::sink::{ErrorKind, Event};
use crate::status::AdapterErrorStatus;
use crate::timing::LinkTiming;

/// Virtio device id given to QEMU's `vhost-user-test-device-pci` (`virtio-id=45`).
/// QEMU names it (virtio-spi) so QEMU starts, and the guests' kernels carry no
/// virtio-spi driver, so no kernel driver claims the adapter's virtio device.
pub const VIRTIO_ID: u32 = 45;
/// PCI ids the guest sees: virtio vendor, modern device id 0x1040 + virtio id.
pub const PCI_VENDOR_ID: u16 = 0x1af4;
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
/// Interface version.
pub const ABI_VERSION: u32 = 1;

/// Guest frame size that receive bindings are made of.
pub const FRAME_SIZE: u32 = 4096;
/// Largest data length of one transmit record.
pub const MAX_RECORD_DATA: u32 = 64 * 1024;
/// Largest readable part of one transmit chain (bounds one request's work).
pub const MAX_TX_CHAIN_BYTES: u32 = 1 << 20;
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
    pub const ALL: u64 = BROADCAST | POINT_TO_POINT | LOOPBACK | ACK_PAGE | INTERRUPT | STATUS_PAGE;
}

/// Link-state bits (register file and status page).
pub mod link {
    pub const UP: u32 = 1 << 0;
    pub const ONLINE: u32 = 1 << 1;
}

/// Completion status of a transmit chain or control request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Status {
    Ok = 0,
    /// The request's layout is wrong: too short, reserved fields set, no room
    /// for the response, a chain that loops or is too long.
    Malformed = 1,
    UnknownCommand = 2,
    /// The PCT entry is refused; `detail` is [`pct_error_code`].
    InvalidPct = 3,
    /// A guest-physical address is misaligned or outside guest RAM.
    BadAddress = 4,
    /// A global address or page is outside the address space.
    OutOfRange = 5,
    /// A page is not enabled for transmit; `detail` is the page.
    TransmitDisabled = 6,
    TooLarge = 7,
    /// The adapter has crashed (fault injection) and not rejoined.
    Offline = 8,
    /// A transmit record with no data.
    Empty = 9,
    /// A store to an ACK page that does not fit.
    AckSlot = 10,
    /// The device failed (no guest memory yet, internal error).
    DeviceError = 11,
}

impl Status {
    pub fn from_u32(v: u32) -> Option<Status> {
        use Status::*;
        [
            Ok,
            Malformed,
            UnknownCommand,
            InvalidPct,
            BadAddress,
            OutOfRange,
            TransmitDisabled,
            TooLarge,
            Offline,
            Empty,
            AckSlot,
            DeviceError,
        ]
        .into_iter()
        .find(|s| *s as u32 == v)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Ok => "ok",
            Status::Malformed => "malformed request",
            Status::UnknownCommand => "unknown command",
            Status::InvalidPct => "invalid PCT entry",
            Status::BadAddress => "guest address outside guest RAM or misaligned",
            Status::OutOfRange => "outside the global address space",
            Status::TransmitDisabled => "page not enabled for transmit",
            Status::TooLarge => "too large",
            Status::Offline => "adapter offline",
            Status::Empty => "empty store",
            Status::AckSlot => "ACK slot does not fit in the page",
            Status::DeviceError => "device error",
        })
    }
}

/// Detail code of an [`Status::InvalidPct`] answer.
pub fn pct_error_code(e: &PctError) -> u32 {
    match e {
        PctError::ReservedBits(_) => 1,
        PctError::DestinationWithoutPointToPoint => 2,
        PctError::PointToPointWithoutTransmit => 3,
        PctError::LoopbackWithoutTransmit => 4,
        PctError::InterruptWithoutReceive => 5,
        PctError::AckNeedsTransmitAndReceive => 6,
        PctError::AckPointToPoint => 7,
        PctError::DestinationIsSelf { .. } => 8,
        PctError::DestinationOutOfRange { .. } => 9,
        PctError::PageOutOfRange { .. } => 10,
    }
}

/// The status and detail a guest gets for a refused request.
pub fn status_of(e: &ModelError) -> (Status, u32) {
    match e {
        ModelError::NoSuchNode { .. } | ModelError::Config(_) | ModelError::Fault(_) => {
            (Status::DeviceError, 0)
        }
        ModelError::NodeOffline(_) => (Status::Offline, 0),
        ModelError::EmptyStore => (Status::Empty, 0),
        ModelError::AddressOutOfRange { .. } => (Status::OutOfRange, 0),
        ModelError::TransmitDisabled { page, .. } => (Status::TransmitDisabled, page.0),
        ModelError::AckStoreSpansPages { page } => (Status::AckSlot, page.0),
        ModelError::AckSlotOutOfPage { offset, .. } => (Status::AckSlot, *offset),
        ModelError::Pct(PctError::PageOutOfRange { page, .. }) => (Status::OutOfRange, page.0),
        ModelError::Pct(p) => (Status::InvalidPct, pct_error_code(p)),
    }
}

fn get_u32(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn get_u64(b: &[u8], off: usize) -> Option<u64> {
    b.get(off..off + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    if let Some(s) = b.get_mut(off..off + 4) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

fn put_u64(b: &mut [u8], off: usize, v: u64) {
    if let Some(s) = b.get_mut(off..off + 8) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

/// Link-timing code in the register file.
pub fn link_timing_code(t: &LinkTiming) -> u32 {
    match t.preset_name() {
        Some("unthrottled") => 0,
        Some("mc1") => 1,
        Some("mc2") => 2,
        _ => 3,
    }
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
        })
    }

    pub fn error(&self) -> AdapterErrorStatus {
        AdapterErrorStatus::from_word(self.error_status)
    }
}

/// Bytes the device writes to the status page.
pub const STATUS_PAGE_SIZE: usize = 128;

/// Status page offsets.
pub mod status_page {
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
}

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

/// Control-queue opcodes.
pub mod op {
    pub const SET_PCT: u32 = 1;
    pub const GET_PCT: u32 = 2;
    pub const SET_STATUS_PAGE: u32 = 3;
    pub const GET_STATUS: u32 = 4;
    pub const RESET: u32 = 5;
}

/// A control-queue request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CtrlRequest {
    /// Program `count` pages from `first_page` with PCT word `entry`. With
    /// receive enabled, `frames` holds `count * page_size / FRAME_SIZE`
    /// guest-physical frame addresses, page by page; otherwise it is empty.
    SetPct {
        first_page: u32,
        count: u32,
        entry: u32,
        frames: Vec<u64>,
    },
    /// Read one PCT entry: value = entry word, detail = 1 if receive frames are bound.
    GetPct { page: u32 },
    /// Name the status page (0 = none). It must lie inside guest RAM.
    SetStatusPage { gpa: u64 },
    /// value = cluster error count, detail = this adapter's status word.
    GetStatus,
    /// Disable every PCT entry, unbind every frame, clear the error status.
    Reset,
}

/// Fixed bytes of a request before its variable part.
pub const CTRL_HEADER_SIZE: usize = 8;
pub const CTRL_RESPONSE_SIZE: usize = 16;

impl CtrlRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        let opcode = match self {
            CtrlRequest::SetPct { .. } => op::SET_PCT,
            CtrlRequest::GetPct { .. } => op::GET_PCT,
            CtrlRequest::SetStatusPage { .. } => op::SET_STATUS_PAGE,
            CtrlRequest::GetStatus => op::GET_STATUS,
            CtrlRequest::Reset => op::RESET,
        };
        b.extend_from_slice(&opcode.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        match self {
            CtrlRequest::SetPct {
                first_page,
                count,
                entry,
                frames,
            } => {
                b.extend_from_slice(&first_page.to_le_bytes());
                b.extend_from_slice(&count.to_le_bytes());
                b.extend_from_slice(&entry.to_le_bytes());
                b.extend_from_slice(&(frames.len() as u32).to_le_bytes());
                for f in frames {
                    b.extend_from_slice(&f.to_le_bytes());
                }
            }
            CtrlRequest::GetPct { page } => {
                b.extend_from_slice(&page.to_le_bytes());
                b.extend_from_slice(&0u32.to_le_bytes());
            }
            CtrlRequest::SetStatusPage { gpa } => b.extend_from_slice(&gpa.to_le_bytes()),
            CtrlRequest::GetStatus | CtrlRequest::Reset => {}
        }
        b
    }

    /// Parse a request; the error is the status to answer with.
    pub fn decode(b: &[u8]) -> Result<CtrlRequest, Status> {
        let opcode = get_u32(b, 0).ok_or(Status::Malformed)?;
        if get_u32(b, 4).ok_or(Status::Malformed)? != 0 {
            return Err(Status::Malformed);
        }
        let body = &b[CTRL_HEADER_SIZE..];
        let exact = |n: usize| {
            if body.len() == n {
                Ok(())
            } else {
                Err(Status::Malformed)
            }
        };
        match opcode {
            op::SET_PCT => {
                let first_page = get_u32(body, 0).ok_or(Status::Malformed)?;
                let count = get_u32(body, 4).ok_or(Status::Malformed)?;
                let entry = get_u32(body, 8).ok_or(Status::Malformed)?;
                let nframes = get_u32(body, 12).ok_or(Status::Malformed)? as usize;
                if count == 0 {
                    return Err(Status::Malformed);
                }
                if count > MAX_PCT_PAGES_PER_REQUEST {
                    return Err(Status::TooLarge);
                }
                exact(16 + nframes.checked_mul(8).ok_or(Status::Malformed)?)?;
                let frames = (0..nframes)
                    .filter_map(|i| get_u64(body, 16 + 8 * i))
                    .collect();
                Ok(CtrlRequest::SetPct {
                    first_page,
                    count,
                    entry,
                    frames,
                })
            }
            op::GET_PCT => {
                exact(8)?;
                if get_u32(body, 4) != Some(0) {
                    return Err(Status::Malformed);
                }
                Ok(CtrlRequest::GetPct {
                    page: get_u32(body, 0).ok_or(Status::Malformed)?,
                })
            }
            op::SET_STATUS_PAGE => {
                exact(8)?;
                Ok(CtrlRequest::SetStatusPage {
                    gpa: get_u64(body, 0).ok_or(Status::Malformed)?,
                })
            }
            op::GET_STATUS => exact(0).map(|_| CtrlRequest::GetStatus),
            op::RESET => exact(0).map(|_| CtrlRequest::Reset),
            _ => Err(Status::UnknownCommand),
        }
    }
}

/// Answer to a control request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtrlResponse {
    pub status: u32,
    pub detail: u32,
    pub value: u64,
}

impl CtrlResponse {
    pub fn ok(value: u64, detail: u32) -> Self {
        CtrlResponse {
            status: Status::Ok as u32,
            detail,
            value,
        }
    }

    pub fn error(status: Status, detail: u32) -> Self {
        CtrlResponse {
            status: status as u32,
            detail,
            value: 0,
        }
    }

    pub fn to_bytes(&self) -> [u8; CTRL_RESPONSE_SIZE] {
        let mut b = [0u8; CTRL_RESPONSE_SIZE];
        put_u32(&mut b, 0, self.status);
        put_u32(&mut b, 4, self.detail);
        put_u64(&mut b, 8, self.value);
        b
    }

    pub fn from_bytes(b: &[u8]) -> Option<CtrlResponse> {
        Some(CtrlResponse {
            status: get_u32(b, 0)?,
            detail: get_u32(b, 4)?,
            value: get_u64(b, 8)?,
        })
    }
}

/// Size of one event record; event buffers must be at least this big.
pub const EVENT_SIZE: usize = 32;

/// Event types.
pub mod event_type {
    pub const PAGE_WRITTEN: u32 = 1;
    pub const ERROR: u32 = 2;
    pub const LINK: u32 = 3;
    pub const MEMBERSHIP: u32 = 4;
    /// Events were lost because the driver posted no buffers: v0 = how many.
    pub const OVERFLOW: u32 = 5;
}

/// One device-to-driver event: `{type u32, a u32, v0 u64, v1 u64, time u64}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRecord {
    pub kind: u32,
    pub a: u32,
    pub v0: u64,
    pub v1: u64,
    pub time_ns: u64,
}

impl EventRecord {
    /// The record for a model event (None for events no driver receives).
    pub fn from_event(e: &Event) -> Option<EventRecord> {
        let r = |kind, a, v0, v1, at: crate::types::Nanos| EventRecord {
            kind,
            a,
            v0,
            v1,
            time_ns: at.0,
        };
        Some(match *e {
            Event::PageWritten {
                page, source, at, ..
            } => r(
                event_type::PAGE_WRITTEN,
                u32::from(source.0),
                u64::from(page.0),
                0,
                at,
            ),
            Event::Error { kind, at, .. } => {
                let k = match kind {
                    ErrorKind::Crc => 1,
                    ErrorKind::LinkDown => 2,
                    ErrorKind::Protection => 3,
                };
                r(event_type::ERROR, k, 0, 0, at)
            }
            Event::LinkState { up, at, .. } => r(event_type::LINK, u32::from(up), 0, 0, at),
            Event::MembershipChanged {
                epoch, members, at, ..
            } => r(event_type::MEMBERSHIP, 0, epoch, members.0, at),
            Event::FaultApplied { .. } => return None,
        })
    }

    pub fn overflow(lost: u64) -> EventRecord {
        EventRecord {
            kind: event_type::OVERFLOW,
            a: 0,
            v0: lost,
            v1: 0,
            time_ns: 0,
        }
    }

    pub fn to_bytes(&self) -> [u8; EVENT_SIZE] {
        let mut b = [0u8; EVENT_SIZE];
        put_u32(&mut b, 0, self.kind);
        put_u32(&mut b, 4, self.a);
        put_u64(&mut b, 8, self.v0);
        put_u64(&mut b, 16, self.v1);
        put_u64(&mut b, 24, self.time_ns);
        b
    }

    pub fn from_bytes(b: &[u8]) -> Option<EventRecord> {
        Some(EventRecord {
            kind: get_u32(b, 0)?,
            a: get_u32(b, 4)?,
            v0: get_u64(b, 8)?,
            v1: get_u64(b, 16)?,
            time_ns: get_u64(b, 24)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn registers_round_trip() {
        let r = Registers {
            node_id: 3,
            nodes: 4,
            page_size: 8192,
            max_payload: 32,
            address_space: 512 << 20,
            features: features::ALL,
            link_state: link::UP | link::ONLINE,
            error_status: 0x8000_0001,
            membership_epoch: 7,
            members: 0b1111,
            cluster_error_count: 9,
            link_timing: 2,
            max_record_data: MAX_RECORD_DATA,
        };
        assert_eq!(Registers::from_bytes(&r.to_bytes()), Some(r));
        assert_eq!(&r.to_bytes()[0..4], b"MCHN");
        assert_eq!(Registers::from_bytes(&[0u8; CONFIG_SIZE]), None);
    }

    #[test]
    fn ctrl_requests_round_trip() {
        let reqs = [
            CtrlRequest::SetPct {
                first_page: 5,
                count: 2,
                entry: 0b101,
                frames: vec![0x1000, 0x2000, 0x3000, 0x4000],
            },
            CtrlRequest::SetPct {
                first_page: 5,
                count: 1,
                entry: 1,
                frames: vec![],
            },
            CtrlRequest::GetPct { page: 9 },
            CtrlRequest::SetStatusPage { gpa: 0x7000 },
            CtrlRequest::GetStatus,
            CtrlRequest::Reset,
        ];
        for r in reqs {
            assert_eq!(CtrlRequest::decode(&r.encode()), Ok(r));
        }
    }

    #[test]
    fn malformed_ctrl_requests_get_a_status() {
        assert_eq!(CtrlRequest::decode(&[]), Err(Status::Malformed));
        assert_eq!(
            CtrlRequest::decode(&[99, 0, 0, 0, 0, 0, 0, 0]),
            Err(Status::UnknownCommand)
        );
        assert_eq!(
            CtrlRequest::decode(&[4, 0, 0, 0, 1, 0, 0, 0]),
            Err(Status::Malformed)
        );
        let mut long = CtrlRequest::GetStatus.encode();
        long.push(0);
        assert_eq!(CtrlRequest::decode(&long), Err(Status::Malformed));
        // A frame count that does not match the bytes present.
        let mut b = CtrlRequest::SetPct {
            first_page: 0,
            count: 1,
            entry: 4,
            frames: vec![0x1000],
        }
        .encode();
        b.truncate(b.len() - 1);
        assert_eq!(CtrlRequest::decode(&b), Err(Status::Malformed));
        let huge = CtrlRequest::SetPct {
            first_page: 0,
            count: 1 << 20,
            entry: 1,
            frames: vec![],
        };
        assert_eq!(CtrlRequest::decode(&huge.encode()), Err(Status::TooLarge));
    }

    #[test]
    fn every_status_converts_back() {
        for v in 0..=11 {
            assert_eq!(Status::from_u32(v).map(|s| s as u32), Some(v));
        }
        assert_eq!(Status::from_u32(12), None);
    }

    proptest! {
        #[test]
        fn ctrl_decode_never_panics(b in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = CtrlRequest::decode(&b);
        }

        #[test]
        fn record_size_is_aligned(len in 0u32..100_000) {
            let s = TxRecordHeader::record_size(len);
            prop_assert_eq!(s % 8, 0);
            prop_assert!(s >= 16 + u64::from(len) && s < 24 + u64::from(len));
        }
    }
}
