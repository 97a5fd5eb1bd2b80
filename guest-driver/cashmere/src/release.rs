//! Release (seed 002 s.3.3): flush every dirty page to its home as a diff
//! against its twin, then send write notices to the other sharers.

use mc_api::backoff::Backoff;

use crate::node::{Node, WAIT_POLICY};
use crate::seams::DirectoryState;
use crate::state::{PageState, State};
use crate::twin::diff;
use crate::vm::Prot;
use crate::CsmError;

impl Node {
    /// Diff a twinned page against its twin and write the diff to the home.
    /// The caller has already taken write permission away.
    pub(crate) fn flush(&self, st: &mut State, p: u32) -> Result<(), CsmError> {
        let Some(mut twin) = st.pages[p as usize].twin.take() else {
            return Ok(());
        };
        let home = self.home_of(st, p)?;
        let mut cur = vec![0u32; twin.len()];
        self.heap.read_words(p as usize * self.ps(), &mut cur);
        let runs = diff(&cur, &mut twin);
        if !runs.is_empty() {
            let bytes = self.data.write_diff(home, p, &runs)?;
            st.stats.diffs += 1;
            st.stats.diff_bytes += bytes as u64;
        }
        st.twins.give(twin);
        Ok(())
    }

    /// Release (seed 002 s.3.3): flush every dirty page to its home, then send
    /// write notices to the other sharers. Total order makes each diff visible
    /// before the notices and before the synchronisation write that follows.
    pub(crate) fn release(&self, st: &mut State) -> Result<(), CsmError> {
        st.clock += 1;
        st.stats.releases += 1;
        let dirty = std::mem::take(&mut st.dirty);
        let mut notices: Vec<Vec<u32>> = vec![Vec::new(); self.nodes as usize];
        for &p in &dirty {
            if st.pages[p as usize].twin.is_some() {
                self.set_prot(p, Prot::Read)?;
                self.flush(st, p)?;
                st.pages[p as usize].state = PageState::Read;
                self.meta.set_state(p, DirectoryState::Read)?;
            }
            st.pages[p as usize].dirty = false;
            for n in 0..self.nodes {
                if n != self.me && self.meta.state_of(p, n) != DirectoryState::Invalid {
                    notices[n as usize].push(p);
                }
            }
        }
        for (n, list) in notices.iter().enumerate() {
            let mut sent = 0;
            let mut backoff = Backoff::with_policy(WAIT_POLICY);
            while sent < list.len() {
                let k = self.meta.send_notices(n as u32, &list[sent..])?;
                sent += k;
                st.stats.write_notices_sent += k as u64;
                if k == 0 {
                    // The receiver's bin is full: keep answering while it drains.
                    self.poll_others(st)?;
                    backoff.snooze();
                }
            }
        }
        Ok(())
    }
}
