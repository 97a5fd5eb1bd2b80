//! CSM-DMS metadata (seed 000 s.2.3.1.1 "Metadata", seed 002 s.4.1, s.4.3):
//! the global page directory replicated on every node and updated by
//! broadcast remote writes without locks (the shared word is written only by
//! the home, each node word only by its node), and per-node write-notice bins
//! in Memory Channel space, each written by one sender, drained by the
//! receiver.
//!
//! What each relies on (docs/cashmere.md, "Ordering"):
//! - A node knows its own directory words from its own record (`mine`), never
//!   from its replica: its last store to a word may not have come back yet.
//! - Notices: the entries, then SendIdx, in that order from one sender, so a
//!   receiver that sees SendIdx has the entries before it (per-source FIFO,
//!   packet by packet). RecvIdx read by the sender may be stale: that only
//!   makes the bin look fuller.
//! - The directory lock (home assignment at first touch): the seed's lock
//!   (write an entry, wait for it to come back, read the others'), with the
//!   wait on this node's echo: total order and loopback in order.

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mc_api::{MemoryChannel, RxRegion, TxRegion};

use super::mailbox::Mailboxes;
use super::seams::{DirectoryState, Metadata};
use super::site::Site;
use super::space::{CsmSpace, EXCLUSIVE, KEY_DIR, KEY_WN};
use super::wait::{await_echo, FutexBell};
use super::CsmError;

/// How long a home assignment waits for the directory lock.
const DIR_LOCK_WAIT: Duration = Duration::from_secs(120);

pub struct DmsMeta {
    space: CsmSpace,
    me: u32,
    dir_tx: Arc<TxRegion>,
    dir_rx: Arc<RxRegion>,
    wn_tx: Arc<TxRegion>,
    wn_rx: Arc<RxRegion>,
    /// This node's own directory word of each page, as it last wrote it.
    mine: Box<[AtomicU8]>,
    /// Tickets for the directory lock.
    ticket: AtomicU32,
    mail: Arc<Mailboxes>,
    bell: Arc<FutexBell>,
    /// SendIdx per receiver, RecvIdx per sender (this node's copies).
    idx: Mutex<(Vec<u64>, Vec<u64>)>,
}

impl DmsMeta {
    pub fn new(
        mc: &MemoryChannel,
        space: CsmSpace,
        mail: Arc<Mailboxes>,
        bell: Arc<FutexBell>,
        site: &Site,
    ) -> Result<DmsMeta, CsmError> {
        let dir = mc.region_alloc(KEY_DIR, space.dir_bytes(), true)?;
        let wn = mc.region_alloc(KEY_WN, space.wn_bytes(), true)?;
        let me = site.me;
        let dir_rx = site.receive(mc, dir, false)?;
        let wn_rx = site.receive(mc, wn, false)?;
        // Resume the bin indices where the region says they are.
        let n = space.nodes;
        let send = (0..n)
            .map(|r| wn_rx.load_u64(space.bin(r, me)))
            .collect::<Result<Vec<_>, _>>()?;
        let recv = (0..n)
            .map(|s| wn_rx.load_u64(space.bin(me, s) + 8))
            .collect::<Result<Vec<_>, _>>()?;
        let mine = (0..space.pages)
            .map(|p| {
                // The word's state is in its low bits (`DirectoryState`).
                let w = dir_rx.load_u32(space.dir_node(p, me)).unwrap_or(0);
                AtomicU8::new(w.to_le_bytes()[0])
            })
            .collect();
        Ok(DmsMeta {
            space,
            me,
            dir_tx: site.transmit_all(mc, dir)?,
            dir_rx,
            wn_tx: site.transmit_all(mc, wn)?,
            wn_rx,
            mine,
            ticket: AtomicU32::new(1),
            mail,
            bell,
            idx: Mutex::new((send, recv)),
        })
    }

    fn shared_word(&self, page: u32) -> u32 {
        self.dir_rx
            .load_u32(self.space.dir_shared(page))
            .unwrap_or(0)
    }

    /// Wait until everything this node has posted so far has come back.
    fn settle(&self, failed: &dyn Fn() -> Result<(), CsmError>) -> Result<(), CsmError> {
        let mark = self.mail.post_echo()?;
        await_echo(
            &self.bell,
            mark,
            || self.mail.post_echo(),
            || self.mail.echo_seen(),
            failed,
            || self.mail.arrival(self.mail.at().echo(), 8),
        )
    }

    /// The seed's lock (seed 000 s.2.3.1.1, seed 002 s.6.1), on the directory
    /// lock's entries: write this node's entry, wait until it has come back
    /// (then every entry written before it has arrived here too: total order),
    /// and hold the lock if no other entry is set; otherwise clear, back off
    /// and try again. Of two contenders the later one in the total order
    /// sees the earlier one's entry.
    fn dir_lock(&self, failed: &dyn Fn() -> Result<(), CsmError>) -> Result<(), CsmError> {
        let start = Instant::now();
        let mut backoff_us = 20u64;
        let mut rng = u64::from(self.me + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        loop {
            let t = self.ticket.fetch_add(1, Ordering::Relaxed).max(1);
            self.dir_tx
                .post(self.space.dir_lock(self.me), &t.to_le_bytes())?;
            self.settle(failed)?;
            let contended = (0..self.space.nodes)
                .filter(|&n| n != self.me)
                .any(|n| self.dir_rx.load_u32(self.space.dir_lock(n)).unwrap_or(0) != 0);
            if !contended {
                return Ok(());
            }
            self.dir_tx
                .post(self.space.dir_lock(self.me), &0u32.to_le_bytes())?;
            if start.elapsed() > DIR_LOCK_WAIT {
                return Err(CsmError::DirectoryLock {
                    after: DIR_LOCK_WAIT,
                });
            }
            // Randomised exponential back-off, asleep (nanosleep is a plain
            // system call: fine in the fault handler).
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let us = backoff_us / 2 + rng % (backoff_us / 2 + 1);
            std::thread::sleep(Duration::from_micros(us));
            backoff_us = (backoff_us * 2).min(2000);
        }
    }
}

impl Metadata for DmsMeta {
    fn home(&self, page: u32) -> Option<u32> {
        match self.shared_word(page) & 0xff {
            0 => None,
            h => Some(h - 1),
        }
    }

    fn claim_home(
        &self,
        page: u32,
        failed: &dyn Fn() -> Result<(), CsmError>,
    ) -> Result<u32, CsmError> {
        self.dir_lock(failed)?;
        // Holding the lock, this node has seen every home assigned before
        // (an assignment comes before its assigner's lock release, and that
        // before our entry in the total order).
        let r = match self.home(page) {
            Some(h) => Ok(h),
            None => self
                .dir_tx
                .post(self.space.dir_shared(page), &(self.me + 1).to_le_bytes())
                .map(|()| self.me)
                .map_err(CsmError::from),
        };
        // After the assignment in FIFO order: whoever takes the lock next
        // sees it.
        self.dir_tx
            .post(self.space.dir_lock(self.me), &0u32.to_le_bytes())?;
        r
    }

    fn set_exclusive(&self, page: u32, home: u32, on: bool) -> Result<(), CsmError> {
        let w = (home + 1) | if on { EXCLUSIVE } else { 0 };
        self.dir_tx
            .post(self.space.dir_shared(page), &w.to_le_bytes())?;
        Ok(())
    }

    fn set_home(&self, page: u32, new_home: u32) -> Result<(), CsmError> {
        self.set_exclusive(page, new_home, false)
    }

    fn state_of(&self, page: u32, node: u32) -> DirectoryState {
        if node == self.me {
            return DirectoryState::from_word(u32::from(
                self.mine[page as usize].load(Ordering::Relaxed),
            ));
        }
        DirectoryState::from_word(
            self.dir_rx
                .load_u32(self.space.dir_node(page, node))
                .unwrap_or(0),
        )
    }

    fn set_state(&self, page: u32, state: DirectoryState) -> Result<(), CsmError> {
        // Our own record, not the replica: our last store to this word may
        // still be on its way back.
        if self.mine[page as usize].swap(state as u8, Ordering::Relaxed) != state as u8 {
            self.dir_tx.post(
                self.space.dir_node(page, self.me),
                &(state as u32).to_le_bytes(),
            )?;
        }
        Ok(())
    }

    fn send_notices(&self, to: u32, pages: &[u32]) -> Result<usize, CsmError> {
        let mut idx = self.idx.lock().unwrap_or_else(|p| p.into_inner());
        let bin = self.space.bin(to, self.me);
        let cap = u64::from(self.space.bin_capacity());
        let recv = self.wn_rx.load_u64(bin + 8)?;
        let send = idx.0[to as usize];
        let room = usize::try_from(cap - (send - recv).min(cap)).expect("a bin's room fits usize");
        let k = room.min(pages.len());
        if k == 0 {
            return Ok(0);
        }
        let bytes: Vec<[u8; 4]> = pages[..k].iter().map(|p| p.to_le_bytes()).collect();
        let new_send = (send + k as u64).to_le_bytes();
        let mut recs: Vec<(usize, &[u8])> = bytes
            .iter()
            .enumerate()
            .map(|(i, b)| {
                (
                    bin + 16
                        + 4 * usize::try_from((send + i as u64) % cap)
                            .expect("below the bin's capacity"),
                    &b[..],
                )
            })
            .collect();
        // Entries first, then SendIdx: the receiver never reads an entry early.
        recs.push((bin, &new_send));
        self.wn_tx.write_many(&recs)?;
        idx.0[to as usize] = send + k as u64;
        Ok(k)
    }

    fn drain_notices(&self, take: &mut dyn FnMut(u32)) -> Result<(), CsmError> {
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
                take(self.wn_rx.load_u32(
                    bin + 16 + 4 * usize::try_from(recv % cap).expect("below the bin's capacity"),
                )?);
                recv += 1;
            }
            idx.1[s as usize] = recv;
            self.wn_tx.post(bin + 8, &recv.to_le_bytes())?;
        }
        Ok(())
    }
}
