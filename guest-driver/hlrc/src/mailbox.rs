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
pub use crate::ring::RING;
use crate::ring::{RingReceiver, RingRx, RingSender, RingTx, Taken, MAX_MESSAGE};
use crate::Node;

const KEY_MAILBOX: u32 = 0x484c_0000;

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
    ring: RingSender,
    /// Messages waiting for room in the ring.
    queue: VecDeque<Vec<u8>>,
}

/// A ring at `base` of another node's mailbox, as this node stores into it.
struct TxRing<'a> {
    tx: &'a TxRegion,
    base: usize,
}

impl RingTx for TxRing<'_> {
    fn write(&self, off: usize, bytes: &[u8]) -> Result<(), HlrcError> {
        Ok(self.tx.write(self.base + off, bytes)?)
    }
}

/// A ring at `base` of this node's mailbox.
struct RxRing<'a> {
    rx: &'a RxRegion,
    base: usize,
}

impl RingRx for RxRing<'_> {
    fn load_u64(&self, off: usize) -> Result<u64, HlrcError> {
        Ok(self.rx.load_u64(self.base + off)?)
    }
    fn read(&self, off: usize, buf: &mut [u8]) -> Result<(), HlrcError> {
        Ok(self.rx.read(self.base + off, buf)?)
    }
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
    inc: Mutex<Vec<RingReceiver>>,
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
                        ring: RingSender::default(),
                        queue: VecDeque::new(),
                    })
                })
                .collect(),
            inc: Mutex::new((0..nodes).map(|_| RingReceiver::default()).collect()),
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
        let ring = TxRing {
            tx,
            base: self.at.ring(self.me),
        };
        while let Some(msg) = o.queue.front() {
            if !o.ring.try_send(&ring, consumed, msg)? {
                return Ok(());
            }
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
            let ring = RxRing {
                rx: &self.own,
                base: self.at.ring(from),
            };
            let Some(Taken { bytes, off, len }) = r.try_take(&ring, from)? else {
                continue;
            };
            let arrival = self.own.arrival_range(ring.base + off, 16 + len);
            if let Some(tx) = self.to[from].as_ref() {
                // How far this node has read the sender's stream, into the
                // sender's mailbox.
                tx.write_u64(self.at.consumed(self.me), r.consumed())?;
            }
            return Ok(Some(Received {
                from,
                bytes,
                arrival,
            }));
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
