//! Acquire (seed 002 s.3.2): invalidate the pages write notices name, unless
//! the page's copy is newer than the notice (the timestamps of seed 000
//! s.2.1), or update a page local threads are writing in place by an incoming
//! diff (seed 000 s.2.1), which stops nobody.
//!
//! The notices an acquire must see are there: they were sent before the
//! synchronisation store the acquire saw (the lock's release, the barrier's
//! sense, the flag), in the sender's FIFO order, and this node receives in
//! the one total order.

use super::Node;
use crate::seams::DirectoryState;
use crate::state::{PageState, ProtocolState};
use crate::times::{self, Activity};
use crate::twin;
use crate::vm::Prot;
use crate::CsmError;

impl Node {
    /// Acquire (seed 002 s.3.2): take the notices that have arrived and
    /// invalidate those pages, flushing a dirty one first. A notice older than
    /// the page's last fetch is already reflected in it and is skipped (the
    /// timestamps of seed 000 s.2.1).
    pub(crate) fn acquire(&self, st: &mut ProtocolState) -> Result<(), CsmError> {
        let _acquire = times::enter(Activity::Acquire);
        st.clock += 1;
        st.stats.acquires += 1;
        self.drain_notices(st)?;
        let mut i = 0;
        // Pages noticed meanwhile (an incoming diff's fetch answers drain
        // requests) join the list and are handled too.
        while i < st.pending.len() {
            let p = st.pending[i];
            i += 1;
            let pg = &mut st.pages[p as usize];
            let noticed = pg.notice_at;
            pg.notice_at = 0;
            // A home writing its master copy directly holds the current
            // copy: the diffs the notice announces have landed in it (they
            // were sent before the synchronisation store this acquire saw).
            if noticed == 0 || pg.fetched_at > noticed || pg.direct {
                continue;
            }
            match pg.state {
                PageState::Invalid | PageState::Exclusive => continue,
                PageState::ReadWrite if self.choices.incoming_diffs() && pg.twinned => {
                    // Other threads of this node may be writing the page
                    // right now: update it in place rather than stop them.
                    self.incoming_diff(st, p)?;
                    continue;
                }
                PageState::Read | PageState::ReadWrite => {}
            }
            self.set_prot(p, Prot::None)?;
            // Its notices go out at the next release: it stays dirty.
            self.flush(st, p)?;
            st.pages[p as usize].state = PageState::Invalid;
            // After the diff in FIFO order: a home that sees this node
            // Invalid has the diff.
            self.meta.set_state(p, DirectoryState::Invalid)?;
            if self.meta.messages().is_some() {
                // Message-based metadata: the home learns it by a message
                // (seed 000 s.2.3.1.3, seed 002 s.4.1), after the diff.
                let home = self.home_of(st, p)?;
                if home != self.me {
                    self.fetch(st, home, crate::messages::Request::Invalid(p), &mut [])?;
                }
            }
            st.stats.invalidations += 1;
        }
        st.pending.clear();
        Ok(())
    }

    /// The incoming-diff page update (seed 000 s.2.1): fetch the page and
    /// write into the working copy and the twin only the words where the
    /// home's copy differs from the twin, which for a data-race-free program
    /// are the remote writes this acquire must make visible. The page keeps
    /// its protection and its place on the dirty list; local threads go on
    /// writing throughout, and their words are flushed at the next release.
    ///
    /// With one shared mapping per node this happens at the acquire, not at
    /// the next access: the page is never made inaccessible, so there is no
    /// fault to defer it to.
    fn incoming_diff(&self, st: &mut ProtocolState, p: u32) -> Result<(), CsmError> {
        st.clock += 1;
        let stamp = st.clock;
        st.clock += 1;
        let mut buf = std::mem::take(&mut st.fetch_buf);
        let r = self.home_copy(st, p, &mut buf);
        if r.is_ok() {
            let base = p as usize * self.ps();
            // SAFETY: page p's twin; this thread holds the node's state.
            let twin = unsafe { self.copies.twins().twin(p as usize) };
            let mut incoming = std::mem::take(&mut st.incoming);
            for (w, b) in incoming.iter_mut().zip(buf.chunks_exact(4)) {
                *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
            let words = twin::apply_incoming(&incoming, twin, |i, w, mask| {
                self.heap().write_masked(base + 4 * i, w, mask)
            });
            st.incoming = incoming;
            st.pages[p as usize].fetched_at = stamp;
            st.stats.incoming_diffs += 1;
            st.stats.incoming_diff_words += words as u64;
        }
        st.fetch_buf = buf;
        r
    }
}
