//! Acquire (seed 002 s.3.2): invalidate the pages write notices name, unless
//! the page's copy is newer than the notice (the timestamps of seed 000
//! s.2.1), or update a page local threads are writing in place by an incoming
//! diff (seed 000 s.2.1), which stops nobody.

use crate::node::Node;
use crate::seams::DirectoryState;
use crate::state::{PageState, State};
use crate::twin;
use crate::vm::Prot;
use crate::CsmError;

impl Node {
    /// Acquire (seed 002 s.3.2): take the notices that have arrived and
    /// invalidate those pages, flushing a dirty one first. A notice older than
    /// the page's last fetch is already reflected in it and is skipped (the
    /// timestamps of seed 000 s.2.1).
    pub(crate) fn acquire(&self, st: &mut State) -> Result<(), CsmError> {
        st.clock += 1;
        st.stats.acquires += 1;
        self.drain_notices(st)?;
        let pending = std::mem::take(&mut st.pending);
        for p in pending {
            let pg = &mut st.pages[p as usize];
            let noticed = pg.notice_at;
            pg.notice_at = 0;
            if pg.fetched_at > noticed {
                continue;
            }
            match pg.state {
                PageState::Invalid | PageState::Exclusive => continue,
                PageState::ReadWrite if self.incoming_diffs && pg.twin.is_some() => {
                    // Other threads of this node may be writing the page
                    // right now: update it in place rather than stop them.
                    self.incoming_diff(st, p)?;
                    continue;
                }
                PageState::Read | PageState::ReadWrite => {}
            }
            self.set_prot(p, Prot::None)?;
            self.flush(st, p)?;
            st.pages[p as usize].state = PageState::Invalid;
            self.meta.set_state(p, DirectoryState::Invalid)?;
            st.stats.invalidations += 1;
        }
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
    fn incoming_diff(&self, st: &mut State, p: u32) -> Result<(), CsmError> {
        st.clock += 1;
        let stamp = st.clock;
        st.clock += 1;
        let buf = self.home_copy(st, p)?;
        let incoming: Vec<u32> = buf
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let base = p as usize * self.ps();
        let pg = &mut st.pages[p as usize];
        let Some(twin) = pg.twin.as_mut() else {
            return Err(CsmError::NoTwin { page: p });
        };
        let words = twin::apply_incoming(&incoming, twin, |i, w| {
            self.heap.write_word(base + 4 * i, w)
        });
        pg.fetched_at = stamp;
        st.stats.incoming_diffs += 1;
        st.stats.incoming_diff_words += words as u64;
        Ok(())
    }
}
