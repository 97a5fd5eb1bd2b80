//! How a message is laid out in a channel's byte stream (seed 004, UMP:
//! "the message is streamed through the buffer in a series of fragments").
//!
//! A message is a 16-byte header, the payload padded to 8 bytes, and a
//! 24-byte trailer whose last word is the error count the writer saved
//! before it wrote the first byte ("If the transmitter writes the saved
//! error count at the end of the message, the message receiver can
//! determine if any intervening errors have occurred", seed 004, Error
//! Management). Every field is 8-byte aligned, so every store of a field is
//! one packet. The header and trailer carry the message's sequence number
//! and the trailer a CRC-32 of the payload: Memory Channel counts a
//! corrupted packet but not a dropped one (docs/device.md, faults), so the
//! reader also checks that what it read is the message that was written.

/// Bytes of the header: magic, sequence number, payload length.
pub const HEADER: usize = 16;
/// Bytes of the trailer: sequence number, CRC-32, verdict, magic, saved count.
pub const TRAILER: usize = 24;
/// Fixed cost of a message in the stream.
pub const OVERHEAD: usize = HEADER + TRAILER;

const MAGIC_HEAD: u32 = u32::from_le_bytes(*b"UMPh");
const MAGIC_TAIL: u32 = u32::from_le_bytes(*b"UMPt");

/// What the writer says about its own message in the trailer.
pub const VERDICT_GOOD: u32 = 1;
/// The writer's own `check_errors` saw the count move while it wrote.
pub const VERDICT_BAD: u32 = 2;

/// Payload bytes padded to the stream's 8-byte grain.
pub fn padded(len: u64) -> u64 {
    len.div_ceil(8) * 8
}

/// Bytes a message of `len` payload bytes takes in the stream.
#[cfg(test)]
pub fn framed(len: u64) -> u64 {
    OVERHEAD as u64 + padded(len)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub seq: u32,
    pub len: u64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[0..4].copy_from_slice(&MAGIC_HEAD.to_le_bytes());
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// None: not a header (stale or damaged bytes).
    pub fn decode(b: &[u8; HEADER]) -> Option<Header> {
        let magic = u32::from_le_bytes(b[0..4].try_into().ok()?);
        (magic == MAGIC_HEAD).then(|| Header {
            seq: u32::from_le_bytes(b[4..8].try_into().unwrap_or_default()),
            len: u64::from_le_bytes(b[8..16].try_into().unwrap_or_default()),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    pub seq: u32,
    pub crc: u32,
    pub verdict: u32,
    /// The writer's error count, saved before the message's first store;
    /// last, so it is the message's last packet.
    pub saved_count: u64,
}

impl Trailer {
    pub fn encode(&self) -> [u8; TRAILER] {
        let mut b = [0u8; TRAILER];
        b[0..4].copy_from_slice(&self.seq.to_le_bytes());
        b[4..8].copy_from_slice(&self.crc.to_le_bytes());
        b[8..12].copy_from_slice(&self.verdict.to_le_bytes());
        b[12..16].copy_from_slice(&MAGIC_TAIL.to_le_bytes());
        b[16..24].copy_from_slice(&self.saved_count.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; TRAILER]) -> Option<Trailer> {
        let word = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        (word(12) == MAGIC_TAIL).then(|| Trailer {
            seq: word(0),
            crc: word(4),
            verdict: word(8),
            saved_count: u64::from_le_bytes(b[16..24].try_into().unwrap_or_default()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_trailer_round_trip_and_reject_stale_bytes() {
        let h = Header { seq: 7, len: 1 << 33 };
        assert_eq!(Header::decode(&h.encode()), Some(h));
        assert_eq!(Header::decode(&[0; HEADER]), None);
        let t = Trailer {
            seq: 9,
            crc: 0xdead_beef,
            verdict: VERDICT_GOOD,
            saved_count: 3,
        };
        assert_eq!(Trailer::decode(&t.encode()), Some(t));
        assert_eq!(Trailer::decode(&[0; TRAILER]), None);
        assert_eq!(framed(0), 40);
        assert_eq!(framed(1), 48);
        assert_eq!(framed(8), 48);
    }
}
