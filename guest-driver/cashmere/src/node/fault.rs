//! Resolving page faults (seed 002 s.3.1, seed 000 s.2.1), on the faulting
//! thread itself, inside the SIGSEGV handler (`sigsegv` says why that is
//! safe): a read fault fetches the page from its home; a write fault makes a
//! twin and puts the page on the dirty list, or, at a home with no other
//! sharer, enters Exclusive mode (no twin, no diffs). A home whose working
//! copy is its master copy (`PageInfo::direct`) never fetches, twins or
//! diffs its pages (seed 000 s.2.3.2).
//!
//! Nothing here allocates: the page arrives straight into the protocol view
//! of the heap (its application view is inaccessible meanwhile), twins live
//! in the twin space, the lists have room for every page, and stores go
//! through the allocation-free `TxRegion::post`.

use super::Node;
use crate::messages::{Request, DENIED, WITH_PAGE};
use crate::seams::DirectoryState;
use crate::sigsegv::FaultHandler;
use crate::state::{PageState, ProtocolState};
use crate::times::{self, Activity};
use crate::twin;
use crate::vm::Prot;
use crate::CsmError;

impl Node {
    /// Resolve a fault at heap byte `offset` (called by the SIGSEGV handler
    /// on the faulting thread). On return the access may be retried.
    pub(super) fn resolve_fault(&self, offset: usize) -> Result<(), CsmError> {
        let p = u32::try_from(offset / self.ps()).expect("a page number fits u32");
        // The protection the page had when it faulted, read before the state
        // is taken: another thread may upgrade it meanwhile.
        let at_fault = self.copies.protection(p);
        let _fault = times::enter(Activity::Fault);
        let mut st = self.lock_state();
        let now = match st.pages[p as usize].state {
            PageState::Invalid => Prot::None,
            PageState::Read => Prot::Read,
            PageState::ReadWrite | PageState::Exclusive => Prot::ReadWrite,
        };
        if now == Prot::ReadWrite || now as u8 > at_fault {
            // Another thread's fault already upgraded the page: just retry.
            // (The recorded protection can be stale by a moment: it is stored
            // just after the mprotect, so a thread that faulted while a
            // release was downgrading the page may report read-write.)
            return Ok(());
        }
        if now == Prot::None {
            // A write to an invalid page faults again once readable.
            self.read_fault(&mut st, p)
        } else {
            self.write_fault(&mut st, p)
        }
    }

    fn read_fault(&self, st: &mut ProtocolState, p: u32) -> Result<(), CsmError> {
        st.clock += 1;
        st.stats.read_faults += 1;
        if self.home_of(st, p)? == self.me && st.pages[p as usize].direct {
            // The working copy is the master copy: nothing to fetch or
            // refresh, and no directory word (the home always holds the
            // current copy, so nobody sends it notices for the page), but
            // with migration, where the home's word tells others whether it
            // is writing the page.
            if self.choices.migration() {
                self.meta.set_state(p, DirectoryState::Read)?;
            }
            st.pages[p as usize].state = PageState::Read;
            return self.set_prot(p, Prot::Read);
        }
        // The copy is at least as new as this moment. Notices taken while the
        // request is in flight get a later stamp, so the acquire that follows
        // still invalidates the page: the home may have read its master copy
        // before the diff those notices announce arrived.
        let stamp = st.clock;
        st.clock += 1;
        // Into the sharing set before the request: the home sees this word
        // before the request (per-source FIFO, total order), and a releaser
        // that orders its diff after the word sees it too (its echo wait).
        self.meta.set_state(p, DirectoryState::Read)?;
        let ps = self.ps();
        // SAFETY: the page is Invalid: the application view cannot touch it,
        // and every other thread of the node that might is waiting for the
        // state, which this thread holds.
        let page = unsafe { self.heap().bytes_mut(p as usize * ps, ps) };
        self.home_copy(st, p, page)?;
        st.pages[p as usize].fetched_at = stamp;
        st.pages[p as usize].state = PageState::Read;
        self.set_prot(p, Prot::Read)
    }

    fn write_fault(&self, st: &mut ProtocolState, p: u32) -> Result<(), CsmError> {
        st.clock += 1;
        st.stats.write_faults += 1;
        let mut home = self.home_of(st, p)?;
        if self.choices.migration() && home != self.me && self.migrate_here(st, p, home)? {
            home = self.me;
        }
        // Another node whose word this replica does not show yet has not had
        // its request answered yet either (the word comes before the
        // request); when it comes, the home leaves Exclusive.
        let alone = (0..self.nodes)
            .filter(|&n| n != self.me)
            .all(|n| self.meta.state_of(p, n) == DirectoryState::Invalid);
        if home == self.me && st.pages[p as usize].direct {
            // Before the first write: no broadcast copy outlives it.
            self.adb_invalidate(st, p)?;
            if self.choices.migration() {
                self.meta.set_state(p, DirectoryState::ReadWrite)?;
            }
            // Every other copy lacks what this node now writes.
            st.stale.all_stale(p);
            // The home writes its master copy directly: no twin, no diff
            // (seed 000 s.2.3.2). Alone, it goes Exclusive (no notices
            // either, until a request comes); otherwise the page goes on the
            // dirty list for its write notices.
            if alone && self.choices.exclusive_mode() {
                self.meta.set_exclusive(p, self.me, true)?;
                st.stats.exclusive_entries += 1;
                st.pages[p as usize].state = PageState::Exclusive;
            } else {
                let pg = &mut st.pages[p as usize];
                pg.state = PageState::ReadWrite;
                if !pg.dirty {
                    pg.dirty = true;
                    st.dirty.push(p);
                }
            }
            return self.set_prot(p, Prot::ReadWrite);
        }
        self.meta.set_state(p, DirectoryState::ReadWrite)?;
        if home == self.me && alone && self.choices.exclusive_mode() {
            // In Read state every local write has been flushed, so the master
            // copy holds all the working copy does, and maybe diffs that a
            // former sharer flushed as it invalidated (their notices come at
            // its next release; its Invalid word, which we saw, came after
            // the diff). Take them now: leaving Exclusive publishes the whole
            // working copy.
            self.settle_own_master(st, p)?;
            let mut buf = std::mem::take(&mut st.fetch_buf);
            let r = self.data.read_master(p, &mut buf);
            if r.is_ok() {
                self.heap().write_bytes(p as usize * self.ps(), &buf);
            }
            st.fetch_buf = buf;
            r?;
            st.stats.home_refreshes += 1;
            self.meta.set_exclusive(p, self.me, true)?;
            st.stats.exclusive_entries += 1;
            st.pages[p as usize].state = PageState::Exclusive;
        } else {
            // SAFETY: the twin belongs to page p, and this thread holds the
            // node's state.
            let twin = unsafe { self.copies.twins().twin(p as usize) };
            self.heap().read_words(p as usize * self.ps(), twin);
            st.stats.twins += 1;
            let pg = &mut st.pages[p as usize];
            pg.twinned = true;
            pg.state = PageState::ReadWrite;
            if !pg.dirty {
                pg.dirty = true;
                st.dirty.push(p);
            }
        }
        self.set_prot(p, Prot::ReadWrite)
    }

    /// CSM-MS-Mg (seed 000 s.2.3.2, seed 002 s.3.1): at a write fault on a
    /// page whose home no thread is writing, as far as the directory shows
    /// (a hint: the home decides), ask to become its home. Granted, the
    /// page's copy here (readable, not writable: no local writer) is
    /// brought up to date from the reply if the old home's Stale vector
    /// said so, and this node writes it directly from now on: no twin, no
    /// diff. Returns whether it became the home.
    fn migrate_here(&self, st: &mut ProtocolState, p: u32, home: u32) -> Result<bool, CsmError> {
        if self.meta.state_of(p, home) == DirectoryState::ReadWrite {
            return Ok(false);
        }
        st.stats.migration_attempts += 1;
        let mut buf = std::mem::take(&mut st.fetch_buf);
        let reply = self.request(st, home, Request::Migrate(p), &mut buf);
        let granted = matches!(reply, Ok(w) if w & DENIED == 0);
        if granted && matches!(reply, Ok(w) if w & WITH_PAGE != 0) {
            let base = p as usize * self.ps();
            let mut words = std::mem::take(&mut st.words);
            self.heap().read_words(base, &mut words);
            let mut incoming = std::mem::take(&mut st.incoming);
            for (w, b) in incoming.iter_mut().zip(buf.chunks_exact(4)) {
                *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
            // Only the bytes that differ, as an incoming diff: local readers
            // see each word either old or new, never torn, and no byte is
            // written that the old home did not change.
            twin::merge_changed(&incoming, &mut words, |i, w, mask| {
                self.heap().write_masked(base + 4 * i, w, mask)
            });
            st.words = words;
            st.incoming = incoming;
        }
        st.fetch_buf = buf;
        reply?;
        if !granted {
            return Ok(false);
        }
        st.stats.migrations += 1;
        if let Some(m) = self.meta.messages() {
            m.became_home(p);
        }
        let pg = &mut st.pages[p as usize];
        pg.home = Some(self.me);
        pg.direct = true;
        pg.direct_tried = true;
        // Who holds which copy is not known here: all are stale.
        st.stale.all_stale(p);
        Ok(true)
    }

    /// The master copy of a page into `out`: read locally at its home,
    /// fetched from a remote home.
    ///
    /// The home reads its own master copy only once its own echo, posted
    /// after its directory word (it just joined the sharing set), is back:
    /// that is the moment a request of its own would have arrived. A diff
    /// ordered before the word has arrived by then; a diff ordered after it
    /// comes from a releaser whose echo wait shows it our word, so it sends
    /// us a write notice (`release`). Without the wait the home could read
    /// its copy before such an earlier diff lands, and get no notice for it.
    /// The same echo covers the home's own last store into the page.
    pub(super) fn home_copy(
        &self,
        st: &mut ProtocolState,
        p: u32,
        out: &mut [u8],
    ) -> Result<(), CsmError> {
        let home = self.home_of(st, p)?;
        if home == self.me {
            st.stats.echo_waits += 1;
            let mark = self.data.post_echo()?;
            self.await_echo(Some(st), mark)?;
            st.pages[p as usize].own_store_echo = 0;
            self.data.read_master(p, out)?;
            st.stats.home_refreshes += 1;
        } else if !self.adb_copy(st, p, out)? {
            self.fetch(st, home, Request::Page(p), out)?;
        }
        Ok(())
    }
}

/// The SIGSEGV handler resolves faults in the node's heap through this.
impl FaultHandler for Node {
    fn heap_view(&self) -> (usize, usize) {
        (self.heap().app_base() as usize, self.heap().len())
    }

    fn resolve_fault(&self, offset: usize) -> Result<(), crate::sigsegv::FaultError> {
        Node::resolve_fault(self, offset).map_err(Into::into)
    }

    fn abandon(&self) {
        self.sync.abort();
    }

    fn node_id(&self) -> u32 {
        self.me
    }
}
