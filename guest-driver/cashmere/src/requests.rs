//! Answering other nodes (seed 002 s.5): page requests (leaving Exclusive
//! mode first when the page is held so), null requests, and requests to
//! drain the write-notice bins; and taking in the write notices that have
//! arrived (seed 002 s.4.3).
//!
//! Whoever holds the node's state answers: the protocol thread, or a thread
//! that waits for something while holding the state (a fetch inside a fault,
//! a release waiting for its echo), so two nodes waiting for each other
//! both get answered. Allocation-free: the page goes out of the state's
//! answer buffer.

use std::sync::atomic::Ordering;

use crate::node::{diff_request, Node, DRAIN_PAGE, NULL_PAGE};
use crate::seams::DirectoryState;
use crate::state::{PageState, State};
use crate::vm::Prot;
use crate::CsmError;

impl Node {
    pub(crate) fn serve_requests(&self, st: &mut State) -> Result<(), CsmError> {
        // An answer may wait for this node's own echo, and a wait answers
        // requests: not again from inside an answer (its buffer is in use).
        // The requests left wait for the answer in hand.
        if st.serving {
            return Ok(());
        }
        st.serving = true;
        let r = self.serve_each(st);
        st.serving = false;
        r
    }

    fn serve_each(&self, st: &mut State) -> Result<(), CsmError> {
        for r in 0..self.nodes {
            if r == self.me {
                continue;
            }
            let (seq, p) = self.data.poll_request(r);
            if seq == st.served[r as usize] {
                continue;
            }
            st.served[r as usize] = seq;
            self.served[r as usize].store(seq, Ordering::Relaxed);
            st.stats.messages_served += 1;
            match p {
                NULL_PAGE => self.data.send_reply(r, seq, p, None)?,
                DRAIN_PAGE => {
                    self.drain_notices(st)?;
                    self.data.send_reply(r, seq, p, None)?;
                }
                w if diff_request(w).is_some_and(|p| (p as usize) < st.pages.len()) => {
                    let page = w & !crate::node::DIFF_REQUEST;
                    let mut buf = std::mem::take(&mut st.msg_buf);
                    let applied = self.data.take_diff(r, page, &mut buf);
                    st.msg_buf = buf;
                    if applied? {
                        st.stats.diffs_applied += 1;
                        self.data.send_reply(r, seq, w, None)?;
                    } else {
                        // Damaged: no answer, and the sender posts it again.
                        st.stats.damaged_diffs += 1;
                    }
                }
                p if p as usize >= st.pages.len() => {
                    return Err(CsmError::BadRequest { from: r, page: p })
                }
                p => {
                    let mut buf = std::mem::take(&mut st.serve_buf);
                    let r2 = self.answer_page(st, p, &mut buf);
                    let r3 = r2.and_then(|()| self.data.send_reply(r, seq, p, Some(&buf)));
                    st.serve_buf = buf;
                    r3?;
                }
            }
        }
        Ok(())
    }

    /// The page a requester gets: the working copy of a page held
    /// Exclusive (which this node then publishes and leaves), else the
    /// master copy, once this node's own last store into it is back. That
    /// store may be the page published as it left Exclusive for an earlier
    /// request: the master copy holds the home's writes from its Exclusive
    /// time only from then on, and this requester may have synchronised
    /// with them.
    fn answer_page(&self, st: &mut State, p: u32, buf: &mut [u8]) -> Result<(), CsmError> {
        if st.pages[p as usize].state == PageState::Exclusive {
            self.leave_exclusive(st, p, buf)
        } else {
            self.settle_own_master(st, p)?;
            self.data.read_master(p, buf)
        }
    }

    /// Another node wants a page this home holds exclusively: stop local
    /// writers, publish the working copy as the master copy, go to Read.
    /// `buf` gets the working copy (the answer: the master copy has it only
    /// once the publishing store has come back).
    fn leave_exclusive(&self, st: &mut State, p: u32, buf: &mut [u8]) -> Result<(), CsmError> {
        self.set_prot(p, Prot::Read)?;
        self.heap.read_bytes(p as usize * self.ps(), buf);
        if st.pages[p as usize].direct {
            // The working copy is the master copy: nothing to publish.
            self.meta.set_exclusive(p, self.me, false)?;
            st.pages[p as usize].state = PageState::Read;
            st.stats.exclusive_exits += 1;
            return Ok(());
        }
        self.data.write_page(p, buf)?;
        self.stored_own_master(st, p);
        self.meta.set_exclusive(p, self.me, false)?;
        self.meta.set_state(p, DirectoryState::Read)?;
        st.pages[p as usize].state = PageState::Read;
        st.stats.exclusive_exits += 1;
        Ok(())
    }

    /// Take the write notices that have arrived: each noticed page goes on
    /// the pending list once, stamped with the clock.
    pub(crate) fn drain_notices(&self, st: &mut State) -> Result<(), CsmError> {
        let State {
            pages,
            pending,
            clock,
            stats,
            ..
        } = st;
        let now = *clock;
        self.meta.drain_notices(&mut |p| {
            stats.write_notices_received += 1;
            if let Some(pg) = pages.get_mut(p as usize) {
                if pg.notice_at == 0 {
                    pending.push(p);
                }
                pg.notice_at = now;
            }
        })
    }
}
