//! CSM-DMS data propagation (seed 000 s.2.3.1.1 "Data"): a page's master
//! copy is its home's receive mapping (seed 000: "the home node creates a
//! receive mapping for the page. All other nodes create a transmit
//! mapping"). The shared heap is mapped into Memory Channel space once, as
//! one home region the size of the heap, so the space Cashmere needs "is
//! not affected by system size": page p's master copy is at
//! `p * page_size` in it. Every machine transmits into the whole region
//! (broadcast, with loopback for its own master copies), and receives only
//! the pages one of its protocol nodes is home of: the receive bit of the
//! other pages' entries is off, so their stores are not kept there. A node
//! turns its page's receive on before it claims the home (first touch) or,
//! for imposed homes, before the start barrier: before any diff for it can
//! be sent. Diffs are remote writes into the master copy, so no processor
//! at the home takes part. A page fetch is a request word in the home's
//! mailbox and a reply in the requester's (`mailbox`), each store of which
//! wakes its receiver only.
//!
//! Only CSM-DMS keeps data in Memory Channel space, and its homes never
//! move (home migration is for the variants whose data travels by message,
//! seed 000 s.2.3.2), so a page's receive mapping is set once.

use std::sync::Arc;

use mc_api::{MemoryChannel, RxRegion, TxRegion};

use super::homes::HomeAssignment;
use super::mailbox::Mailboxes;
use super::messages::{mail_request_methods, MailRequests, ReplySlot};
use super::seams::DataPropagation;
use super::site::Site;
use super::space::{CsmSpace, KEY_HOME};
use super::twin::Diff;
use super::CsmError;

pub struct DmsData {
    space: CsmSpace,
    /// Memory Channel page size: the unit of a receive mapping.
    mc_page: u32,
    /// Transmit mapping of the home region: to every machine, with
    /// loopback; only the page's home receives it.
    to_home: Arc<TxRegion>,
    /// This machine's receive mapping of the home region (shared by its
    /// processors in 1L): the master copies of the pages its nodes are
    /// home of.
    master: Arc<RxRegion>,
    mail: Arc<Mailboxes>,
    requests: MailRequests,
}

impl DmsData {
    /// Allocate (or find) the home region, attach it for transmit and for
    /// receive of nothing yet, then receive the pages `imposed` makes this
    /// node home of. Before the start barrier, like the mailboxes: a store
    /// into a page nobody receives is not kept.
    pub fn new(
        mc: &MemoryChannel,
        space: CsmSpace,
        mail: Arc<Mailboxes>,
        site: &Site,
        imposed: Option<&HomeAssignment>,
    ) -> Result<DmsData, CsmError> {
        let me = site.me;
        let id = mc.region_alloc(KEY_HOME, space.heap_bytes(), false)?;
        let master = site.receive_pages(mc, id)?;
        let to_home = site.transmit_all(mc, id)?;
        let d = DmsData {
            space,
            mc_page: mc.layout().page_size,
            to_home,
            master,
            requests: MailRequests::new(me, mail.clone()),
            mail,
        };
        if let Some(h) = imposed {
            for (p, home) in h.homes.iter().enumerate() {
                if *home == Some(me) {
                    d.receive_page(u32::try_from(p).expect("a page number fits u32"))?;
                }
            }
        }
        Ok(d)
    }

    fn page_off(&self, page: u32) -> usize {
        page as usize * self.space.page_size as usize
    }

    /// Receive the stores into page `page`'s master copy: the Memory
    /// Channel pages it lies on (with pages smaller than the Memory
    /// Channel's, the pages sharing one are received together; the others'
    /// stores land in memory their home is not, and nobody reads).
    fn receive_page(&self, page: u32) -> Result<(), CsmError> {
        let (ps, mp) = (u64::from(self.space.page_size), u64::from(self.mc_page));
        let first = u64::from(page) * ps / mp;
        let end = (u64::from(page) + 1) * ps;
        let count = end.div_ceil(mp) - first;
        self.master.set_receiving(
            u32::try_from(first).expect("an MC page of a 1 GiB space fits u32"),
            u32::try_from(count).expect("a page's MC pages fit u32"),
            true,
        )?;
        Ok(())
    }
}

/// The bytes of a slice of words, as the Memory Channel carries them
/// (little-endian: the only byte order this crate is built for).
fn word_bytes(words: &[u32]) -> &[u8] {
    const _: () = assert!(cfg!(target_endian = "little"));
    // SAFETY: u32 has no padding and every byte pattern is a valid u8; the
    // length in bytes is 4 times the length in words, and u8 needs no
    // alignment. The result borrows `words`.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), 4 * words.len()) }
}

impl DataPropagation for DmsData {
    fn write_diff(
        &self,
        home: u32,
        page: u32,
        current: &[u32],
        diff: &Diff,
    ) -> Result<usize, CsmError> {
        // Remote writes straight into the master copy (the home's receive
        // mapping), one record per run of changed bytes: the seed's
        // programmed-I/O diff, at byte granularity (`twin::Diff`).
        let base = self.page_off(page);
        let bytes = word_bytes(current);
        let mut runs = Vec::new();
        diff.byte_runs(&mut runs);
        let recs: Vec<(usize, &[u8])> = runs
            .iter()
            .map(|r| (base + r.start, &bytes[r.clone()]))
            .collect();
        // Every machine is sent the runs; only the page's home receives them.
        let _ = home;
        self.to_home.write_many(&recs)?;
        Ok(runs.iter().map(|r| r.len()).sum())
    }

    fn prepare_home(&self, page: u32) -> Result<(), CsmError> {
        self.receive_page(page)
    }

    fn write_page(&self, page: u32, data: &[u8]) -> Result<(), CsmError> {
        self.to_home.post(self.page_off(page), data)?;
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
