//! A cluster barrier on the Memory Channel API: each node counts its arrivals in
//! its own word of a coherent region (broadcast + loopback), and waits until
//! every member's word has caught up. Total order means a node that sees the
//! last arrival also sees everything written before it.
//!
//! In virtual time each node also posts the time it arrived, before its
//! count: the counts are 8 bytes apart and share granules of the arrival
//! table, whose entry is the packet that landed last in the host's time,
//! not the latest in virtual time (docs/virtual-time.md s.4).

use std::time::Duration;

use mc_driver::vclock;

use firmware_model::NodeSet;

use crate::channel::MemoryChannel;
use crate::error::{McError, WaitFor};
use crate::join::adapter_offline;
use crate::lost::LostPacket;
use crate::node::wait_for_others;
use crate::region::{RxRegion, Sharing, TxRegion};

/// Arrival counts: one u64 per node.
const COUNTS: usize = 8 * 64;

/// Where `node` posts the virtual time of its arrival number `count`: two
/// words per node, by the count's parity, so a node that has already left
/// and arrived again does not overwrite the time the slowest still reads.
fn time_word(node: usize, count: u64) -> usize {
    COUNTS + 16 * node + 8 * (count % 2) as usize
}

/// A named barrier for all cluster members.
pub struct Barrier {
    mc: MemoryChannel,
    tx: TxRegion,
    rx: RxRegion,
    count: u64,
}

impl Barrier {
    /// Every node must create the barrier with the same `key`.
    pub fn new(mc: &MemoryChannel, key: u32) -> Result<Barrier, McError> {
        let id = mc.region_alloc(key, (COUNTS + 16 * 64) as u64, true)?;
        let tx = mc.attach_transmit(id, Sharing::Shared, true)?;
        let rx = mc.attach_receive(id, Sharing::Shared, false)?;
        let me = mc.node_id().index();
        // Resume after our last arrival if the barrier was used before.
        let count = rx.load_u64(8 * me)?;
        Ok(Barrier {
            mc: mc.clone(),
            tx,
            rx,
            count,
        })
    }

    /// Wait until every member has arrived here as often as this node;
    /// [`McError::Offline`] if this node's adapter goes offline meanwhile
    /// (the arrival does not count then).
    pub fn wait(&mut self, timeout: Duration) -> Result<(), McError> {
        self.count += 1;
        let me = self.mc.node_id().index();
        if vclock::enabled() {
            self.tx
                .write_u64(time_word(me, self.count), vclock::tick())?;
        }
        self.tx.write_u64(8 * me, self.count)?;
        let count = self.count;
        let rx = &self.rx;
        let mc = &self.mc;
        let r = wait_for_others(
            self.mc.node(),
            WaitFor::Barrier,
            timeout,
            || {
                // An adapter that went offline (it crashed) is out of the
                // cluster: nobody sees this node's arrival and it sees nobody's,
                // so the wait could only time out.
                if adapter_offline(mc.node()) {
                    return Some(Err(McError::Offline));
                }
                let members = mc.members_mask();
                (0..64usize)
                    .filter(|n| members & (1 << n) != 0)
                    .all(|n| rx.load_u64(8 * n).map(|c| c >= count).unwrap_or(false))
                    .then_some(Ok(()))
            },
            || LostPacket::BarrierArrival {
                missing: NodeSet(behind(rx, mc.members_mask(), count)),
            },
            || {
                let members = mc.members_mask();
                let sent = (0..64usize)
                    .filter(|n| members & (1 << n) != 0)
                    .filter_map(|n| rx.load_u64(time_word(n, count)).ok())
                    .filter(|&t| t > 0)
                    .map(|t| vclock::one_way(t, 8))
                    .max();
                sent.max(rx.arrival_range(0, COUNTS))
            },
        )?;
        if matches!(r, Err(McError::Offline)) {
            // The arrival was refused, never seen: after a rejoin this node
            // arrives again with the others.
            self.count -= 1;
        }
        r
    }
}

/// Members whose arrival count in `rx` is short of `count`.
fn behind(rx: &RxRegion, members: u64, count: u64) -> u64 {
    (0..64usize)
        .filter(|n| members & (1 << n) != 0)
        .filter(|&n| rx.load_u64(8 * n).map(|c| c < count).unwrap_or(true))
        .fold(0, |m, n| m | 1 << n)
}
