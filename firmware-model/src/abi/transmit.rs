//! The transmit FIFO: how a driver posts stores (docs/device.md section 14,
//! "Transmit FIFO").
//!
//! Stores to a transmit region are posted writes on the real adapter: "All I/O
//! operations are fully pipelined" (seed 000 s.2.2), the processor goes on at
//! once and the write reaches the receivers later. Here a store is a record in
//! a ring of 32-byte slots in guest RAM that every thread of a node fills
//! without a lock (each claims slots with an atomic add, writes its record and
//! then its slot's tag), and that the hub drains in slot order: per-source FIFO
//! is the FIFO's order. The tag array is separate from the slots, so nothing a
//! program stores can look like a committed record.

use super::bytes::*;

/// Header of one transmit record, at the start of its first slot; `len` data
/// bytes follow in the same and the next slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxRecordHeader {
    /// Global address of the store.
    pub addr: u64,
    /// Data bytes.
    pub len: u32,
    /// 0 for a store, [`fifo::FLAG_VTIME`] for a store that carries its
    /// sender's virtual time, [`fifo::FLAG_PAD`] for padding to the end of
    /// the ring.
    pub flags: u32,
}

pub const TX_RECORD_HEADER_SIZE: usize = 16;
/// Bytes of the sender's virtual time (u64, ns) after the header of a
/// [`fifo::FLAG_VTIME`] record; its data follows at offset 24.
pub const TX_RECORD_VTIME_SIZE: usize = 8;

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

    /// Slots a record with `len` data bytes occupies.
    pub fn slots(len: u32) -> u64 {
        TxRecordHeader::slots_with(len, false)
    }

    /// Slots a record with `len` data bytes occupies, with the sender's
    /// virtual time after its header when `vtime` ([`fifo::FLAG_VTIME`]).
    pub fn slots_with(len: u32, vtime: bool) -> u64 {
        (TxRecordHeader::prefix_bytes(vtime) as u64 + u64::from(len))
            .div_ceil(fifo::SLOT_SIZE as u64)
    }

    /// Bytes before a record's data: the header, and the virtual time if
    /// the record carries one.
    pub fn prefix_bytes(vtime: bool) -> usize {
        if vtime {
            TX_RECORD_HEADER_SIZE + TX_RECORD_VTIME_SIZE
        } else {
            TX_RECORD_HEADER_SIZE
        }
    }

    /// The record carries its sender's virtual time.
    pub fn has_vtime(&self) -> bool {
        self.flags & fifo::FLAG_VTIME != 0
    }

    /// A padding record covering `slots` slots (at least one).
    pub fn pad(slots: u64) -> TxRecordHeader {
        TxRecordHeader {
            addr: 0,
            len: crate::saturating_u32(
                slots.max(1) * fifo::SLOT_SIZE as u64 - TX_RECORD_HEADER_SIZE as u64,
            ),
            flags: fifo::FLAG_PAD,
        }
    }
}

/// Layout of the transmit FIFO in guest RAM.
///
/// ```text
/// gpa + 0                 header (64 bytes, below)
/// gpa + 64                tags: one u32 per slot
/// gpa + slots_offset()    slots: `slots` x 32 bytes
/// ```
///
/// Positions count slots from 0 and never wrap (u64); position `p` is slot
/// `p % slots`. A record starting at position `p` is committed when the tag
/// of its first slot equals [`fifo::tag`]`(p)`; the driver writes the tag last
/// (release), the device reads it first (acquire). A record never wraps past
/// the last slot: the driver fills the end of the ring with a padding record.
pub mod fifo {
    /// Bytes of one slot.
    pub const SLOT_SIZE: usize = 32;
    /// Bytes of the header before the tag array.
    pub const HEADER_SIZE: usize = 64;
    /// Smallest and largest ring the device accepts (slots, powers of two).
    pub const MIN_SLOTS: u32 = 128;
    pub const MAX_SLOTS: u32 = 1 << 19;
    /// Flag of a padding record.
    pub const FLAG_PAD: u32 = 1;
    /// Flag of a store that carries its sender's virtual time (ABI version
    /// 3, docs/virtual-time.md): a u64 after the 16-byte header, the data
    /// at offset 24. Only drivers in a predicted-time run set it.
    pub const FLAG_VTIME: u32 = 2;
    /// Every flag a record may carry (any other bit is refused).
    pub const KNOWN_FLAGS: u32 = FLAG_PAD | FLAG_VTIME;

    /// Header offsets. The device writes CONSUMED, STATE, REFUSED and LAST_*;
    /// DOORBELL is written by both.
    pub mod header {
        /// u64: positions the device has taken (the driver may reuse every
        /// slot before it). Stores before it are handed to the hub.
        pub const CONSUMED: usize = 0x00;
        /// u32: 1 = the device is going to sleep and wants a kick on the
        /// transmit queue for the next record; the driver that takes it (swap
        /// to 0) kicks. 0 = the device is polling.
        pub const DOORBELL: usize = 0x08;
        /// u32: a [`super::State`] value.
        pub const STATE: usize = 0x0c;
        /// u64: records refused since the FIFO was registered.
        pub const REFUSED: usize = 0x10;
        /// u32 status and u32 detail of the last refused record (or of the
        /// record that broke the FIFO), and u64 its position.
        pub const LAST_STATUS: usize = 0x18;
        pub const LAST_DETAIL: usize = 0x1c;
        pub const LAST_POSITION: usize = 0x20;
    }

    /// What the device is doing with a FIFO.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[repr(u32)]
    pub enum State {
        /// Not registered (or reset).
        Idle = 0,
        /// Drained by the hub.
        Running = 1,
        /// A record could not be parsed (LAST_* says which and why): the
        /// device takes nothing more until the driver registers it again.
        Broken = 2,
    }

    impl State {
        pub fn from_u32(v: u32) -> Option<State> {
            match v {
                0 => Some(State::Idle),
                1 => Some(State::Running),
                2 => Some(State::Broken),
                _ => None,
            }
        }
    }

    /// Offset of the slot array.
    pub fn slots_offset(slots: u32) -> usize {
        (HEADER_SIZE + 4 * slots as usize).next_multiple_of(64)
    }

    /// Bytes of a FIFO with `slots` slots, header and tags included.
    pub fn bytes(slots: u32) -> usize {
        slots_offset(slots) + SLOT_SIZE * slots as usize
    }

    /// A ring size the device accepts.
    pub fn valid_slots(slots: u32) -> bool {
        slots.is_power_of_two() && (MIN_SLOTS..=MAX_SLOTS).contains(&slots)
    }

    /// Where each part of a FIFO lies, as byte offsets from its first byte:
    /// the address arithmetic the driver and the device share.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Layout {
        slots: u32,
    }

    impl Layout {
        /// The layout of a ring of `slots` slots, if the device accepts that size.
        pub fn new(slots: u32) -> Option<Layout> {
            valid_slots(slots).then_some(Layout { slots })
        }

        pub fn slots(self) -> u32 {
            self.slots
        }

        /// Bytes of the whole FIFO ([`bytes`]).
        pub fn bytes(self) -> usize {
            bytes(self.slots)
        }

        /// The slot that position `position` names.
        pub fn index(self, position: u64) -> u32 {
            crate::rem_u32(position, self.slots)
        }

        /// Offset of the tag of the slot at `position`.
        pub fn tag_offset(self, position: u64) -> usize {
            HEADER_SIZE + 4 * self.index(position) as usize
        }

        /// Offset of the slot at `position` (its record header).
        pub fn slot_offset(self, position: u64) -> usize {
            slots_offset(self.slots) + SLOT_SIZE * self.index(position) as usize
        }

        /// Offset of the data of a record starting at `position`.
        pub fn data_offset(self, position: u64) -> usize {
            self.slot_offset(position) + super::TX_RECORD_HEADER_SIZE
        }

        /// Offset of the virtual time of a [`FLAG_VTIME`] record starting
        /// at `position`.
        pub fn vtime_offset(self, position: u64) -> usize {
            self.slot_offset(position) + super::TX_RECORD_HEADER_SIZE
        }

        /// Offset of the data of a record starting at `position`, with or
        /// without a virtual time before it.
        pub fn data_offset_with(self, position: u64, vtime: bool) -> usize {
            self.slot_offset(position) + super::TxRecordHeader::prefix_bytes(vtime)
        }

        /// Slots from `position` to the end of the ring (a record never wraps).
        pub fn slots_to_end(self, position: u64) -> u64 {
            u64::from(self.slots - self.index(position))
        }

        /// The tag that commits a record starting at `position` ([`tag`]).
        pub fn tag(self, position: u64) -> u32 {
            tag(position, self.slots)
        }
    }

    /// The tag that commits a record starting at `position`: its lap plus
    /// one, so zeroed memory commits nothing and a tag left from an earlier
    /// lap does not match.
    pub fn tag(position: u64, slots: u32) -> u32 {
        // The lap's low 32 bits: a tag only has to differ from the last lap's.
        #[allow(clippy::cast_possible_truncation)]
        let lap = (position / u64::from(slots.max(1))) as u32;
        lap.wrapping_add(1)
    }
}
