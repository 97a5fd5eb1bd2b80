//! The barrier board: barrier arrivals by Memory Channel broadcast
//! ([`crate::BarrierMode::Broadcast`], seed 001 s.6's what-if).
//!
//! One region (key `KEY_BOARD`) that every node receives and transmits to
//! by broadcast: one store reaches every other node at once, where a
//! mailbox message reaches one. It holds, per sender, two slots of
//! [`SLOT`] bytes; a node's arrival at its `k`th barrier goes into its
//! slot `k mod 2`: the header (the barrier's number and the length), the
//! CRC-32, the payload, written payload first, header last (one sender's
//! stores arrive in order). Two slots are enough with no flow control: a
//! node arrives at barrier `k + 2` only after every node arrived at
//! `k + 1`, which each did only after reading every arrival at `k`.

use std::sync::Mutex;

use mc_api::{MemoryChannel, RxRegion, Sharing, TxRegion};

use crate::error::HlrcError;
use crate::received::Received;
use crate::Node;

/// Bytes of one slot: the largest arrival is `SLOT - 16`.
pub const SLOT: usize = 64 * 1024;
const KEY_BOARD: u32 = 0x484c_2000;

fn u64_of(n: usize) -> u64 {
    u64::try_from(n).expect("a byte count fits u64")
}

pub(crate) struct Board {
    me: Node,
    nodes: usize,
    rx: RxRegion,
    tx: TxRegion,
    /// Barriers this node has posted.
    posted: Mutex<u64>,
    /// Per sender, the barrier arrivals read.
    read: Mutex<Vec<u64>>,
}

impl Board {
    pub(crate) fn attach(mc: &MemoryChannel) -> Result<Board, HlrcError> {
        let me = mc.node_id().index();
        let nodes = usize::try_from(mc.nodes()).expect("a node count fits usize");
        let id = mc.region_alloc(KEY_BOARD, u64_of(nodes * 2 * SLOT), false)?;
        let rx = mc.attach_receive(id, Sharing::Shared, false)?;
        // Broadcast, no loopback: a node takes its own arrival at once.
        let tx = mc.attach_transmit(id, Sharing::Shared, false)?;
        Ok(Board {
            me,
            nodes,
            rx,
            tx,
            posted: Mutex::new(0),
            read: Mutex::new(vec![0; nodes]),
        })
    }

    fn slot(&self, sender: Node, barrier: u64) -> usize {
        let parity = usize::from(barrier % 2 == 1);
        (sender * 2 + parity) * SLOT
    }

    /// A barrier's number as its header holds it (the low 32 bits: a slot
    /// is only ever compared with the number two barriers on).
    fn tag(barrier: u64) -> u64 {
        barrier & 0xffff_ffff
    }

    /// Post this node's arrival at its next barrier.
    pub(crate) fn post(&self, bytes: &[u8]) -> Result<(), HlrcError> {
        if bytes.len() > SLOT - 16 {
            return Err(HlrcError::MessageTooLarge {
                len: bytes.len(),
                max: SLOT - 16,
            });
        }
        let mut posted = self.posted.lock().unwrap_or_else(|p| p.into_inner());
        let barrier = *posted + 1;
        let at = self.slot(self.me, barrier);
        let mut framed = Vec::with_capacity(8 + bytes.len());
        framed.extend_from_slice(&u64::from(crc32fast::hash(bytes)).to_le_bytes());
        framed.extend_from_slice(bytes);
        self.tx.write(at + 8, &framed)?;
        let len = u32::try_from(bytes.len()).expect("bounded by SLOT");
        self.tx
            .write_u64(at, Self::tag(barrier) << 32 | u64::from(len))?;
        *posted = barrier;
        Ok(())
    }

    /// The next arrival any other node posted, if one has come (the
    /// senders in turn, starting after `after`).
    pub(crate) fn receive(&self, after: Node) -> Result<Option<Received>, HlrcError> {
        let mut read = self.read.lock().unwrap_or_else(|p| p.into_inner());
        for k in 1..=self.nodes {
            let from = (after + k) % self.nodes;
            if from == self.me {
                continue;
            }
            let want = read[from] + 1;
            let at = self.slot(from, want);
            let head = self.rx.load_u64(at)?;
            if head >> 32 != Self::tag(want) {
                continue;
            }
            let len = usize::try_from(head & 0xffff_ffff).expect("masked to 32 bits");
            if len > SLOT - 16 {
                return Err(HlrcError::BadFrame { from, len });
            }
            let crc = self.rx.load_u64(at + 8)?;
            let mut bytes = vec![0; len];
            self.rx.read(at + 16, &mut bytes)?;
            if crc != u64::from(crc32fast::hash(&bytes)) {
                return Err(HlrcError::Damaged {
                    from,
                    seq: u32::try_from(Self::tag(want)).expect("masked to 32 bits"),
                });
            }
            read[from] = want;
            return Ok(Some(Received {
                from,
                bytes,
                arrival: self.rx.arrival_range(at, 16 + len),
            }));
        }
        Ok(None)
    }
}
