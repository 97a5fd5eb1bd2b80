//! CSM-DMS metadata (seed 000 s.2.3.1.1 "Metadata", seed 002 s.4.1, s.4.3):
//! the global page directory replicated on every node and updated by
//! broadcast remote writes without locks (the shared word is written only by
//! the home, each node word only by its node), and per-node write-notice bins
//! in Memory Channel space, each written by one sender, drained by the
//! receiver.

use std::sync::Mutex;

use mc_api::{LockSet, MemoryChannel, RxRegion, Sharing, TxRegion};

use super::seams::{DirectoryState, Metadata};
use super::space::{CsmSpace, EXCLUSIVE, KEY_DIR, KEY_DIRLOCK, KEY_WN};
use super::CsmError;

pub struct DmsMeta {
    space: CsmSpace,
    me: u32,
    dir_tx: TxRegion,
    dir_rx: RxRegion,
    wn_tx: TxRegion,
    wn_rx: RxRegion,
    /// Taken only to assign a home at first touch.
    dir_lock: LockSet,
    /// SendIdx per receiver, RecvIdx per sender (this node's copies).
    idx: Mutex<(Vec<u64>, Vec<u64>)>,
}

impl DmsMeta {
    pub fn new(mc: &MemoryChannel, space: CsmSpace) -> Result<DmsMeta, CsmError> {
        let dir = mc.region_alloc(KEY_DIR, space.dir_bytes(), true)?;
        let wn = mc.region_alloc(KEY_WN, space.wn_bytes(), true)?;
        let me = mc.node_id().index() as u32;
        let dir_rx = mc.attach_receive(dir, Sharing::Shared, false)?;
        let wn_rx = mc.attach_receive(wn, Sharing::Shared, false)?;
        // Resume the bin indices where the region says they are.
        let n = space.nodes;
        let send = (0..n)
            .map(|r| wn_rx.load_u64(space.bin(r, me)))
            .collect::<Result<Vec<_>, _>>()?;
        let recv = (0..n)
            .map(|s| wn_rx.load_u64(space.bin(me, s) + 8))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DmsMeta {
            space,
            me,
            dir_tx: mc.attach_transmit(dir, Sharing::Shared, true)?,
            dir_rx,
            wn_tx: mc.attach_transmit(wn, Sharing::Shared, true)?,
            wn_rx,
            dir_lock: mc.lock_alloc(KEY_DIRLOCK, 1, false, false)?,
            idx: Mutex::new((send, recv)),
        })
    }

    fn shared_word(&self, page: u32) -> u32 {
        self.dir_rx
            .load_u32(self.space.dir_shared(page))
            .unwrap_or(0)
    }
}

impl Metadata for DmsMeta {
    fn home(&self, page: u32) -> Option<u32> {
        match self.shared_word(page) & 0xff {
            0 => None,
            h => Some(h - 1),
        }
    }

    fn claim_home(&self, page: u32) -> Result<u32, CsmError> {
        self.dir_lock.acquire(0)?;
        let r = (|| {
            if let Some(h) = self.home(page) {
                return Ok(h);
            }
            self.dir_tx
                .write_u32(self.space.dir_shared(page), self.me + 1)?;
            Ok(self.me)
        })();
        self.dir_lock.release(0)?;
        r
    }

    fn exclusive(&self, page: u32) -> bool {
        self.shared_word(page) & EXCLUSIVE != 0
    }

    fn set_exclusive(&self, page: u32, home: u32, on: bool) -> Result<(), CsmError> {
        let w = (home + 1) | if on { EXCLUSIVE } else { 0 };
        self.dir_tx.write_u32(self.space.dir_shared(page), w)?;
        Ok(())
    }

    fn state_of(&self, page: u32, node: u32) -> DirectoryState {
        DirectoryState::from_word(
            self.dir_rx
                .load_u32(self.space.dir_node(page, node))
                .unwrap_or(0),
        )
    }

    fn set_state(&self, page: u32, state: DirectoryState) -> Result<(), CsmError> {
        if self.state_of(page, self.me) != state {
            self.dir_tx
                .write_u32(self.space.dir_node(page, self.me), state as u32)?;
        }
        Ok(())
    }

    fn send_notices(&self, to: u32, pages: &[u32]) -> Result<usize, CsmError> {
        let mut idx = self.idx.lock().unwrap_or_else(|p| p.into_inner());
        let bin = self.space.bin(to, self.me);
        let cap = u64::from(self.space.bin_capacity());
        let recv = self.wn_rx.load_u64(bin + 8)?;
        let send = idx.0[to as usize];
        let room = (cap - (send - recv).min(cap)) as usize;
        let k = room.min(pages.len());
        if k == 0 {
            return Ok(0);
        }
        let bytes: Vec<[u8; 4]> = pages[..k].iter().map(|p| p.to_le_bytes()).collect();
        let new_send = (send + k as u64).to_le_bytes();
        let mut recs: Vec<(usize, &[u8])> = bytes
            .iter()
            .enumerate()
            .map(|(i, b)| (bin + 16 + 4 * ((send + i as u64) % cap) as usize, &b[..]))
            .collect();
        // Entries first, then SendIdx: the receiver never reads an entry early.
        recs.push((bin, &new_send));
        self.wn_tx.write_many(&recs)?;
        idx.0[to as usize] = send + k as u64;
        Ok(k)
    }

    fn drain_notices(&self, out: &mut Vec<u32>) -> Result<(), CsmError> {
        let mut idx = self.idx.lock().unwrap_or_else(|p| p.into_inner());
        let cap = u64::from(self.space.bin_capacity());
        for s in 0..self.space.nodes {
            if s == self.me {
                continue;
            }
            let bin = self.space.bin(self.me, s);
            let send = self.wn_rx.load_u64(bin)?;
            let mut recv = idx.1[s as usize];
            if send == recv {
                continue;
            }
            while recv < send {
                out.push(self.wn_rx.load_u32(bin + 16 + 4 * (recv % cap) as usize)?);
                recv += 1;
            }
            idx.1[s as usize] = recv;
            self.wn_tx.write_u64(bin + 8, recv)?;
        }
        Ok(())
    }
}
