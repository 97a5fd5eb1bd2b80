//! HLRC's messages over the emulated adapter: a mailbox region per node,
//! one ring in it per sender.
//!
//! Seed 001 s.4.3 sends requests as VIA messages and replies, pages and
//! barrier messages by RDMA write into the receiver's registered memory.
//! Here every message is a remote write into the receiver's mailbox: the
//! sender stores the payload and its CRC-32, then its header (Memory
//! Channel delivers one sender's stores in order, so a header that has
//! arrived says the payload was sent before it; the CRC says all of it
//! arrived: a dropped packet of the payload is an error naming the
//! message, never a message read wrong); the receiver's communication thread reads it from
//! its own memory and stores its consumed position back into the sender's
//! mailbox (flow control). Pages travel with one copy at each end, as seed
//! 001's "copy" version does.
//!
//! Node `n`'s mailbox (key `KEY_MAILBOX + n`) holds, in order: one ring of
//! [`RING`] bytes per sender, then one word per receiver (how far that
//! receiver has consumed what this node sent it), then the abort word.
//! Only node `n` receives it; every other node transmits to it point to
//! point.

use std::collections::VecDeque;
use std::sync::Mutex;

use mc_api::{MemoryChannel, NodeId, RxRegion, Sharing, TxRegion};

use crate::error::HlrcError;
pub use crate::received::Received;
use crate::Node;

/// Bytes of one sender's ring in a mailbox.
pub const RING: usize = 256 * 1024;
/// The largest message: under half a ring, so that one always fits once
/// the ring has drained, wherever it must start (its header, body and the
/// next header's cleared slot, after a jump over the ring's end).
pub const MAX_MESSAGE: usize = RING / 2 - 24;

const KEY_MAILBOX: u32 = 0x484c_0000;
/// A header's length field that says "the ring goes on at its start".
const WRAP: u32 = u32::MAX;

fn u64_of(n: usize) -> u64 {
    u64::try_from(n).expect("a byte count fits u64")
}

fn usize_of(n: u64) -> usize {
    usize::try_from(n).expect("a ring offset fits usize")
}

/// Where things are in a mailbox.
#[derive(Clone, Copy, Debug)]
struct Layout {
    nodes: usize,
}

impl Layout {
    fn ring(self, sender: Node) -> usize {
        sender * RING
    }
    fn consumed(self, receiver: Node) -> usize {
        self.nodes * RING + receiver * 8
    }
    fn abort(self) -> usize {
        self.nodes * RING + self.nodes * 8
    }
    fn bytes(self) -> usize {
        self.abort() + 8
    }
}

/// One sender's stream into one receiver's ring, as the sender keeps it.
struct Outgoing {
    /// Bytes sent so far (the stream's position).
    pos: u64,
    seq: u32,
    /// Messages waiting for room in the ring.
    queue: VecDeque<Vec<u8>>,
}

/// One ring of this node's mailbox, as the receiver keeps it.
struct Incoming {
    pos: u64,
    seq: u32,
}

/// A node's mailboxes: its own to receive, every other node's to send, and
/// the barrier board if barriers broadcast.
pub struct Mailboxes {
    me: Node,
    at: Layout,
    own: RxRegion,
    to: Vec<Option<TxRegion>>,
    board: Option<crate::board::Board>,
    out: Vec<Mutex<Outgoing>>,
    inc: Mutex<Vec<Incoming>>,
    sent_bytes: std::sync::atomic::AtomicU64,
}

impl Mailboxes {
    /// Allocate every node's mailbox, receive this node's, transmit to the
    /// others'. Every node must have done so before anyone sends (the start
    /// barrier).
    pub fn attach(mc: &MemoryChannel, broadcast: bool) -> Result<Mailboxes, HlrcError> {
        let me = mc.node_id().index();
        let nodes = usize::try_from(mc.nodes()).expect("a node count fits usize");
        let at = Layout { nodes };
        let mut own = None;
        let mut to = Vec::with_capacity(nodes);
        for n in 0..nodes {
            let key = KEY_MAILBOX + u32::try_from(n).expect("a node number fits u32");
            let id = mc.region_alloc(key, u64_of(at.bytes()), false)?;
            if n == me {
                own = Some(mc.attach_receive(id, Sharing::Shared, false)?);
                to.push(None);
            } else {
                let dest = NodeId(u8::try_from(n).expect("a node number fits u8"));
                to.push(Some(mc.attach_transmit_to(id, Sharing::Shared, dest)?));
            }
        }
        let own = own.expect("this node's own mailbox was attached");
        let board = if broadcast {
            Some(crate::board::Board::attach(mc)?)
        } else {
            None
        };
        Ok(Mailboxes {
            me,
            at,
            own,
            to,
            board,
            out: (0..nodes)
                .map(|_| {
                    Mutex::new(Outgoing {
                        pos: 0,
                        seq: 0,
                        queue: VecDeque::new(),
                    })
                })
                .collect(),
            inc: Mutex::new((0..nodes).map(|_| Incoming { pos: 0, seq: 0 }).collect()),
            sent_bytes: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Bytes this node has stored into others' mailboxes.
    pub fn sent_bytes(&self) -> u64 {
        self.sent_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Queue `bytes` for `to` and send what fits; what does not goes out
    /// at a later [`Mailboxes::flush`] (the communication thread's loop).
    pub fn send(&self, to: Node, bytes: Vec<u8>) -> Result<(), HlrcError> {
        if bytes.len() > MAX_MESSAGE {
            return Err(HlrcError::MessageTooLarge {
                len: bytes.len(),
                max: MAX_MESSAGE,
            });
        }
        let mut o = self.out[to].lock().unwrap_or_else(|p| p.into_inner());
        o.queue.push_back(bytes);
        self.drain(to, &mut o)
    }

    /// Send `bytes` to every other node by one broadcast (a barrier
    /// arrival: the board holds one per node and barrier).
    pub fn broadcast(&self, bytes: &[u8]) -> Result<(), HlrcError> {
        let board = self.board.as_ref().ok_or(HlrcError::NoBoard)?;
        board.post(bytes)?;
        self.sent_bytes.fetch_add(
            u64_of(16 + bytes.len()),
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }

    /// Send whatever waits for room, to every node.
    pub fn flush(&self) -> Result<(), HlrcError> {
        for to in 0..self.at.nodes {
            if to == self.me {
                continue;
            }
            let mut o = self.out[to].lock().unwrap_or_else(|p| p.into_inner());
            self.drain(to, &mut o)?;
        }
        Ok(())
    }

    /// Whether messages still wait for room.
    pub fn pending(&self) -> bool {
        self.out
            .iter()
            .any(|o| !o.lock().unwrap_or_else(|p| p.into_inner()).queue.is_empty())
    }

    fn drain(&self, to: Node, o: &mut Outgoing) -> Result<(), HlrcError> {
        let Some(tx) = self.to[to].as_ref() else {
            return Ok(());
        };
        let consumed = self.own.load_u64(self.at.consumed(to))?;
        let base = self.at.ring(self.me);
        while let Some(msg) = o.queue.front() {
            let body = 8 + msg.len().div_ceil(8) * 8;
            // The header, the body, and the next header's slot, cleared.
            let mut need = 8 + body + 8;
            let off = usize_of(o.pos % u64_of(RING));
            let wraps = off + 8 + body > RING;
            if wraps {
                need += RING - off;
            }
            if o.pos + u64_of(need) - consumed > u64_of(RING) {
                return Ok(());
            }
            let len = u32::try_from(msg.len()).expect("a message fits u32");
            if wraps {
                // The ring's start holds the last lap's bytes: clear the
                // slot the receiver will look at there before saying so.
                tx.write_u64(base, 0)?;
                o.seq = o.seq.wrapping_add(1).max(1);
                tx.write_u64(base + off, u64::from(o.seq) << 32 | u64::from(WRAP))?;
                o.pos += u64_of(RING - off);
            }
            let off = usize_of(o.pos % u64_of(RING));
            o.seq = o.seq.wrapping_add(1).max(1);
            // The CRC and the payload, then a cleared slot where the next
            // header will go, then the header that says they were sent. The
            // receiver looks for the next header where this message ends;
            // without the clearing it would find there the last lap's bytes,
            // and a payload word of them could read as the header it waits
            // for (a u32 of 1, 2, 3 a byte off a word boundary reads as
            // sequence number 256, 512, 768).
            let mut framed = Vec::with_capacity(8 + msg.len());
            framed.extend_from_slice(&u64::from(crc32fast::hash(msg)).to_le_bytes());
            framed.extend_from_slice(msg);
            tx.write(base + off + 8, &framed)?;
            tx.write_u64(base + (off + 8 + body) % RING, 0)?;
            tx.write_u64(base + off, u64::from(o.seq) << 32 | u64::from(len))?;
            o.pos += u64_of(8 + body);
            self.sent_bytes
                .fetch_add(u64_of(8 + msg.len()), std::sync::atomic::Ordering::Relaxed);
            o.queue.pop_front();
        }
        Ok(())
    }

    /// The next message from any node that has one, if any (the senders in
    /// turn, starting after `after`).
    pub fn receive(&self, after: Node) -> Result<Option<Received>, HlrcError> {
        if let Some(m) = self.receive_mail(after)? {
            return Ok(Some(m));
        }
        match &self.board {
            Some(b) => b.receive(after),
            None => Ok(None),
        }
    }

    fn receive_mail(&self, after: Node) -> Result<Option<Received>, HlrcError> {
        let mut inc = self.inc.lock().unwrap_or_else(|p| p.into_inner());
        let nodes = self.at.nodes;
        for k in 1..=nodes {
            let from = (after + k) % nodes;
            if from == self.me {
                continue;
            }
            let r = &mut inc[from];
            let base = self.at.ring(from);
            loop {
                let off = usize_of(r.pos % u64_of(RING));
                let head = self.own.load_u64(base + off)?;
                let want = r.seq.wrapping_add(1).max(1);
                if head >> 32 != u64::from(want) {
                    break;
                }
                let len = u32::try_from(head & 0xffff_ffff).expect("masked to 32 bits");
                r.seq = want;
                if len == WRAP {
                    r.pos += u64_of(RING - off);
                    continue;
                }
                let len = usize::try_from(len).expect("a u32 fits usize");
                if len > MAX_MESSAGE || off + 16 + len > RING {
                    return Err(HlrcError::BadFrame { from, len });
                }
                let crc = self.own.load_u64(base + off + 8)?;
                let mut bytes = vec![0; len];
                self.own.read(base + off + 16, &mut bytes)?;
                if crc != u64::from(crc32fast::hash(&bytes)) {
                    return Err(HlrcError::Damaged { from, seq: want });
                }
                let arrival = self.own.arrival_range(base + off, 16 + len);
                r.pos += u64_of(16 + len.div_ceil(8) * 8);
                if let Some(tx) = self.to[from].as_ref() {
                    // How far this node has read the sender's stream, into
                    // the sender's mailbox.
                    tx.write_u64(self.at.consumed(self.me), r.pos)?;
                }
                return Ok(Some(Received {
                    from,
                    bytes,
                    arrival,
                }));
            }
        }
        Ok(None)
    }

    /// Tell every node this one failed.
    pub fn abandon(&self) {
        let word = u64_of(self.me) + 1;
        for tx in self.to.iter().flatten() {
            let _ = tx.write_u64(self.at.abort(), word);
        }
    }

    /// Fail if a node said it failed.
    pub fn check_failed(&self) -> Result<(), HlrcError> {
        match self.own.load_u64(self.at.abort())? {
            0 => Ok(()),
            n => Err(HlrcError::NodeFailed {
                node: usize_of(n - 1),
            }),
        }
    }
}
