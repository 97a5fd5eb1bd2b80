//! Metadata by explicit messages, CSM-S and CSM-None (seed 000 s.2.3.1.3;
//! seed 002 s.4.1 "the Explicit Messages version", s.4.3): nothing of the
//! directory or the write notices is in Memory Channel space.
//!
//! - **Directory.** The master copy of a page's entry (each node's sharing
//!   state) is kept by its home; other nodes cache it. A node joins the
//!   sharing set with its page request (the home records it as it answers:
//!   "a directory update is implicit in a page fetch request and so can be
//!   piggybacked"), leaves it with an explicit message to the home when it
//!   invalidates its copy, and learns the sharing set, which it needs only
//!   to send write notices after a diff, from the diff's acknowledgement
//!   ("the home node can simply piggyback the sharing set ... onto the diff
//!   acknowledgment"). The home reads its own master entry.
//! - **Homes.** First touch: a node that touches a page with no known home
//!   asks the page's directory manager (node `page mod nodes`), which makes
//!   it the home unless another node asked first, and answers with the home.
//!   (The seed kept first-touch assignment on Memory Channel, "only accessed
//!   during initialization"; here it is a message too.) With migration the
//!   homes move lazily (seed 002 s.4.1): a node that is no longer the home
//!   sends the asker on. A new home does not receive its old home's entry;
//!   it counts every other node as a sharer until each says otherwise.
//! - **Write notices** are messages: a list of pages in the sender's message
//!   slot of the receiver's mailbox, then a request word; the receiver's
//!   handler puts them on its pending list and acknowledges (seed 002
//!   s.4.3: "passes the local buffer filled with write notices to the
//!   Message component ... The message handler on the destination simply
//!   distributes the write notices").
//!
//! What it relies on: only per-source FIFO and the acknowledgements. A
//! releaser's notices are acknowledged (so on the receiver's pending list)
//! before its release store; a diff's acknowledgement carries the sharing
//! set as of the diff's application at the home, which serialises it with
//! the page requests it answers: a node that asked before the diff is in
//! the set, one that asked after got the diff. The protocol core sends the
//! requests (`MetadataMessages`), since it holds the node's state and
//! answers requests while it waits.

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use super::site::Site;

use super::mailbox::Mailboxes;
use super::messages::checksum;
use super::seams::{DirectoryState, Metadata, MetadataMessages, ENTRY_BYTES};
use super::space::CsmSpace;
use super::twin::DIFF_HEADER;
use super::CsmError;

/// What distinguishes a notices body's checksum from a diff body's.
const NOTICES_CHECK: u32 = 0x4e4f_5449;

pub struct MsgMeta {
    me: u32,
    nodes: u32,
    mail: Arc<Mailboxes>,
    /// Home + 1 of each page as this node knows it (0: not known). At the
    /// page's manager, the first-touch assignment.
    homes: Box<[AtomicU32]>,
    /// Per page, each node's state (`pages x nodes`): the master entry for
    /// the pages this node is home of, a cache elsewhere; this node's own
    /// word is always its own record.
    states: Box<[AtomicU8]>,
    /// The body of the notices message in flight, kept for a retry.
    body: Mutex<(Box<[u8]>, usize)>,
}

impl MsgMeta {
    pub fn new(site: &Site, space: CsmSpace, mail: Arc<Mailboxes>) -> Result<MsgMeta, CsmError> {
        let slot = mail.at().message_bytes();
        let n = space.pages as usize * space.nodes as usize;
        Ok(MsgMeta {
            me: site.me,
            nodes: space.nodes,
            mail,
            homes: (0..space.pages).map(|_| AtomicU32::new(0)).collect(),
            states: (0..n).map(|_| AtomicU8::new(0)).collect(),
            body: Mutex::new((vec![0u8; slot].into_boxed_slice(), 0)),
        })
    }

    fn word(&self, page: u32, node: u32) -> &AtomicU8 {
        &self.states[page as usize * self.nodes as usize + node as usize]
    }

    /// How many page numbers fit in one notices message.
    fn capacity(&self) -> usize {
        (self.mail.at().message_bytes() - DIFF_HEADER) / 4
    }
}

fn notices_checksum(count: u32, body: &[u8]) -> u64 {
    checksum(NOTICES_CHECK, count, body)
}

impl Metadata for MsgMeta {
    fn home(&self, page: u32) -> Option<u32> {
        match self.homes[page as usize].load(Ordering::Acquire) {
            0 => None,
            h => Some(h - 1),
        }
    }

    /// Only at the page's manager (elsewhere the core asks the manager).
    fn claim_home(
        &self,
        page: u32,
        _failed: &dyn Fn() -> Result<(), CsmError>,
    ) -> Result<u32, CsmError> {
        Ok(self.assign_home(page, self.me))
    }

    /// Nobody else needs to know (seed 002 s.4.1: "When the home node is
    /// entering Exclusive mode, it can simply update the master entry"); a
    /// node that wants the page asks the home, which then leaves it.
    fn set_exclusive(&self, _page: u32, _home: u32, _on: bool) -> Result<(), CsmError> {
        Ok(())
    }

    fn set_home(&self, page: u32, new_home: u32) -> Result<(), CsmError> {
        self.homes[page as usize].store(new_home + 1, Ordering::Release);
        Ok(())
    }

    fn state_of(&self, page: u32, node: u32) -> DirectoryState {
        DirectoryState::from_word(u32::from(self.word(page, node).load(Ordering::Relaxed)))
    }

    /// This node's own word, here only: the home learns a join from the
    /// page request and a departure from the core's `Invalid` message.
    fn set_state(&self, page: u32, state: DirectoryState) -> Result<(), CsmError> {
        self.word(page, self.me)
            .store(state as u8, Ordering::Relaxed);
        Ok(())
    }

    /// Post a notices message's body into this node's slot of `to`'s
    /// mailbox; the core then sends its request and waits for the
    /// acknowledgement.
    fn send_notices(&self, to: u32, pages: &[u32]) -> Result<usize, CsmError> {
        let k = pages.len().min(self.capacity());
        let mut b = self.body.lock().unwrap_or_else(|p| p.into_inner());
        let (buf, len) = &mut *b;
        for (i, p) in pages[..k].iter().enumerate() {
            let at = DIFF_HEADER + 4 * i;
            buf[at..at + 4].copy_from_slice(&p.to_le_bytes());
        }
        let end = DIFF_HEADER + 4 * k;
        let count = u32::try_from(k).expect("notices in one message fit u32");
        let sum = notices_checksum(count, &buf[DIFF_HEADER..end]);
        buf[..4].copy_from_slice(&(4 * count).to_le_bytes());
        buf[4..8].fill(0);
        buf[8..16].copy_from_slice(&sum.to_le_bytes());
        *len = end;
        self.mail
            .post(to, self.mail.at().message(self.me), &buf[..end])?;
        Ok(k)
    }

    /// Notices are taken as their messages come (`take_notices`).
    fn drain_notices(&self, _take: &mut dyn FnMut(u32)) -> Result<(), CsmError> {
        Ok(())
    }

    fn messages(&self) -> Option<&dyn MetadataMessages> {
        Some(self)
    }
}

impl MetadataMessages for MsgMeta {
    fn manager(&self, page: u32) -> u32 {
        page % self.nodes
    }

    fn assign_home(&self, page: u32, claimer: u32) -> u32 {
        match self.homes[page as usize].compare_exchange(
            0,
            claimer + 1,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => claimer,
            Err(h) => h - 1,
        }
    }

    fn learn_home(&self, page: u32, home: u32) {
        self.homes[page as usize].store(home + 1, Ordering::Release);
    }

    fn joined(&self, page: u32, from: u32) {
        let w = self.word(page, from);
        if w.load(Ordering::Relaxed) == DirectoryState::Invalid as u8 {
            w.store(DirectoryState::Read as u8, Ordering::Relaxed);
        }
    }

    fn left(&self, page: u32, from: u32) {
        self.word(page, from)
            .store(DirectoryState::Invalid as u8, Ordering::Relaxed);
    }

    fn entry(&self, page: u32, out: &mut [u8]) {
        let (mut sharers, mut writers) = (0u64, 0u64);
        for n in 0..self.nodes {
            match self.state_of(page, n) {
                DirectoryState::Invalid => {}
                DirectoryState::Read => sharers |= 1 << n,
                DirectoryState::ReadWrite => {
                    sharers |= 1 << n;
                    writers |= 1 << n;
                }
            }
        }
        out[..8].copy_from_slice(&sharers.to_le_bytes());
        out[8..ENTRY_BYTES].copy_from_slice(&writers.to_le_bytes());
    }

    fn learn_entry(&self, page: u32, entry: &[u8]) {
        let at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&entry[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let (sharers, writers) = (at(0), at(8));
        for n in (0..self.nodes).filter(|&n| n != self.me) {
            let s = if writers & (1 << n) != 0 {
                DirectoryState::ReadWrite
            } else if sharers & (1 << n) != 0 {
                DirectoryState::Read
            } else {
                DirectoryState::Invalid
            };
            self.word(page, n).store(s as u8, Ordering::Relaxed);
        }
    }

    fn became_home(&self, page: u32) {
        self.learn_home(page, self.me);
        for n in (0..self.nodes).filter(|&n| n != self.me) {
            self.word(page, n)
                .store(DirectoryState::Read as u8, Ordering::Relaxed);
        }
    }

    fn repost_notices(&self, to: u32) -> Result<(), CsmError> {
        let b = self.body.lock().unwrap_or_else(|p| p.into_inner());
        self.mail
            .post(to, self.mail.at().message(self.me), &b.0[..b.1])
    }

    fn take_notices(
        &self,
        from: u32,
        count: u32,
        buf: &mut [u8],
        take: &mut dyn FnMut(u32),
    ) -> Result<bool, CsmError> {
        let len = DIFF_HEADER + 4 * count as usize;
        if len > buf.len() || len > self.mail.at().message_bytes() {
            return Ok(false);
        }
        self.mail
            .read(self.mail.at().message(from), &mut buf[..len])?;
        let body = &buf[DIFF_HEADER..len];
        let sum = u64::from_le_bytes(buf[8..16].try_into().unwrap_or([0; 8]));
        let stated = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if stated as usize != body.len() || sum != notices_checksum(count, body) {
            return Ok(false);
        }
        for p in body.chunks_exact(4) {
            take(u32::from_le_bytes([p[0], p[1], p[2], p[3]]));
        }
        Ok(true)
    }
}
