//! What a node does whenever it waits: answer other nodes' page requests
//! (leaving Exclusive mode first when the page is held so) and take in the
//! write notices that have arrived (seed 002 s.4.3).

use crate::node::Node;
use crate::seams::DirectoryState;
use crate::state::{PageState, State};
use crate::vm::Prot;
use crate::CsmError;

impl Node {
    /// What a node does whenever it waits: answer requests, drain notices.
    pub(crate) fn poll_others(&self, st: &mut State) -> Result<(), CsmError> {
        self.serve_requests(st)?;
        self.drain_notices(st)
    }

    pub(crate) fn serve_requests(&self, st: &mut State) -> Result<(), CsmError> {
        for r in 0..self.nodes {
            if r == self.me {
                continue;
            }
            let Some((seq, p)) = self.data.poll_request(r) else {
                continue;
            };
            if seq == st.served[r as usize] {
                continue;
            }
            st.served[r as usize] = seq;
            st.stats.messages_served += 1;
            if p == u32::MAX {
                self.data.send_reply(r, seq, p, None)?;
                continue;
            }
            if p as usize >= st.pages.len() {
                return Err(CsmError::BadRequest { from: r, page: p });
            }
            if st.pages[p as usize].state == PageState::Exclusive {
                self.leave_exclusive(st, p)?;
            }
            let mut buf = vec![0u8; self.ps()];
            self.data.read_master(p, &mut buf)?;
            self.data.send_reply(r, seq, p, Some(&buf))?;
        }
        Ok(())
    }

    /// Another node wants a page this home holds exclusively: stop local
    /// writers, publish the working copy as the master copy, go to Read.
    fn leave_exclusive(&self, st: &mut State, p: u32) -> Result<(), CsmError> {
        self.set_prot(p, Prot::Read)?;
        let mut buf = vec![0u8; self.ps()];
        self.heap.read_bytes(p as usize * self.ps(), &mut buf);
        self.data.write_page(p, &buf)?;
        self.meta.set_exclusive(p, self.me, false)?;
        self.meta.set_state(p, DirectoryState::Read)?;
        st.pages[p as usize].state = PageState::Read;
        st.stats.exclusive_exits += 1;
        Ok(())
    }

    pub(crate) fn drain_notices(&self, st: &mut State) -> Result<(), CsmError> {
        let mut got = Vec::new();
        self.meta.drain_notices(&mut got)?;
        st.stats.write_notices_received += got.len() as u64;
        for p in got {
            let pg = &mut st.pages[p as usize];
            if pg.notice_at == 0 {
                st.pending.push(p);
            }
            pg.notice_at = st.clock;
        }
        Ok(())
    }
}
