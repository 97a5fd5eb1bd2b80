//! Release (seed 002 s.3.3): flush every dirty page to its home as a diff
//! against its twin, then send write notices to the other sharers.
//!
//! Ordering (docs/cashmere.md, "Ordering"): the diffs, then the notices,
//! then whatever synchronisation store the caller makes (lock release,
//! barrier arrival, flag) leave in that order from this node's FIFO, so any
//! node that sees the synchronisation store has every notice sent to it
//! before, and any home has the diffs before it sees a request made after
//! it (total order). One wait: the sharing set is read only once this
//! node's echo, posted after the diffs, is back, so every directory word
//! ordered before the diffs is in this node's replica. A node that joined
//! the sharing set before our diff in the total order asked the home before
//! it too, so its copy may lack our diff: it must get a notice, and now it
//! does. A node that joined after will get a copy with our diff.
//!
//! With message-based metadata (CSM-S, `msg_meta`) the sharing set of a
//! diffed page comes with the diff's acknowledgement instead (the home
//! serialises the diff with the page requests it answers), and each
//! receiver's notices are a message it acknowledges after taking them.

use crate::messages::Request;
use crate::node::Node;
use crate::seams::{DirectoryState, ENTRY_BYTES};
use crate::state::{PageState, ProtocolState};
use crate::times::{self, Activity};
use crate::twin::diff;
use crate::vm::Prot;
use crate::CsmError;

impl Node {
    /// Diff a twinned page against its twin and write the runs to the home.
    /// The caller has already taken write permission away (the page cannot
    /// change under the diff).
    pub(crate) fn flush(&self, st: &mut ProtocolState, p: u32) -> Result<(), CsmError> {
        if !st.pages[p as usize].twinned {
            return Ok(());
        }
        let home = self.home_of(st, p)?;
        let mut words = std::mem::take(&mut st.words);
        let mut runs = std::mem::take(&mut st.runs);
        self.heap.read_words(p as usize * self.ps(), &mut words);
        // SAFETY: page p's twin; this thread holds the node's state.
        let twin = unsafe { self.twins.twin(p as usize) };
        diff(&words, twin, &mut runs);
        let r = if runs.is_empty() {
            Ok(0)
        } else {
            self.data.write_diff(home, p, &words, &runs)
        };
        st.words = words;
        st.runs = runs;
        let bytes = r?;
        if bytes > 0 && self.data.diffs_are_messages() {
            self.diff_message_acked(st, home, p)?;
        }
        if bytes > 0 {
            st.stats.diffs += 1;
            st.stats.diff_bytes += bytes as u64;
            if home == self.me {
                st.stats.home_diffs += 1;
                self.stored_own_master(st, p);
            }
        }
        st.pages[p as usize].twinned = false;
        Ok(())
    }

    /// The request that delivers the diff message for `p` already posted
    /// to `home`, and its acknowledgement: the diff is applied before
    /// anything that follows it (the write notices, the release store;
    /// seed 000 s.2.3.1.2). With message-based metadata the acknowledgement
    /// carries the page's sharing set, which the notices go to
    /// (s.2.3.1.3).
    pub(crate) fn diff_message_acked(
        &self,
        st: &mut ProtocolState,
        home: u32,
        p: u32,
    ) -> Result<(), CsmError> {
        match self.meta.messages() {
            Some(m) => {
                let mut entry = [0u8; ENTRY_BYTES];
                self.fetch(st, home, Request::Diff(p), &mut entry)?;
                m.learn_entry(p, &entry);
                Ok(())
            }
            None => self.fetch(st, home, Request::Diff(p), &mut []),
        }
    }

    /// Release (seed 002 s.3.3): flush every dirty page to its home, then
    /// send write notices to the other sharers.
    pub(crate) fn release(&self, st: &mut ProtocolState) -> Result<(), CsmError> {
        let _diff = times::enter(Activity::Diff);
        st.clock += 1;
        st.stats.releases += 1;
        if st.dirty.is_empty() {
            return Ok(());
        }
        // Both lists have room for every page: swapping keeps it.
        std::mem::swap(&mut st.dirty, &mut st.releasing);
        for i in 0..st.releasing.len() {
            let p = st.releasing[i];
            let pg = &st.pages[p as usize];
            if pg.twinned {
                self.set_prot(p, Prot::Read)?;
                self.flush(st, p)?;
                st.pages[p as usize].state = PageState::Read;
                self.meta.set_state(p, DirectoryState::Read)?;
            } else if pg.direct && pg.state == PageState::ReadWrite {
                // The home wrote its master copy directly: nothing to diff.
                // Read again, so the next interval's writes fault and get
                // their notices too.
                self.set_prot(p, Prot::Read)?;
                st.pages[p as usize].state = PageState::Read;
                st.stale[p as usize] = u64::MAX;
                if self.migration {
                    // No longer writing: it may migrate (seed 000 s.2.3.2).
                    self.meta.set_state(p, DirectoryState::Read)?;
                }
            }
            st.pages[p as usize].dirty = false;
        }
        let mark = self.data.post_echo()?;
        st.stats.echo_waits += 1;
        self.await_echo(Some(st), mark)?;
        let mut notices: Vec<Vec<u32>> = vec![Vec::new(); self.nodes as usize];
        for &p in &st.releasing {
            for n in 0..self.nodes {
                if n != self.me && self.meta.state_of(p, n) != DirectoryState::Invalid {
                    notices[n as usize].push(p);
                }
            }
        }
        st.releasing.clear();
        for (n, list) in notices.iter().enumerate() {
            let mut sent = 0;
            while sent < list.len() {
                let k = self.meta.send_notices(n as u32, &list[sent..])?;
                if k > 0 && self.meta.messages().is_some() {
                    // A notices message: taken by the receiver before its
                    // acknowledgement, so before this release's store.
                    self.fetch(st, n as u32, Request::Notices(k as u32), &mut [])?;
                }
                sent += k;
                st.stats.write_notices_sent += k as u64;
                if k == 0 {
                    // The receiver's bin is full: ask it to drain (seed 002
                    // s.4.3), answering requests while it does.
                    st.stats.drain_requests += 1;
                    self.fetch(st, n as u32, Request::Drain, &mut [])?;
                }
            }
        }
        Ok(())
    }
}
