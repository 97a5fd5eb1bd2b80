//! One sender's ring in a receiver's mailbox: where a message's header,
//! CRC and payload go, and how the receiver finds the next one
//! (mailbox.rs moves them over the adapter; this module decides the
//! offsets, so that it can be checked on a plain byte array).
//!
//! A message is a header word (sequence number << 32 | length), the
//! CRC-32 word, and the payload padded to 8 bytes. The sender writes the
//! CRC and payload, then clears the slot where the next header will go,
//! then writes the header (Memory Channel delivers one sender's stores in
//! order, so a header the receiver sees says everything before it came).
//! A message that would run past the ring's end is preceded by a `WRAP`
//! header and starts again at offset 0, whose slot is cleared first. The
//! receiver reads the header slot where the last message ended: a cleared
//! slot, or a header it has not seen, never the last lap's bytes, which a
//! payload word could otherwise make look like the header it waits for.

use crate::error::HlrcError;
use crate::Node;

/// Bytes of one sender's ring in a mailbox.
pub const RING: usize = 256 * 1024;
/// The largest message: under half a ring, so that one always fits once
/// the ring has drained, wherever it must start (its header, body and the
/// next header's cleared slot, after a jump over the ring's end).
pub const MAX_MESSAGE: usize = RING / 2 - 24;
/// A header's length field that says "the ring goes on at its start".
const WRAP: u32 = u32::MAX;

fn u64_of(n: usize) -> u64 {
    u64::try_from(n).expect("a byte count fits u64")
}

fn usize_of(n: u64) -> usize {
    usize::try_from(n).expect("a ring offset fits usize")
}

/// Stores into a ring (offsets from the ring's start).
pub trait RingTx {
    fn write(&self, off: usize, bytes: &[u8]) -> Result<(), HlrcError>;
    fn write_u64(&self, off: usize, v: u64) -> Result<(), HlrcError> {
        self.write(off, &v.to_le_bytes())
    }
}

/// Loads from a ring (offsets from the ring's start).
pub trait RingRx {
    fn load_u64(&self, off: usize) -> Result<u64, HlrcError>;
    fn read(&self, off: usize, buf: &mut [u8]) -> Result<(), HlrcError>;
}

/// The sender's end: how far it has written, and its last sequence number.
#[derive(Debug, Default)]
pub struct RingSender {
    pos: u64,
    seq: u32,
}

impl RingSender {
    /// Write `msg` if the ring has room, given that the receiver has read
    /// `consumed` bytes of the stream; `false` if it has not (yet).
    pub fn try_send(
        &mut self,
        tx: &impl RingTx,
        consumed: u64,
        msg: &[u8],
    ) -> Result<bool, HlrcError> {
        if msg.len() > MAX_MESSAGE {
            return Err(HlrcError::MessageTooLarge {
                len: msg.len(),
                max: MAX_MESSAGE,
            });
        }
        let body = 8 + msg.len().div_ceil(8) * 8;
        // The header, the body, and the next header's slot, cleared.
        let mut need = 8 + body + 8;
        let off = usize_of(self.pos % u64_of(RING));
        let wraps = off + 8 + body > RING;
        if wraps {
            need += RING - off;
        }
        if self.pos + u64_of(need) - consumed > u64_of(RING) {
            return Ok(false);
        }
        if wraps {
            // The ring's start holds the last lap's bytes: clear the slot
            // the receiver will look at there before saying so.
            tx.write_u64(0, 0)?;
            self.seq = self.seq.wrapping_add(1).max(1);
            tx.write_u64(off, u64::from(self.seq) << 32 | u64::from(WRAP))?;
            self.pos += u64_of(RING - off);
        }
        let off = usize_of(self.pos % u64_of(RING));
        self.seq = self.seq.wrapping_add(1).max(1);
        let mut framed = Vec::with_capacity(8 + msg.len());
        framed.extend_from_slice(&u64::from(crc32fast::hash(msg)).to_le_bytes());
        framed.extend_from_slice(msg);
        tx.write(off + 8, &framed)?;
        tx.write_u64((off + 8 + body) % RING, 0)?;
        let len = u32::try_from(msg.len()).expect("bounded by MAX_MESSAGE");
        tx.write_u64(off, u64::from(self.seq) << 32 | u64::from(len))?;
        self.pos += u64_of(8 + body);
        Ok(true)
    }
}

/// A message as the receiver read it, and where it lay in the ring (for
/// its virtual arrival).
pub struct Taken {
    pub bytes: Vec<u8>,
    pub off: usize,
    pub len: usize,
}

/// The receiver's end: how far it has read, and the last sequence number.
#[derive(Debug, Default)]
pub struct RingReceiver {
    pos: u64,
    seq: u32,
}

impl RingReceiver {
    /// Bytes of the stream read so far (what the sender's flow control
    /// waits on).
    pub fn consumed(&self) -> u64 {
        self.pos
    }

    /// The next message from `from`'s ring, if its header has come.
    pub fn try_take(&mut self, rx: &impl RingRx, from: Node) -> Result<Option<Taken>, HlrcError> {
        loop {
            let off = usize_of(self.pos % u64_of(RING));
            let head = rx.load_u64(off)?;
            let want = self.seq.wrapping_add(1).max(1);
            if head >> 32 != u64::from(want) {
                return Ok(None);
            }
            let len = u32::try_from(head & 0xffff_ffff).expect("masked to 32 bits");
            self.seq = want;
            if len == WRAP {
                self.pos += u64_of(RING - off);
                continue;
            }
            let len = usize::try_from(len).expect("a u32 fits usize");
            if len > MAX_MESSAGE || off + 16 + len > RING {
                return Err(HlrcError::BadFrame { from, len });
            }
            let crc = rx.load_u64(off + 8)?;
            let mut bytes = vec![0; len];
            rx.read(off + 16, &mut bytes)?;
            if crc != u64::from(crc32fast::hash(&bytes)) {
                return Err(HlrcError::Damaged { from, seq: want });
            }
            self.pos += u64_of(16 + len.div_ceil(8) * 8);
            return Ok(Some(Taken { bytes, off, len }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::VecDeque;

    /// A ring in plain memory. Stores land in order (one sender's stores
    /// do on Memory Channel).
    struct Memory(RefCell<Vec<u8>>);

    impl RingTx for Memory {
        fn write(&self, off: usize, bytes: &[u8]) -> Result<(), HlrcError> {
            self.0.borrow_mut()[off..off + bytes.len()].copy_from_slice(bytes);
            Ok(())
        }
    }

    impl RingRx for Memory {
        fn load_u64(&self, off: usize) -> Result<u64, HlrcError> {
            let m = self.0.borrow();
            Ok(u64::from_le_bytes(
                m[off..off + 8].try_into().expect("8 bytes"),
            ))
        }
        fn read(&self, off: usize, buf: &mut [u8]) -> Result<(), HlrcError> {
            buf.copy_from_slice(&self.0.borrow()[off..off + buf.len()]);
            Ok(())
        }
    }

    /// A payload as HLRC's wire format makes them: a tag byte, then small
    /// u32s (node numbers, counts), so that every u32 sits a byte off a
    /// word boundary.
    fn payload(n: usize, salt: u32) -> Vec<u8> {
        let mut v = vec![7u8];
        let mut k = salt;
        while v.len() < n {
            k = k.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            v.extend_from_slice(&(1 + (k >> 16) % 3).to_le_bytes());
        }
        v.truncate(n);
        v
    }

    /// The receiver takes exactly the messages sent, in order, whatever the
    /// ring held before, the sizes, and when it reads: many laps of
    /// messages whose payloads are full of words that read as headers.
    #[test]
    fn the_receiver_takes_exactly_what_was_sent_lap_after_lap() {
        for seed in 1u32..16 {
            let mem = Memory(RefCell::new(payload(RING, seed)));
            let (mut tx, mut rx) = (RingSender::default(), RingReceiver::default());
            let mut queue: VecDeque<Vec<u8>> = VecDeque::new();
            let mut sent: VecDeque<Vec<u8>> = VecDeque::new();
            let mut rng = seed.wrapping_mul(2_654_435_761) | 1;
            let mut next = |m: u32| {
                rng ^= rng << 13;
                rng ^= rng >> 17;
                rng ^= rng << 5;
                usize::try_from(rng % m).expect("small")
            };
            let mut taken = 0;
            for i in 0..3000u32 {
                if next(3) > 0 {
                    let len = match next(10) {
                        0 => 1 + next(40_000),
                        1 => MAX_MESSAGE - next(64),
                        _ => 1 + next(200),
                    };
                    queue.push_back(payload(len, i));
                }
                while let Some(m) = queue.front() {
                    if !tx.try_send(&mem, rx.consumed(), m).expect("fits") {
                        break;
                    }
                    sent.push_back(queue.pop_front().expect("front"));
                }
                for _ in 0..next(3) {
                    match rx.try_take(&mem, 0).expect("never a wrong header") {
                        Some(t) => {
                            assert_eq!(Some(t.bytes), sent.pop_front(), "seed {seed} step {i}");
                            taken += 1;
                        }
                        None => assert!(sent.is_empty(), "seed {seed}: a sent message unseen"),
                    }
                }
            }
            assert!(
                taken > 1000,
                "seed {seed}: only {taken} messages went round"
            );
        }
    }

    #[test]
    fn a_message_over_the_largest_is_refused_before_anything_is_written() {
        let mem = Memory(RefCell::new(vec![0; RING]));
        let mut tx = RingSender::default();
        assert!(matches!(
            tx.try_send(&mem, 0, &vec![0; MAX_MESSAGE + 1]),
            Err(HlrcError::MessageTooLarge { .. })
        ));
        assert!(mem.0.borrow().iter().all(|&b| b == 0));
        // The largest fits an empty ring wherever it starts.
        for start in [0, 8, RING / 2, RING - 8] {
            let mut tx = RingSender {
                pos: u64_of(start),
                seq: 0,
            };
            assert!(tx
                .try_send(&mem, u64_of(start), &vec![1; MAX_MESSAGE])
                .unwrap());
        }
    }
}
