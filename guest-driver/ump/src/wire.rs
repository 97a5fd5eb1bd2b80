//! How a message is laid out in a channel's byte stream (seed 004, UMP:
//! "the message is streamed through the buffer in a series of fragments").
//!
//! A message is a 24-byte header, the payload padded to 8 bytes, and a
//! 24-byte trailer whose last word is the error count the writer saved
//! before it wrote the first byte ("If the transmitter writes the saved
//! error count at the end of the message, the message receiver can
//! determine if any intervening errors have occurred", seed 004, Error
//! Management). Every word is 8-byte aligned, so each is one packet, and a
//! lost packet leaves the word that was there before: so each word of the
//! header and trailer carries the message's number or a check of the
//! others, and a stale word cannot pass for a fresh one. The trailer also
//! carries a CRC-32 of the payload: Memory Channel counts a corrupted
//! packet but not a dropped one (docs/device.md, faults), so the reader
//! checks that what it read is the message that was written.

/// Bytes of the header: magic and sequence number, payload length, check.
pub const HEADER: usize = 24;
/// Bytes of the trailer: sequence number and CRC-32, verdict and the
/// number again (under a magic), saved count.
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
    /// The third word: ties the length to the number, so a stale length
    /// (its packet lost) does not pass.
    fn check(seq: u32, len: u64) -> u64 {
        len ^ u64::from(seq).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x554d_5068_6561_6421
    }

    pub fn encode(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[0..4].copy_from_slice(&MAGIC_HEAD.to_le_bytes());
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&Self::check(self.seq, self.len).to_le_bytes());
        b
    }

    /// None: not a header (stale or damaged bytes).
    pub fn decode(b: &[u8; HEADER]) -> Option<Header> {
        let word = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
        let magic = word(0) as u32;
        let seq = (word(0) >> 32) as u32;
        let len = word(8);
        (magic == MAGIC_HEAD && word(16) == Self::check(seq, len)).then_some(Header { seq, len })
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
        b[12..16].copy_from_slice(&(MAGIC_TAIL ^ self.seq).to_le_bytes());
        b[16..24].copy_from_slice(&self.saved_count.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; TRAILER]) -> Option<Trailer> {
        let word = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        (word(12) == MAGIC_TAIL ^ word(0)).then(|| Trailer {
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
        let h = Header {
            seq: 7,
            len: 1 << 33,
        };
        assert_eq!(Header::decode(&h.encode()), Some(h));
        assert_eq!(Header::decode(&[0; HEADER]), None);
        // A lost length packet leaves an older length behind.
        let mut stale = h.encode();
        stale[8..16].copy_from_slice(&1500u64.to_le_bytes());
        assert_eq!(Header::decode(&stale), None);
        let t = Trailer {
            seq: 9,
            crc: 0xdead_beef,
            verdict: VERDICT_GOOD,
            saved_count: 3,
        };
        assert_eq!(Trailer::decode(&t.encode()), Some(t));
        assert_eq!(Trailer::decode(&[0; TRAILER]), None);
        // The verdict word of an older message at the same place.
        let mut stale = t.encode();
        stale[8..16].copy_from_slice(&Trailer { seq: 1, ..t }.encode()[8..16]);
        assert_eq!(Trailer::decode(&stale), None);
        assert_eq!(framed(0), 48);
        assert_eq!(framed(1), 56);
        assert_eq!(framed(8), 56);
    }
}
