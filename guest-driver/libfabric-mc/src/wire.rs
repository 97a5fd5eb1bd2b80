//! What one libfabric message looks like on a UMP channel: a 32-byte
//! header (its kind, length, tag and remote CQ data), followed in the same
//! UMP message by the payload when it is small, or by a second UMP message
//! holding exactly the payload when it is not. The large payload then goes
//! from the sender's buffer straight into the receiver's ring (UMP's one
//! copy in), and from there into the posted buffer (one copy out).

/// Bytes of the header.
pub const HEADER: usize = 32;
/// Payloads up to this size travel inside the header's UMP message (and
/// are what `fi_inject` takes).
pub const INLINE: usize = 1024;

const MAGIC: u32 = 0x4d43_4649; // "MCFI"

/// A tagged message (untagged otherwise: FI_MSG).
pub const F_TAGGED: u32 = 1;
/// The header carries remote CQ data.
pub const F_DATA: u32 = 2;
/// The payload follows as its own UMP message.
pub const F_SEPARATE: u32 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub flags: u32,
    pub len: u64,
    pub tag: u64,
    pub data: u64,
}

impl Header {
    pub fn tagged(&self) -> bool {
        self.flags & F_TAGGED != 0
    }

    pub fn separate(&self) -> bool {
        self.flags & F_SEPARATE != 0
    }

    pub fn encode(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.tag.to_le_bytes());
        b[24..32].copy_from_slice(&self.data.to_le_bytes());
        b
    }

    /// The header at the start of `b`, if it is one; `msg_len` is the
    /// length of the UMP message it came in (checked against the header).
    pub fn decode(b: &[u8], msg_len: usize) -> Option<Header> {
        if b.len() < HEADER {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if u32_at(0) != MAGIC {
            return None;
        }
        let h = Header {
            flags: u32_at(4),
            len: u64_at(8),
            tag: u64_at(16),
            data: u64_at(24),
        };
        let inline_ok = !h.separate()
            && h.len <= INLINE as u64
            && msg_len == HEADER + firmware_model::to_usize(h.len);
        let separate_ok = h.separate() && msg_len == HEADER;
        (inline_ok || separate_ok).then_some(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_lengths_are_checked() {
        let h = Header {
            flags: F_TAGGED | F_DATA,
            len: 8,
            tag: 0xdead_beef_0000_0001,
            data: 7,
        };
        assert_eq!(Header::decode(&h.encode(), HEADER + 8), Some(h));
        assert_eq!(Header::decode(&h.encode(), HEADER + 9), None);
        let big = Header {
            flags: F_SEPARATE,
            len: 1 << 20,
            tag: 0,
            data: 0,
        };
        assert_eq!(Header::decode(&big.encode(), HEADER), Some(big));
        assert_eq!(Header::decode(&[0u8; HEADER], HEADER), None);
    }
}
