//! Resolving page faults (seed 002 s.3.1, seed 000 s.2.1) on the protocol
//! thread: a read fault fetches the page from its home; a write fault makes a
//! twin and puts the page on the dirty list, or, at a home with no other
//! sharer, enters Exclusive mode (no twin, no diffs).

use crate::node::Node;
use crate::seams::DirectoryState;
use crate::sigsegv::Fault;
use crate::state::{PageState, State};
use crate::vm::Prot;
use crate::CsmError;

impl Node {
    /// Resolve one fault handed over by the SIGSEGV handler.
    pub(crate) fn handle_fault(&self, st: &mut State, f: &Fault) -> Result<(), CsmError> {
        let p = (f.offset / self.ps()) as u32;
        let now = match st.pages[p as usize].state {
            PageState::Invalid => Prot::None,
            PageState::Read => Prot::Read,
            PageState::ReadWrite | PageState::Exclusive => Prot::ReadWrite,
        };
        if now == Prot::ReadWrite || now as u8 > f.prot {
            // Another thread's fault already upgraded the page: just retry.
            // (The protection a fault records can be stale by a moment: it is
            // stored just after the mprotect, so a thread that faulted while
            // a release was downgrading the page may report read-write.)
            return Ok(());
        }
        if now == Prot::None {
            // A write to an invalid page faults again once readable.
            self.read_fault(st, p)
        } else {
            self.write_fault(st, p)
        }
    }

    fn read_fault(&self, st: &mut State, p: u32) -> Result<(), CsmError> {
        st.clock += 1;
        st.stats.read_faults += 1;
        // The copy is at least as new as this moment. Notices taken while the
        // request is in flight get a later stamp, so the acquire that follows
        // still invalidates the page: the home may have read its master copy
        // before the diff those notices announce arrived.
        let stamp = st.clock;
        st.clock += 1;
        self.meta.set_state(p, DirectoryState::Read)?;
        let buf = self.home_copy(st, p)?;
        self.heap.write_bytes(p as usize * self.ps(), &buf);
        st.pages[p as usize].fetched_at = stamp;
        st.pages[p as usize].state = PageState::Read;
        self.set_prot(p, Prot::Read)
    }

    fn write_fault(&self, st: &mut State, p: u32) -> Result<(), CsmError> {
        st.clock += 1;
        st.stats.write_faults += 1;
        let home = self.home_of(st, p)?;
        let alone = (0..self.nodes)
            .filter(|&n| n != self.me)
            .all(|n| self.meta.state_of(p, n) == DirectoryState::Invalid);
        self.meta.set_state(p, DirectoryState::ReadWrite)?;
        if home == self.me && alone && self.exclusive_mode {
            // In Read state every local write has been flushed, so the master
            // copy holds all the working copy does, and maybe diffs that a
            // former sharer flushed as it invalidated (their notices come at
            // its next release). Take them now: leaving Exclusive publishes
            // the whole working copy.
            let mut buf = vec![0u8; self.ps()];
            self.data.read_master(p, &mut buf)?;
            self.heap.write_bytes(p as usize * self.ps(), &buf);
            st.stats.home_refreshes += 1;
            self.meta.set_exclusive(p, self.me, true)?;
            st.stats.exclusive_entries += 1;
            st.pages[p as usize].state = PageState::Exclusive;
        } else {
            let words = self.ps() / 4;
            let mut twin = st.twins.take(words);
            self.heap.read_words(p as usize * self.ps(), &mut twin);
            st.stats.twins += 1;
            let pg = &mut st.pages[p as usize];
            pg.twin = Some(twin);
            pg.state = PageState::ReadWrite;
            if !pg.dirty {
                pg.dirty = true;
                st.dirty.push(p);
            }
        }
        self.set_prot(p, Prot::ReadWrite)
    }

    /// The master copy of a page: read locally at its home, fetched from a
    /// remote home.
    pub(crate) fn home_copy(&self, st: &mut State, p: u32) -> Result<Vec<u8>, CsmError> {
        let home = self.home_of(st, p)?;
        let mut buf = vec![0u8; self.ps()];
        if home == self.me {
            self.data.read_master(p, &mut buf)?;
            st.stats.home_refreshes += 1;
        } else {
            self.fetch(st, home, p, &mut buf)?;
        }
        Ok(buf)
    }
}
