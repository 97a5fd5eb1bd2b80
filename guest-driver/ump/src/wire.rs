//! How a message is laid out in a channel's byte stream (seed 004, UMP:
//! "the message is streamed through the buffer in a series of fragments").
//!
//! A message is a 24-byte header, the payload padded to 8 bytes, and a
//! 24-byte trailer whose last word holds the error count the writer saved
//! before it wrote the first byte (its low 32 bits) and a tag of the
//! message's number, which tells a reader polling a short message's slot
//! that the whole message has landed ("If the transmitter writes the saved
//! error count at the end of the message, the message receiver can
//! determine if any intervening errors have occurred", seed 004, Error
//! Management). Every word is 8-byte aligned, so each is one packet, and a
//! lost packet leaves the word that was there before: so each word of the
//! header and trailer carries the message's number or a check of the
//! others, and a stale word cannot pass for a fresh one; the checks also
//! take the channel's number, so a ring that another channel used before
//! shows none of its messages as this one's. The trailer also
//! carries a CRC-32 of the payload: Memory Channel counts a corrupted
//! packet but not a dropped one (docs/device.md, faults), so the reader
//! checks that what it read is the message that was written.

/// Bytes of the header: magic and sequence number, payload length, check.
pub const HEADER: usize = 24;
/// Bytes of the trailer: sequence number and CRC-32, verdict and the
/// number again (under a magic), saved count and the landing tag.
pub const TRAILER: usize = 24;
/// Fixed cost of a message in the stream.
pub const OVERHEAD: usize = HEADER + TRAILER;

/// A message streamed in fragments, each followed by the producer index.
const MAGIC_HEAD: u32 = u32::from_le_bytes(*b"UMPh");
/// A short message, written as one store: its reader polls the slot itself
/// (the header, then the trailer's last word) instead of a producer index.
const MAGIC_SHORT: u32 = u32::from_le_bytes(*b"UMPs");
/// A short message whose payload is a reference into the writer's outbuf
/// (`outbuf`): the message itself is there, written once for a multicast.
const MAGIC_REF: u32 = u32::from_le_bytes(*b"UMPr");
const MAGIC_TAIL: u32 = u32::from_le_bytes(*b"UMPt");
const MAGIC_END: u32 = u32::from_le_bytes(*b"UMPe");

/// What the writer says about its own message in the trailer.
pub const VERDICT_GOOD: u32 = 1;
/// The writer's own `check_errors` saw the count move while it wrote.
pub const VERDICT_BAD: u32 = 2;

/// Payload bytes padded to the stream's 8-byte grain.
/// The low 32 bits of `v` (counts and numbers are compared in their low
/// halves where a word holds two of them).
#[allow(
    clippy::cast_possible_truncation,
    reason = "the low 32 bits, deliberately"
)]
pub(crate) fn low32(v: u64) -> u32 {
    v as u32
}

pub(crate) use firmware_model::to_usize;

/// Where stream position `pos` falls in a ring of `size` bytes.
pub(crate) fn ring_at(pos: u64, size: usize) -> usize {
    to_usize(pos % size as u64)
}

pub fn padded(len: u64) -> u64 {
    len.div_ceil(8) * 8
}

/// Bytes a message of `len` payload bytes takes in the stream.
pub fn framed(len: u64) -> u64 {
    OVERHEAD as u64 + padded(len)
}

/// The channel's number spread over 32 bits: every header and trailer is
/// tied to its channel, so a ring reused by a new channel (whose numbers
/// start again at 0) never shows the old channel's message as a new one.
fn mix(uid: u32) -> u32 {
    uid.wrapping_mul(0x9e37_79b9)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub seq: u32,
    pub len: u64,
    /// Written as one store without a producer index (see [`MAGIC_SHORT`]).
    pub short: bool,
    /// The payload is an outbuf reference (see [`MAGIC_REF`]); always short.
    pub reference: bool,
}

impl Header {
    /// The third word: ties the length to the number and the channel, so a
    /// stale length (its packet lost) or another channel's header does not
    /// pass.
    fn check(seq: u32, len: u64, uid: u32, short: bool, reference: bool) -> u64 {
        len ^ u64::from(seq).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ (u64::from(mix(uid)) << 32 | u64::from(short) | u64::from(reference) << 1)
            ^ 0x554d_5068_6561_6421
    }

    pub fn encode(&self, uid: u32) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        let magic = match (self.reference, self.short) {
            (true, _) => MAGIC_REF,
            (false, true) => MAGIC_SHORT,
            (false, false) => MAGIC_HEAD,
        };
        b[0..4].copy_from_slice(&magic.to_le_bytes());
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        let check = Self::check(self.seq, self.len, uid, self.short, self.reference);
        b[16..24].copy_from_slice(&check.to_le_bytes());
        b
    }

    /// None: not a header of channel `uid` (stale, torn or damaged bytes).
    pub fn decode(b: &[u8; HEADER], uid: u32) -> Option<Header> {
        let word = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
        let magic = low32(word(0));
        let seq = low32(word(0) >> 32);
        let len = word(8);
        let (short, reference) = match magic {
            MAGIC_HEAD => (false, false),
            MAGIC_SHORT => (true, false),
            MAGIC_REF => (true, true),
            _ => return None,
        };
        (word(16) == Self::check(seq, len, uid, short, reference)).then_some(Header {
            seq,
            len,
            short,
            reference,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    pub seq: u32,
    pub crc: u32,
    pub verdict: u32,
    /// The writer's error count (its low 32 bits), saved before the
    /// message's first store; in the last word, so it is the message's
    /// last packet.
    pub saved_count: u32,
}

impl Trailer {
    /// The last word's tag: seeing it for the expected message means the
    /// whole message has landed (a sender's stores arrive in order), or
    /// that what is missing was lost on the way, which the checks catch.
    fn end_tag(seq: u32, uid: u32) -> u32 {
        MAGIC_END ^ seq.rotate_left(16) ^ mix(uid)
    }

    pub fn encode(&self, uid: u32) -> [u8; TRAILER] {
        let mut b = [0u8; TRAILER];
        b[0..4].copy_from_slice(&self.seq.to_le_bytes());
        b[4..8].copy_from_slice(&self.crc.to_le_bytes());
        b[8..12].copy_from_slice(&self.verdict.to_le_bytes());
        b[12..16].copy_from_slice(&(MAGIC_TAIL ^ self.seq ^ mix(uid)).to_le_bytes());
        b[16..20].copy_from_slice(&self.saved_count.to_le_bytes());
        b[20..24].copy_from_slice(&Self::end_tag(self.seq, uid).to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; TRAILER], uid: u32) -> Option<Trailer> {
        let word = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let seq = word(0);
        (word(12) == MAGIC_TAIL ^ seq ^ mix(uid) && word(20) == Self::end_tag(seq, uid)).then(
            || Trailer {
                seq,
                crc: word(4),
                verdict: word(8),
                saved_count: word(16),
            },
        )
    }

    /// Whether `last`, the message's last 8-byte word as loaded, is the
    /// trailer's last word of message `seq` of channel `uid`.
    pub fn landed(last: u64, seq: u32, uid: u32) -> bool {
        (last >> 32) as u32 == Self::end_tag(seq, uid)
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
            short: false,
            reference: false,
        };
        assert_eq!(Header::decode(&h.encode(3), 3), Some(h));
        assert_eq!(Header::decode(&[0; HEADER], 3), None);
        // Another channel's header (a ring reused): not this channel's.
        assert_eq!(Header::decode(&h.encode(4), 3), None);
        let s = Header { short: true, ..h };
        assert_eq!(Header::decode(&s.encode(3), 3), Some(s));
        let r = Header {
            reference: true,
            ..s
        };
        assert_eq!(Header::decode(&r.encode(3), 3), Some(r));
        // A reference is not a plain short message with the same words.
        let mut forged = r.encode(3);
        forged[0..4].copy_from_slice(&MAGIC_SHORT.to_le_bytes());
        assert_eq!(Header::decode(&forged, 3), None);
        // A lost length packet leaves an older length behind.
        let mut stale = h.encode(3);
        stale[8..16].copy_from_slice(&1500u64.to_le_bytes());
        assert_eq!(Header::decode(&stale, 3), None);
        let t = Trailer {
            seq: 9,
            crc: 0xdead_beef,
            verdict: VERDICT_GOOD,
            saved_count: 3,
        };
        assert_eq!(Trailer::decode(&t.encode(3), 3), Some(t));
        assert_eq!(Trailer::decode(&[0; TRAILER], 3), None);
        assert_eq!(Trailer::decode(&t.encode(4), 3), None);
        // The verdict word of an older message at the same place.
        let mut stale = t.encode(3);
        stale[8..16].copy_from_slice(&Trailer { seq: 1, ..t }.encode(3)[8..16]);
        assert_eq!(Trailer::decode(&stale, 3), None);
        // The last word says whether the message has landed.
        let last = |b: [u8; TRAILER]| u64::from_le_bytes(b[16..24].try_into().unwrap());
        assert!(Trailer::landed(last(t.encode(3)), 9, 3));
        assert!(!Trailer::landed(last(t.encode(3)), 10, 3));
        assert!(!Trailer::landed(last(t.encode(4)), 9, 3));
        assert!(!Trailer::landed(0, 0, 0));
        assert_eq!(framed(0), 48);
        assert_eq!(framed(1), 56);
        assert_eq!(framed(8), 56);
    }
}
