//! CSM-MS data propagation (seed 000 s.2.3.1.2): shared data is not in
//! Memory Channel space. A page's master copy is its home's working copy in
//! the heap, which the home's threads write directly; a diff goes to the
//! home as a message (its body in the sender's slot of the home's mailbox,
//! then a request word), which the home applies and acknowledges ("diff
//! messages, which require processing assistance from the home node and
//! explicit acknowledgments to establish ordering"). Page fetches are
//! request/reply through the mailboxes, as in CSM-DMS. Metadata and
//! synchronisation stay on Memory Channel (`dms_meta`, `dms_sync`).
//!
//! Diffs are sent one at a time, each acknowledged before the next: the
//! seed's pipelining of diffs to several homes is not built.

use std::sync::{Arc, Mutex};

use super::site::Site;

use super::mailbox::Mailboxes;
use super::messages::{checksum, mail_request_methods, MailRequests, ReplySlot};
use super::seams::DataPropagation;
use super::space::CsmSpace;
use super::twin::{self, Diff, DIFF_HEADER};
use super::vm::HeapMemory;
use super::CsmError;

/// A diff message's body and its length.
type Body = (Box<[u8]>, usize);

pub struct MsData {
    space: CsmSpace,
    me: u32,
    heap: Arc<HeapMemory>,
    mail: Arc<Mailboxes>,
    /// Request/reply through the mailboxes, as every variant.
    messages: MailRequests,
    /// Per home, the body of the diff message in flight to it (room for a
    /// page of one-word runs), kept for a retry: diffs to different homes
    /// are in flight together (`release`).
    bodies: Box<[Mutex<Body>]>,
}

impl MsData {
    pub fn new(
        site: &Site,
        space: CsmSpace,
        mail: Arc<Mailboxes>,
        heap: Arc<HeapMemory>,
    ) -> Result<MsData, CsmError> {
        let slot = mail.at().message_bytes();
        Ok(MsData {
            space,
            me: site.me,
            heap,
            messages: MailRequests::new(site.me, mail.clone()),
            mail,
            bodies: (0..space.nodes)
                .map(|_| Mutex::new((vec![0u8; slot].into_boxed_slice(), 0)))
                .collect(),
        })
    }

    fn page_off(&self, page: u32) -> usize {
        page as usize * self.space.page_size as usize
    }
}

/// The checksum of a diff message's body (no sequence number: the body is
/// posted again unchanged on a retry).
fn body_checksum(page: u32, body: &[u8]) -> u64 {
    checksum(0, page, body)
}

impl DataPropagation for MsData {
    fn write_diff(
        &self,
        home: u32,
        page: u32,
        current: &[u32],
        diff: &Diff,
    ) -> Result<usize, CsmError> {
        let mut b = self.bodies[home as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let (buf, len) = &mut *b;
        *len = twin::encode_runs(current, diff, buf, |x| body_checksum(page, x));
        self.mail
            .post(home, self.mail.at().message(self.me), &buf[..*len])?;
        // The words the message carries (masks and run headers aside).
        Ok(diff.runs().iter().map(|r| 4 * r.len()).sum())
    }

    fn diffs_are_messages(&self) -> bool {
        true
    }

    fn repost_diff(&self, home: u32, to: u32) -> Result<(), CsmError> {
        let b = self.bodies[home as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.mail
            .post(to, self.mail.at().message(self.me), &b.0[..b.1])
    }

    fn take_diff(&self, from: u32, page: u32, buf: &mut [u8]) -> Result<bool, CsmError> {
        let at = self.mail.at().message(from);
        self.mail.read(at, &mut buf[..DIFF_HEADER])?;
        let len = DIFF_HEADER + twin::message_body_len(buf);
        if len > buf.len() {
            return Ok(false);
        }
        self.mail.read(at, &mut buf[..len])?;
        let base = self.page_off(page);
        let words = self.space.page_size as usize / 4;
        // Only the changed bytes, one store per word or byte, so local
        // threads writing other bytes of the page meanwhile lose nothing (a
        // data-race-free program writes disjoint bytes between
        // synchronisations).
        Ok(twin::decode_runs(
            &buf[..len],
            words,
            |x| body_checksum(page, x),
            |i, w, mask| self.heap.write_masked(base + 4 * i, w, mask),
        ))
    }

    fn master_in_heap(&self) -> bool {
        true
    }

    fn write_page(&self, page: u32, data: &[u8]) -> Result<(), CsmError> {
        self.heap.write_bytes(self.page_off(page), data);
        Ok(())
    }

    fn master_addr(&self, _page: u32) -> Option<*const u8> {
        None
    }

    fn read_master(&self, page: u32, out: &mut [u8]) -> Result<(), CsmError> {
        self.heap.read_bytes(self.page_off(page), out);
        Ok(())
    }

    mail_request_methods!(messages, mail);
}
