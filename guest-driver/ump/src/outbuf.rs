//! Outbufs: a multicast message written once (seed 004, UMP: "lock-
//! controlled single-writer, multiple-reader buffers ... assigned to each
//! process ... written only by task 1 but mapped for transmission to all
//! other cluster members ... controlled by a unique cluster spinlock").
//!
//! Each node has one outbuf: a Memory Channel region that it alone
//! transmits into (a broadcast mapping, no loopback) and every other
//! node's UMP receives, attached when that node brings UMP up, so before
//! any channel to it can exist (a receiver must be attached before data is
//! written). `mcast` to a long enough list writes the message, framed and
//! checked as in a ring (wire's header and trailer, tied to this outbuf's
//! number), into the outbuf once, then a short reference message ([`Ref`]:
//! where, how long, its number and CRC) into each channel, so every
//! channel keeps its order. A reader takes the message out of its copy of
//! the outbuf, checks it against the reference, and only then consumes the
//! reference and sends its consumer index back at once. The writer reuses
//! an outbuf slot only when every channel's consumer index has passed its
//! reference: the channels' own indexes are the per-reader consumer
//! indexes, so nothing new flows back. The node's tasks share the outbuf
//! through one lock, held for a multicast: the seed's lock, local to the
//! one node that writes it.

use std::collections::VecDeque;
use std::sync::Weak;

use mc_api::{RxRegion, TxRegion};

use crate::channel::Chan;
use crate::error::{Damage, UmpError};
use crate::wire::{
    framed, low32, padded, ring_at, to_usize, Header, Trailer, HEADER, TRAILER, VERDICT_GOOD,
};

/// Region key of node n's outbuf: this plus n.
pub(crate) const KEY_OUTBUF: u32 = 0x554d_5200;
/// Bytes of every node's outbuf (the same on all nodes: every node attaches
/// every other node's).
pub(crate) const OUTBUF_BYTES: usize = 64 << 10;
/// Largest payload that goes through the outbuf (sixteen in flight before
/// the writer waits for readers). Larger messages stream per channel: to 3
/// nodes one copy was faster at 4 KiB in 13 runs of 17, at 8 and 16 KiB in
/// about half (docs/ump.md, costs): there the hub's delivery to each
/// reader, not the writer's stores, sets the time.
pub const OUTBUF_MAX_PAYLOAD: usize = 4096;
/// Smallest payload that goes through the outbuf. Bytes alone say less
/// (a reference costs 80 bytes framed against a copy's 48 plus the
/// payload), but each reader then loads twice and sends its consumer index
/// at once: to 3 nodes one copy was faster at 256 B in 6 runs of 13, at
/// 1 KiB in 13 of 17 (docs/ump.md, costs).
pub const OUTBUF_MIN_PAYLOAD: usize = 1024;
/// Shortest list worth an outbuf: with two channels, one copy plus two
/// references already costs fewer bytes on the writer's link than two
/// copies (1 KiB: 1232 bytes against 2144).
pub const OUTBUF_MIN_LIST: usize = 2;
/// Bytes of a reference's payload.
pub(crate) const REF_LEN: usize = 32;

/// A reference to a message in a node's outbuf: the payload of the short
/// message that goes down each channel of a multicast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ref {
    /// Stream position of the message's header in the outbuf.
    pub(crate) pos: u64,
    pub(crate) len: u64,
    /// The outbuf message's number.
    pub(crate) seq: u32,
    pub(crate) crc: u32,
    /// The outbuf's number (per bring-up of the writing node's UMP).
    pub(crate) uid: u32,
    /// The writing node.
    pub(crate) node: u8,
}

impl Ref {
    pub(crate) fn encode(&self) -> [u8; REF_LEN] {
        let mut b = [0u8; REF_LEN];
        b[0..8].copy_from_slice(&self.pos.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..20].copy_from_slice(&self.seq.to_le_bytes());
        b[20..24].copy_from_slice(&self.crc.to_le_bytes());
        b[24..28].copy_from_slice(&self.uid.to_le_bytes());
        b[28] = self.node;
        b
    }

    /// None: not a reference a writer makes (hostile or damaged bytes).
    pub(crate) fn decode(b: &[u8; REF_LEN]) -> Option<Ref> {
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or_default());
        let r = Ref {
            pos: u64_at(0),
            len: u64_at(8),
            seq: u32_at(16),
            crc: u32_at(20),
            uid: u32_at(24),
            node: b[28],
        };
        let at = ring_at(r.pos, OUTBUF_BYTES);
        let fits = r.len <= OUTBUF_MAX_PAYLOAD as u64
            && r.pos % 8 == 0
            && at + to_usize(framed(r.len)) <= OUTBUF_BYTES;
        (fits && b[29..].iter().all(|&x| x == 0)).then_some(r)
    }
}

/// A multicast message in the outbuf and who has yet to take it.
struct Slot {
    start: u64,
    end: u64,
    /// Each channel and the stream position its consumer index must pass.
    readers: Vec<(Weak<Chan>, u64)>,
}

impl Slot {
    /// Every reader took it, or can no longer: closed here (dropped), closed
    /// by the peer, or its writing end failed (its reader stops at the
    /// failure).
    fn consumed(&self) -> bool {
        self.readers.iter().all(|(c, pos)| {
            let Some(c) = c.upgrade() else {
                return true;
            };
            c.peer_closed()
                || c.link().is_none_or(|l| l.out_cons() >= *pos)
                || c.tx().failed.is_some()
        })
    }
}

/// The writing side of this node's outbuf (one per node, behind a lock).
pub(crate) struct OutbufWriter {
    tx: TxRegion,
    uid: u32,
    /// Stream position of the next message.
    head: u64,
    next_seq: u32,
    slots: VecDeque<Slot>,
}

impl OutbufWriter {
    pub(crate) fn new(tx: TxRegion, uid: u32) -> OutbufWriter {
        OutbufWriter {
            tx,
            uid,
            head: 0,
            next_seq: 0,
            slots: VecDeque::new(),
        }
    }

    /// Where a message of `len` bytes goes (whole, never wrapping), if
    /// the readers have freed room for it; slots they took are given back.
    pub(crate) fn room(&mut self, len: usize) -> Option<u64> {
        while self.slots.front().is_some_and(Slot::consumed) {
            self.slots.pop_front();
        }
        let size = OUTBUF_BYTES as u64;
        let bytes = framed(len as u64);
        let at = self.head % size;
        let pos = if at + bytes > size {
            self.head + (size - at)
        } else {
            self.head
        };
        let tail = self.slots.front().map_or(pos, |s| s.start);
        (pos + bytes - tail <= size).then_some(pos)
    }

    /// Write `data` at `pos` (from [`OutbufWriter::room`]) as one store,
    /// framed like a ring's message; `saved` is the error count before it.
    pub(crate) fn put(&mut self, pos: u64, data: &[u8], saved: u64) -> Result<Ref, UmpError> {
        let len = data.len() as u64;
        let seq = self.next_seq;
        let crc = crc32fast::hash(data);
        let mut buf = vec![0u8; to_usize(framed(len))];
        let h = Header {
            seq,
            len,
            short: false,
            reference: false,
        };
        buf[..HEADER].copy_from_slice(&h.encode(self.uid));
        buf[HEADER..HEADER + data.len()].copy_from_slice(data);
        let t = Trailer {
            seq,
            crc,
            verdict: VERDICT_GOOD,
            saved_count: low32(saved),
        };
        let n = buf.len();
        buf[n - TRAILER..].copy_from_slice(&t.encode(self.uid));
        self.tx.write(ring_at(pos, OUTBUF_BYTES), &buf)?;
        self.next_seq = seq.wrapping_add(1);
        self.head = pos + framed(len);
        Ok(Ref {
            pos,
            len,
            seq,
            crc,
            uid: self.uid,
            node: 0,
        })
    }

    /// The message at `r` is read by these channels once their consumer
    /// indexes pass these positions.
    pub(crate) fn hold(&mut self, r: &Ref, readers: Vec<(Weak<Chan>, u64)>) {
        self.slots.push_back(Slot {
            start: r.pos,
            end: r.pos + framed(r.len),
            readers,
        });
        debug_assert!(self.slots.iter().all(|s| s.end <= self.head));
    }
}

/// Copy the message `r` points to out of this node's copy of the writer's
/// outbuf into `buf` (at least `r.len` bytes) and check it. `count`: this
/// node's error count now, for receiver-only detection.
pub(crate) fn take(
    rx: &RxRegion,
    r: &Ref,
    buf: &mut [u8],
    count: Option<u64>,
) -> Result<(), Damage> {
    let at = ring_at(r.pos, OUTBUF_BYTES);
    let len = to_usize(r.len);
    let framing = Damage::Framing { at: r.pos };
    let mut h = [0u8; HEADER];
    rx.read(at, &mut h).map_err(|_| framing)?;
    let h = Header::decode(&h, r.uid).ok_or(framing)?;
    if h.seq != r.seq {
        return Err(Damage::Sequence {
            want: r.seq,
            got: h.seq,
        });
    }
    if h.len != r.len || h.short || h.reference {
        return Err(framing);
    }
    rx.read(at + HEADER, &mut buf[..len]).map_err(|_| framing)?;
    let mut t = [0u8; TRAILER];
    let t_at = at + HEADER + to_usize(padded(r.len));
    rx.read(t_at, &mut t).map_err(|_| framing)?;
    let t = Trailer::decode(&t, r.uid).ok_or(Damage::Framing {
        at: r.pos + (t_at - at) as u64,
    })?;
    if t.seq != r.seq {
        return Err(Damage::Sequence {
            want: r.seq,
            got: t.seq,
        });
    }
    if let Some(now) = count {
        if low32(now) != t.saved_count {
            return Err(Damage::CountMoved {
                saved: u64::from(t.saved_count),
                now,
            });
        }
    }
    if t.verdict != VERDICT_GOOD {
        return Err(Damage::WriterFailed);
    }
    let got = crc32fast::hash(&buf[..len]);
    if got != r.crc || t.crc != r.crc {
        return Err(Damage::Checksum { want: r.crc, got });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_round_trips_and_hostile_ones_are_refused() {
        let r = Ref {
            pos: 4096,
            len: 1000,
            seq: 3,
            crc: 0xdead_beef,
            uid: 77,
            node: 2,
        };
        assert_eq!(Ref::decode(&r.encode()), Some(r));
        for bad in [
            Ref { pos: 4095, ..r },
            Ref {
                len: OUTBUF_MAX_PAYLOAD as u64 + 1,
                ..r
            },
            // A message that would run past the outbuf's end.
            Ref {
                pos: OUTBUF_BYTES as u64 - 64,
                ..r
            },
        ] {
            assert_eq!(Ref::decode(&bad.encode()), None, "{bad:?}");
        }
        let mut junk = r.encode();
        junk[31] = 1;
        assert_eq!(Ref::decode(&junk), None);
    }

    proptest::proptest! {
        /// Any 32 bytes a channel delivers as a reference: either refused
        /// or pointing inside the outbuf, whole.
        #[test]
        fn any_reference_is_refused_or_inside_the_outbuf(
            b in proptest::array::uniform32(proptest::num::u8::ANY),
            pos in 0u64..1 << 40,
            len in 0u64..OUTBUF_MAX_PAYLOAD as u64 + 64,
        ) {
            for b in [b, Ref { pos: pos & !7, len, seq: 1, crc: 2, uid: 3, node: 1 }.encode()] {
                if let Some(r) = Ref::decode(&b) {
                    let at = ring_at(r.pos, OUTBUF_BYTES);
                    proptest::prop_assert!(at + to_usize(framed(r.len)) <= OUTBUF_BYTES);
                    proptest::prop_assert!(to_usize(r.len) <= OUTBUF_MAX_PAYLOAD);
                    proptest::prop_assert_eq!(r.encode(), b);
                }
            }
        }
    }
}
