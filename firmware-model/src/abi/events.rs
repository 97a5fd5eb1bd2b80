//! Event records the device writes into posted event buffers (docs/device.md
//! section 17).

use crate::sink::{ErrorKind, Event};

use super::bytes::*;

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
