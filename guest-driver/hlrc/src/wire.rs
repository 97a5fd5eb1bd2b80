//! HLRC's messages as bytes, for a transport that moves bytes (the DSM
//! core's mailbox on the emulated adapter). A diff travels as the bytes
//! the core's diff encoder made; this layer does not look inside it.
//!
//! Little-endian. A message is a tag byte, then its fields; vector times
//! are a count and that many `u32`s; an interval is its node (`u16`), its
//! number, a page count and the pages. Every count is checked against the
//! bytes that are there and against the cluster, so a damaged message is a
//! [`WireError`], never a panic or a huge allocation.

use crate::engine::{LockId, Message};
use crate::{Interval, IntervalId, Node, Page, VectorTime};

/// A message that cannot be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("message ends early: {what} needs {need} bytes at {at}, {len} in all")]
    Short {
        what: &'static str,
        need: usize,
        at: usize,
        len: usize,
    },
    #[error("unknown message tag {0}")]
    Tag(u8),
    #[error("{what} {value} is outside the cluster of {nodes} nodes")]
    Node {
        what: &'static str,
        value: u64,
        nodes: usize,
    },
    #[error("{0} bytes after the end of the message")]
    Trailing(usize),
}

const DIFF: u8 = 1;
const PAGE_REQUEST: u8 = 2;
const PAGE_REPLY: u8 = 3;
const HOME_CLAIM: u8 = 4;
const HOME_IS: u8 = 5;
const LOCK_REQUEST: u8 = 6;
const LOCK_FORWARD: u8 = 7;
const LOCK_GRANT: u8 = 8;
const BARRIER_ARRIVE: u8 = 9;
const BARRIER_RELEASE: u8 = 10;
const FLAG_SET: u8 = 11;

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    put_u32(out, u32::try_from(n).expect("a message part under 4 GiB"));
}

fn put_index(out: &mut Vec<u8>, i: usize) {
    put_u32(
        out,
        u32::try_from(i).expect("a page, lock or node number under 2^32"),
    );
}

fn put_time(out: &mut Vec<u8>, t: &VectorTime) {
    put_len(out, t.nodes());
    for &v in t.as_slice() {
        put_u32(out, v);
    }
}

fn put_intervals(out: &mut Vec<u8>, intervals: &[Interval]) {
    put_len(out, intervals.len());
    for i in intervals {
        put_index(out, i.id.node);
        put_u32(out, i.id.number);
        put_len(out, i.pages.len());
        for &p in &i.pages {
            put_index(out, p);
        }
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_len(out, b.len());
    out.extend_from_slice(b);
}

/// `m` as bytes.
pub fn encode(m: &Message<Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    match m {
        Message::Diff {
            page,
            interval,
            diff,
        } => {
            out.push(DIFF);
            put_index(&mut out, *page);
            put_index(&mut out, interval.node);
            put_u32(&mut out, interval.number);
            put_bytes(&mut out, diff);
        }
        Message::PageRequest { page, needs } => {
            out.push(PAGE_REQUEST);
            put_index(&mut out, *page);
            put_time(&mut out, &VectorTime::from_slice(needs));
        }
        Message::PageReply { page, data } => {
            out.push(PAGE_REPLY);
            put_index(&mut out, *page);
            put_bytes(&mut out, data);
        }
        Message::HomeClaim { page } => {
            out.push(HOME_CLAIM);
            put_index(&mut out, *page);
        }
        Message::HomeIs { page, home } => {
            out.push(HOME_IS);
            put_index(&mut out, *page);
            put_index(&mut out, *home);
        }
        Message::LockRequest { lock, time } => {
            out.push(LOCK_REQUEST);
            put_index(&mut out, *lock);
            put_time(&mut out, time);
        }
        Message::LockForward {
            lock,
            requester,
            time,
        } => {
            out.push(LOCK_FORWARD);
            put_index(&mut out, *lock);
            put_index(&mut out, *requester);
            put_time(&mut out, time);
        }
        Message::LockGrant {
            lock,
            time,
            intervals,
        } => {
            out.push(LOCK_GRANT);
            put_index(&mut out, *lock);
            put_time(&mut out, time);
            put_intervals(&mut out, intervals);
        }
        Message::BarrierArrive { time, intervals } => {
            out.push(BARRIER_ARRIVE);
            put_time(&mut out, time);
            put_intervals(&mut out, intervals);
        }
        Message::BarrierRelease { time, intervals } => {
            out.push(BARRIER_RELEASE);
            put_time(&mut out, time);
            put_intervals(&mut out, intervals);
        }
        Message::FlagSet {
            flag,
            value,
            time,
            intervals,
        } => {
            out.push(FLAG_SET);
            put_index(&mut out, *flag);
            out.extend_from_slice(&value.to_le_bytes());
            put_time(&mut out, time);
            put_intervals(&mut out, intervals);
        }
    }
    out
}

/// Reads a message's fields in order, checking each against what is left.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    nodes: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(WireError::Short {
                what,
                need: n,
                at: self.at,
                len: self.b.len(),
            });
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.take(1, what)?[0])
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let s = self.take(4, what)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        let s = self.take(8, what)?;
        let mut b = [0u8; 8];
        b.copy_from_slice(s);
        Ok(u64::from_le_bytes(b))
    }

    fn index(&mut self, what: &'static str) -> Result<usize, WireError> {
        let v = self.u32(what)?;
        Ok(usize::try_from(v).unwrap_or(usize::MAX))
    }

    fn node(&mut self, what: &'static str) -> Result<Node, WireError> {
        let v = self.u32(what)?;
        let n = usize::try_from(v).unwrap_or(usize::MAX);
        if n >= self.nodes {
            return Err(WireError::Node {
                what,
                value: u64::from(v),
                nodes: self.nodes,
            });
        }
        Ok(n)
    }

    /// A count of items of at least `each` bytes: no more than the bytes
    /// left could hold.
    fn count(&mut self, each: usize, what: &'static str) -> Result<usize, WireError> {
        let n = self.index(what)?;
        let need = n.saturating_mul(each);
        if need > self.b.len() - self.at {
            return Err(WireError::Short {
                what,
                need,
                at: self.at,
                len: self.b.len(),
            });
        }
        Ok(n)
    }

    fn time(&mut self) -> Result<VectorTime, WireError> {
        let n = self.count(4, "a vector time")?;
        if n != self.nodes {
            return Err(WireError::Node {
                what: "a vector time's length",
                value: u64::try_from(n).unwrap_or(u64::MAX),
                nodes: self.nodes,
            });
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.u32("a vector time")?);
        }
        Ok(VectorTime::from_slice(&v))
    }

    fn intervals(&mut self) -> Result<Vec<Interval>, WireError> {
        let n = self.count(12, "intervals")?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let node = self.node("an interval's node")?;
            let number = self.u32("an interval's number")?;
            let pages = self.count(4, "an interval's pages")?;
            let mut p: Vec<Page> = Vec::with_capacity(pages);
            for _ in 0..pages {
                p.push(self.index("a page")?);
            }
            out.push(Interval::new(IntervalId { node, number }, p));
        }
        Ok(out)
    }

    fn bytes(&mut self, what: &'static str) -> Result<Vec<u8>, WireError> {
        let n = self.count(1, what)?;
        Ok(self.take(n, what)?.to_vec())
    }

    fn lock(&mut self) -> Result<LockId, WireError> {
        self.index("a lock")
    }
}

/// The message in `b`, from a cluster of `nodes`.
pub fn decode(b: &[u8], nodes: usize) -> Result<Message<Vec<u8>>, WireError> {
    let mut r = Reader { b, at: 0, nodes };
    let m = match r.u8("the tag")? {
        DIFF => Message::Diff {
            page: r.index("a page")?,
            interval: IntervalId {
                node: r.node("a diff's writer")?,
                number: r.u32("an interval's number")?,
            },
            diff: r.bytes("a diff")?,
        },
        PAGE_REQUEST => Message::PageRequest {
            page: r.index("a page")?,
            needs: r.time()?.as_slice().to_vec(),
        },
        PAGE_REPLY => Message::PageReply {
            page: r.index("a page")?,
            data: r.bytes("a page's data")?,
        },
        HOME_CLAIM => Message::HomeClaim {
            page: r.index("a page")?,
        },
        HOME_IS => Message::HomeIs {
            page: r.index("a page")?,
            home: r.node("a home")?,
        },
        LOCK_REQUEST => Message::LockRequest {
            lock: r.lock()?,
            time: r.time()?,
        },
        LOCK_FORWARD => Message::LockForward {
            lock: r.lock()?,
            requester: r.node("a requester")?,
            time: r.time()?,
        },
        LOCK_GRANT => Message::LockGrant {
            lock: r.lock()?,
            time: r.time()?,
            intervals: r.intervals()?,
        },
        BARRIER_ARRIVE => Message::BarrierArrive {
            time: r.time()?,
            intervals: r.intervals()?,
        },
        BARRIER_RELEASE => Message::BarrierRelease {
            time: r.time()?,
            intervals: r.intervals()?,
        },
        FLAG_SET => Message::FlagSet {
            flag: r.index("a flag")?,
            value: r.u64("a flag's value")?,
            time: r.time()?,
            intervals: r.intervals()?,
        },
        t => return Err(WireError::Tag(t)),
    };
    let left = b.len() - r.at;
    if left != 0 {
        return Err(WireError::Trailing(left));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn samples() -> Vec<Message<Vec<u8>>> {
        let t = VectorTime::from_slice(&[3, 0, 9]);
        let iv = vec![
            Interval::new(IntervalId { node: 2, number: 9 }, vec![7, 1, 7]),
            Interval::new(IntervalId { node: 0, number: 3 }, vec![]),
        ];
        vec![
            Message::Diff {
                page: 5,
                interval: IntervalId { node: 1, number: 4 },
                diff: vec![1, 2, 3],
            },
            Message::PageRequest {
                page: 0,
                needs: vec![0, 1, 2],
            },
            Message::PageReply {
                page: 8,
                data: vec![0xaa; 64],
            },
            Message::HomeClaim { page: 12 },
            Message::HomeIs { page: 12, home: 2 },
            Message::LockRequest {
                lock: 4,
                time: t.clone(),
            },
            Message::LockForward {
                lock: 4,
                requester: 1,
                time: t.clone(),
            },
            Message::LockGrant {
                lock: 4,
                time: t.clone(),
                intervals: iv.clone(),
            },
            Message::BarrierArrive {
                time: t.clone(),
                intervals: iv.clone(),
            },
            Message::BarrierRelease {
                time: t,
                intervals: iv,
            },
        ]
    }

    #[test]
    fn every_message_comes_back_as_it_went() {
        for m in samples() {
            let b = encode(&m);
            let back = decode(&b, 3).unwrap();
            assert_eq!(format!("{back:?}"), format!("{m:?}"));
            // Every strict prefix is refused, not misread.
            for cut in 0..b.len() {
                assert!(decode(&b[..cut], 3).is_err(), "{m:?} cut at {cut}");
            }
            let mut long = b.clone();
            long.push(0);
            assert_eq!(decode(&long, 3).unwrap_err(), WireError::Trailing(1));
        }
    }

    #[test]
    fn nodes_outside_the_cluster_are_refused() {
        let b = encode(&Message::<Vec<u8>>::HomeIs { page: 1, home: 5 });
        assert!(matches!(decode(&b, 3), Err(WireError::Node { .. })));
        let b = encode(&Message::<Vec<u8>>::LockRequest {
            lock: 0,
            time: VectorTime::new(4),
        });
        assert!(matches!(decode(&b, 3), Err(WireError::Node { .. })));
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_fail_without_panicking(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&b, 4);
        }

        #[test]
        fn a_huge_count_is_refused_without_allocating(tag in 1u8..12, n in 0x1000_0000u32..u32::MAX) {
            let mut b = vec![tag];
            for _ in 0..4 {
                b.extend_from_slice(&n.to_le_bytes());
            }
            prop_assert!(decode(&b, 4).is_err());
        }
    }
}
