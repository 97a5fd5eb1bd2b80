//! Answering other nodes (seed 002 s.5): page requests (leaving Exclusive
//! mode first when the page is held so), null requests, and requests to
//! drain the write-notice bins; with message-based metadata (CSM-S,
//! `msg_meta`) the directory manager's home question, invalidations and
//! notices messages; and taking in the write notices that have arrived
//! (seed 002 s.4.3).
//!
//! Whoever holds the node's state answers: the protocol thread, or a thread
//! that waits for something while holding the state (a fetch inside a fault,
//! a release waiting for its echo), so two nodes waiting for each other
//! both get answered. Allocation-free: the page goes out of the state's
//! answer buffer.

use mc_api::vclock;

use super::served::request_key;
use super::Node;
use crate::messages::{moved, moved_to, ReplySlot, Request, DENIED, WITH_PAGE};
use crate::seams::{DirectoryState, ENTRY_BYTES};
use crate::state::{PageState, ProtocolState};
use crate::times::{self, Activity};
use crate::vm::Prot;
use crate::CsmError;

impl Node {
    /// Answer the requests waiting, if any, with the node's state in hand:
    /// a thread that holds it while it waits (a fetch, an echo) answers for
    /// the node, since nobody else can take the state meanwhile.
    pub(super) fn serve_waiting(&self, st: &mut ProtocolState) -> Result<(), CsmError> {
        if self.requests_waiting() {
            let _serve = times::enter(Activity::Serve);
            self.serve_requests(st)?;
        }
        Ok(())
    }

    pub(super) fn serve_requests(&self, st: &mut ProtocolState) -> Result<(), CsmError> {
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

    fn serve_each(&self, st: &mut ProtocolState) -> Result<(), CsmError> {
        st.serve_pass += 1;
        for r in 0..self.nodes {
            if r == self.me {
                continue;
            }
            let (seq, w) = self.data.poll_request(r);
            let key = request_key((seq, w));
            if key == self.served.last(r) {
                continue;
            }
            // Virtual time (docs/virtual-time.md s.5): a computing poller
            // leaves a request from its virtual future until its clock
            // gets there; a waiter (or the protocol thread, which waits
            // between requests) serves it at its arrival.
            let arrival = self.mail.arrival(self.mail.at().request(r), 8);
            if vclock::enabled()
                && !vclock::waiting()
                && arrival.is_some_and(|a| a > vclock::tick())
            {
                continue;
            }
            let _at = vclock::serve(arrival);
            self.served.answered(r, key);
            st.stats.messages_served += 1;
            let req = Request::decode(w);
            // A diff's acknowledgement (or "moved") goes to this node's
            // acknowledgement slot in the requester's mailbox.
            let slot = ReplySlot::for_request(req, self.me);
            if let Some(p) = req.page() {
                if p as usize >= st.pages.len() {
                    return Err(CsmError::BadRequest { from: r, page: p });
                }
                if let Request::Migrate(_) = req {
                    if let Some(answer) = st.migration_answers.repeated(r, seq) {
                        // The same migration request again: its answer did
                        // not reach the asker whole, or in time. It gets the
                        // same answer: a grant moved the home, and a second
                        // decision (a "moved" or a denial after a grant, or
                        // a grant after either) would leave the page with
                        // two homes or none.
                        if answer & DENIED == 0 && moved_to(answer).is_none() {
                            self.regrant(st, r, seq, p)?;
                        } else {
                            self.data
                                .send_reply(r, ReplySlot::Reply, seq, answer, None)?;
                        }
                        continue;
                    }
                }
                // With migration, the home may have moved on: send the
                // requester to the home this node knows (seed 002 s.4.1).
                if self.choices.migration() && req.for_home() {
                    match self.known_home(st, p) {
                        Some(h) if h == self.me => {}
                        // Not known here: "moved" to this node itself
                        // sends the requester to its directory.
                        h => {
                            let to = h.unwrap_or(self.me);
                            self.data.send_reply(r, slot, seq, moved(to), None)?;
                            if let Request::Migrate(_) = req {
                                st.migration_answers.answered(r, seq, moved(to));
                            }
                            continue;
                        }
                    }
                }
            }
            match req {
                Request::Null => self.data.send_reply(r, slot, seq, w, None)?,
                Request::Drain => {
                    self.drain_notices(st)?;
                    self.data.send_reply(r, slot, seq, w, None)?;
                }
                Request::Diff(page) => {
                    let mut buf = std::mem::take(&mut st.msg_buf);
                    let applied = self.data.take_diff(r, page, &mut buf);
                    st.msg_buf = buf;
                    if applied? {
                        st.stats.diffs_applied += 1;
                        // Before the acknowledgement, which the releaser's
                        // notices follow.
                        self.adb_invalidate(st, page)?;
                        // Every copy but the writer's lacks it now.
                        st.stale.changed_by(page, r);
                        match self.meta.messages() {
                            // The sharing set, piggybacked on the
                            // acknowledgement: the releaser's notices go
                            // to it (seed 000 s.2.3.1.3).
                            Some(m) => {
                                let mut e = [0u8; ENTRY_BYTES];
                                m.entry(page, &mut e);
                                self.data.send_reply(r, slot, seq, w, Some(&e))?;
                            }
                            None => self.data.send_reply(r, slot, seq, w, None)?,
                        }
                    } else {
                        // Damaged: no answer, and the sender posts it again.
                        st.stats.damaged_diffs += 1;
                    }
                }
                Request::Migrate(page) => {
                    let answer = self.answer_migration(st, r, seq, page)?;
                    st.migration_answers.answered(r, seq, answer);
                }
                Request::Home(p) => {
                    let m = self
                        .meta
                        .messages()
                        .ok_or(CsmError::BadRequest { from: r, page: p })?;
                    let h = u64::from(m.assign_home(p, r));
                    self.data
                        .send_reply(r, slot, seq, w, Some(&h.to_le_bytes()))?;
                }
                Request::Invalid(p) => {
                    let m = self
                        .meta
                        .messages()
                        .ok_or(CsmError::BadRequest { from: r, page: p })?;
                    m.left(p, r);
                    self.data.send_reply(r, slot, seq, w, None)?;
                }
                Request::Notices(count) => {
                    if self.take_notice_message(st, r, count)? {
                        self.data.send_reply(r, slot, seq, w, None)?;
                    }
                    // Damaged: no answer, and the sender posts it again.
                }
                Request::Page(p) => {
                    if let Some(m) = self.meta.messages() {
                        // The join, piggybacked on the fetch (seed 000
                        // s.2.3.1.3); before the answer, as any diff
                        // applied after it is.
                        m.joined(p, r);
                    }
                    let mut buf = std::mem::take(&mut st.serve_buf);
                    let r2 = self.answer_page(st, p, &mut buf);
                    let r3 = r2
                        .and_then(|()| self.data.send_reply(r, slot, seq, w, Some(&buf)))
                        .and_then(|()| self.adb_consider(st, p, &buf));
                    st.serve_buf = buf;
                    r3?;
                    st.stale.sent(p, r);
                }
            }
        }
        Ok(())
    }

    /// A migration request (CSM-MS-Mg, seed 000 s.2.3.2, seed 002 s.3.1):
    /// granted unless a thread of this node is writing the page (it is
    /// ReadWrite or Exclusive here). Granting, this node points the
    /// directory at the new home, stays a sharer with its copy (in the
    /// sharing set, so the new home's releases notify it), and sends the
    /// page along only if its Stale vector says the requester's copy is out
    /// of date.
    fn answer_migration(
        &self,
        st: &mut ProtocolState,
        r: u32,
        seq: u32,
        p: u32,
    ) -> Result<u32, CsmError> {
        let word = Request::Migrate(p).word();
        let pg = &st.pages[p as usize];
        if matches!(pg.state, PageState::ReadWrite | PageState::Exclusive) {
            self.data
                .send_reply(r, ReplySlot::Reply, seq, word | DENIED, None)?;
            return Ok(word | DENIED);
        }
        let with_page = st.stale.is_stale(p, r);
        let pg = &mut st.pages[p as usize];
        pg.home = Some(r);
        pg.direct = false;
        pg.direct_tried = true;
        let sharer = pg.state == PageState::Read;
        self.meta.set_home(p, r)?;
        if sharer {
            self.meta.set_state(p, DirectoryState::Read)?;
        }
        st.stats.migrations_granted += 1;
        if with_page {
            let mut buf = std::mem::take(&mut st.serve_buf);
            self.heap().read_bytes(p as usize * self.ps(), &mut buf);
            let r2 = self
                .data
                .send_reply(r, ReplySlot::Reply, seq, word | WITH_PAGE, Some(&buf));
            st.serve_buf = buf;
            r2.map(|()| word | WITH_PAGE)
        } else {
            self.data
                .send_reply(r, ReplySlot::Reply, seq, word, None)
                .map(|()| word)
        }
    }

    /// A migration this node granted to `r` whose grant did not arrive
    /// (the same request asked again): grant it again, with the page. This
    /// node's copy is the master copy as granted: nothing changes it while
    /// the page has no home that knows it.
    fn regrant(&self, st: &mut ProtocolState, r: u32, seq: u32, p: u32) -> Result<(), CsmError> {
        let word = Request::Migrate(p).word() | WITH_PAGE;
        let mut buf = std::mem::take(&mut st.serve_buf);
        self.heap().read_bytes(p as usize * self.ps(), &mut buf);
        let r2 = self
            .data
            .send_reply(r, ReplySlot::Reply, seq, word, Some(&buf));
        st.serve_buf = buf;
        r2
    }

    /// The page a requester gets: the working copy of a page held
    /// Exclusive (which this node then publishes and leaves), else the
    /// master copy, once this node's own last store into it is back. That
    /// store may be the page published as it left Exclusive for an earlier
    /// request: the master copy holds the home's writes from its Exclusive
    /// time only from then on, and this requester may have synchronised
    /// with them.
    fn answer_page(&self, st: &mut ProtocolState, p: u32, buf: &mut [u8]) -> Result<(), CsmError> {
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
    fn leave_exclusive(
        &self,
        st: &mut ProtocolState,
        p: u32,
        buf: &mut [u8],
    ) -> Result<(), CsmError> {
        self.set_prot(p, Prot::Read)?;
        self.heap().read_bytes(p as usize * self.ps(), buf);
        if st.pages[p as usize].direct {
            // The working copy is the master copy: nothing to publish.
            self.meta.set_exclusive(p, self.me, false)?;
            if self.choices.migration() {
                self.meta.set_state(p, DirectoryState::Read)?;
            }
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
    pub(super) fn drain_notices(&self, st: &mut ProtocolState) -> Result<(), CsmError> {
        self.meta.drain_notices(&mut |p| st.take_notice(p))
    }

    /// A notices message from node `from` (message-based metadata): its
    /// pages go on the pending list as drained notices do. `false` when the
    /// message is damaged.
    fn take_notice_message(
        &self,
        st: &mut ProtocolState,
        from: u32,
        count: u32,
    ) -> Result<bool, CsmError> {
        let Some(m) = self.meta.messages() else {
            return Err(CsmError::BadRequest { from, page: count });
        };
        let mut buf = std::mem::take(&mut st.msg_buf);
        let r = m.take_notices(from, count, &mut buf, &mut |p| st.take_notice(p));
        st.msg_buf = buf;
        r
    }
}
