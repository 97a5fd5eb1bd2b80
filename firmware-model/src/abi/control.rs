//! Control requests and responses (docs/device.md section 14, "Control
//! requests").

use super::bytes::*;
use super::*;

/// Control-queue opcodes.
pub mod op {
    pub const SET_PCT: u32 = 1;
    pub const GET_PCT: u32 = 2;
    pub const SET_STATUS_PAGE: u32 = 3;
    pub const GET_STATUS: u32 = 4;
    pub const RESET: u32 = 5;
    pub const SET_TX_FIFO: u32 = 6;
    pub const SET_ARRIVAL_TABLE: u32 = 7;
}

/// Granules of an arrival table the device accepts: 64 bytes to 64 KiB
/// (docs/virtual-time.md).
pub const MIN_ARRIVAL_GRANULE_SHIFT: u32 = 6;
pub const MAX_ARRIVAL_GRANULE_SHIFT: u32 = 16;

/// Entries of an arrival table with granules of `1 << shift` bytes over
/// `address_space` bytes of Memory Channel address space.
pub fn arrival_table_entries(address_space: u64, shift: u32) -> u64 {
    address_space.div_ceil(1u64 << shift.min(63))
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
    /// Disable every PCT entry, unbind every frame, forget the transmit
    /// FIFO, clear the error status.
    Reset,
    /// Register the transmit FIFO: `slots` slots (see [`fifo`]) at `gpa`,
    /// 4096-aligned and wholly inside guest RAM; `gpa == 0` unregisters it.
    /// Stores already in an earlier FIFO are sent first.
    SetTxFifo { gpa: u64, slots: u32 },
    /// Register the arrival table (virtual time, docs/virtual-time.md): one
    /// u64 per `1 << granule_shift` bytes of Memory Channel address space
    /// ([`arrival_table_entries`]), 8-aligned and wholly inside guest RAM;
    /// the device writes there the virtual arrival of every stamped packet
    /// it delivers, before the packet's data. `gpa == 0` unregisters it.
    SetArrivalTable { gpa: u64, granule_shift: u32 },
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
            CtrlRequest::SetTxFifo { .. } => op::SET_TX_FIFO,
            CtrlRequest::SetArrivalTable { .. } => op::SET_ARRIVAL_TABLE,
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
                b.extend_from_slice(&crate::saturating_u32(frames.len() as u64).to_le_bytes());
                for f in frames {
                    b.extend_from_slice(&f.to_le_bytes());
                }
            }
            CtrlRequest::GetPct { page } => {
                b.extend_from_slice(&page.to_le_bytes());
                b.extend_from_slice(&0u32.to_le_bytes());
            }
            CtrlRequest::SetStatusPage { gpa } => b.extend_from_slice(&gpa.to_le_bytes()),
            CtrlRequest::SetTxFifo { gpa, slots } => {
                b.extend_from_slice(&gpa.to_le_bytes());
                b.extend_from_slice(&slots.to_le_bytes());
                b.extend_from_slice(&0u32.to_le_bytes());
            }
            CtrlRequest::SetArrivalTable { gpa, granule_shift } => {
                b.extend_from_slice(&gpa.to_le_bytes());
                b.extend_from_slice(&granule_shift.to_le_bytes());
                b.extend_from_slice(&0u32.to_le_bytes());
            }
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
            op::SET_TX_FIFO => {
                exact(16)?;
                if get_u32(body, 12) != Some(0) {
                    return Err(Status::Malformed);
                }
                Ok(CtrlRequest::SetTxFifo {
                    gpa: get_u64(body, 0).ok_or(Status::Malformed)?,
                    slots: get_u32(body, 8).ok_or(Status::Malformed)?,
                })
            }
            op::SET_ARRIVAL_TABLE => {
                exact(16)?;
                if get_u32(body, 12) != Some(0) {
                    return Err(Status::Malformed);
                }
                Ok(CtrlRequest::SetArrivalTable {
                    gpa: get_u64(body, 0).ok_or(Status::Malformed)?,
                    granule_shift: get_u32(body, 8).ok_or(Status::Malformed)?,
                })
            }
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
