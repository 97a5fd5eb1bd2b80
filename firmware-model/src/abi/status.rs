//! Completion status codes of transmit chains and control requests, and how
//! the model's refusals map onto them (docs/device.md section 14, "Status codes").

use crate::hub::ModelError;
use crate::pct::PctError;

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
