//! CSM-DMS data propagation (seed 000 s.2.3.1.1 "Data"): a page's master
//! copy is its home's receive mapping (seed 000: "the home node creates a
//! receive mapping for the page"). Each node has a home region the size of
//! the heap that only it receives; page p's master copy is at
//! `p * page_size` in its home's region. Diffs are remote writes into it,
//! point-to-point to the home (the home's own go by loopback), so no other
//! node receives or copies them. A page fetch is a request word in the
//! home's mailbox and a reply in the requester's (`mailbox`), each store of
//! which wakes its receiver only.

use std::ops::Range;
use std::sync::Arc;

use mc_api::{MemoryChannel, RxRegion, TxRegion};

use super::mailbox::Mailboxes;
use super::messages::{mail_request_methods, MailRequests, ReplySlot};
use super::seams::DataPropagation;
use super::site::Site;
use super::space::{CsmSpace, KEY_HOME};
use super::CsmError;

pub struct DmsData {
    space: CsmSpace,
    me: u32,
    /// Transmit mapping of every node's home region: point-to-point to the
    /// others', this node's own with loopback (its master copies).
    to_home: Vec<Arc<TxRegion>>,
    /// This node's receive mapping of its home region: the master copies of
    /// the pages it is home of.
    master: Arc<RxRegion>,
    mail: Arc<Mailboxes>,
    requests: MailRequests,
}

impl DmsData {
    /// Allocate (or find) every node's home region, attach this node's for
    /// receive and every one for transmit. Before the start barrier, like the
    /// mailboxes: a store into a region nobody receives yet is not kept.
    pub fn new(
        mc: &MemoryChannel,
        space: CsmSpace,
        mail: Arc<Mailboxes>,
        site: &Site,
    ) -> Result<DmsData, CsmError> {
        let me = site.me;
        let mut to_home = Vec::with_capacity(space.nodes as usize);
        let mut master = None;
        for n in 0..space.nodes {
            let id = mc.region_alloc(KEY_HOME + n, space.heap_bytes(), false)?;
            if n == me {
                master = Some(site.receive(mc, id, false)?);
            }
            to_home.push(site.transmit_to(mc, id, n)?);
        }
        Ok(DmsData {
            space,
            me,
            to_home,
            master: master.expect("this node is one of the nodes"),
            requests: MailRequests::new(me, mail.clone()),
            mail,
        })
    }

    fn page_off(&self, page: u32) -> usize {
        page as usize * self.space.page_size as usize
    }
}

/// The bytes of a slice of words, as the Memory Channel carries them
/// (little-endian: the only byte order this crate is built for).
fn word_bytes(words: &[u32]) -> &[u8] {
    const _: () = assert!(cfg!(target_endian = "little"));
    // SAFETY: u32 has no padding and every byte pattern is a valid u8; the
    // length in bytes is 4 times the length in words, and u8 needs no
    // alignment. The result borrows `words`.
    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, 4 * words.len()) }
}

impl DataPropagation for DmsData {
    fn write_diff(
        &self,
        home: u32,
        page: u32,
        current: &[u32],
        runs: &[Range<usize>],
    ) -> Result<usize, CsmError> {
        // Remote writes straight into the master copy (the home's receive
        // mapping), one record per run: the seed's programmed-I/O diff.
        let base = self.page_off(page);
        let recs: Vec<(usize, &[u8])> = runs
            .iter()
            .map(|r| (base + 4 * r.start, word_bytes(&current[r.clone()])))
            .collect();
        self.to_home[home as usize].write_many(&recs)?;
        Ok(runs.iter().map(|r| 4 * r.len()).sum())
    }

    fn write_page(&self, page: u32, data: &[u8]) -> Result<(), CsmError> {
        self.to_home[self.me as usize].post(self.page_off(page), data)?;
        Ok(())
    }

    fn master_addr(&self, page: u32) -> Option<*const u8> {
        let off = self.page_off(page);
        if off + self.space.page_size as usize > self.master.len() {
            return None;
        }
        // SAFETY: `off` is within the receive mapping (checked above).
        Some(unsafe { self.master.as_ptr().add(off) })
    }

    fn read_master(&self, page: u32, out: &mut [u8]) -> Result<(), CsmError> {
        self.master.read(self.page_off(page), out)?;
        Ok(())
    }

    mail_request_methods!(requests, mail);
}
