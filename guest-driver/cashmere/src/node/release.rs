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
//!
//! Diffs as messages (CSM-MS and the variants after it) are pipelined
//! across homes, as seed 002 s.3.3 describes ("Cashmere pipelines diff
//! operations to different processors. The code in Release basically
//! cycles through the dirty list and sends out the diffs. If the diff
//! cannot be sent out because the appropriate message channel is busy, the
//! page is placed back in the dirty list to be re-tried later"): one diff
//! in flight per home (its body fills this node's message slot there), the
//! acknowledgements awaited together, each in the home's acknowledgement
//! slot of this node's mailbox. An acknowledgement that does not come in
//! time, comes damaged, or says the home moved is asked for again the
//! one-at-a-time way (`diff_message_acked`), once every other diff in
//! flight is acknowledged.

use std::time::Instant;

use super::Node;
use crate::messages::{moved_to, ReplySlot, Request};
use crate::seams::{DirectoryState, ENTRY_BYTES};
use crate::state::{PageState, ProtocolState};
use crate::times::{self, Activity};

use crate::vm::Prot;
use crate::wait::WaitKind;
use crate::CsmError;

/// How long a pipelined diff waits for its acknowledgement before it is
/// asked for again the one-at-a-time way (as a request's first timeout).
const ACK_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(20);

/// A diff message in flight: its home, page and request sequence number.
#[derive(Clone, Copy)]
struct InFlight {
    home: u32,
    page: u32,
    seq: u32,
}

impl Node {
    /// Diff a twinned page against its twin and write the runs to the home.
    /// The caller has already taken write permission away (the page cannot
    /// change under the diff).
    pub(super) fn flush(&self, st: &mut ProtocolState, p: u32) -> Result<(), CsmError> {
        if !st.pages[p as usize].twinned {
            return Ok(());
        }
        let home = self.home_of(st, p)?;
        let bytes = self.write_diff(st, home, p)?;
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

    /// Diff twinned page `p` against its twin and write the runs to `home`
    /// (remote writes, or a diff message's body); returns the bytes sent, 0
    /// when the page did not change.
    fn write_diff(&self, st: &mut ProtocolState, home: u32, p: u32) -> Result<usize, CsmError> {
        let mut words = std::mem::take(&mut st.words);
        self.heap().read_words(p as usize * self.ps(), &mut words);
        // SAFETY: page p's twin; this thread holds the node's state.
        let twin = unsafe { self.copies.twins().twin(p as usize) };
        st.diff.compute(&words, twin);
        let r = if st.diff.is_empty() {
            Ok(0)
        } else {
            self.data.write_diff(home, p, &words, &st.diff)
        };
        st.words = words;
        r
    }

    /// The request that delivers the diff message for `p` already posted
    /// to `home`, and its acknowledgement: the diff is applied before
    /// anything that follows it (the write notices, the release store;
    /// seed 000 s.2.3.1.2). With message-based metadata the acknowledgement
    /// carries the page's sharing set, which the notices go to
    /// (s.2.3.1.3).
    fn diff_message_acked(
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

    /// Send `diff` of page `p` (whose working copy is `words`) to its home
    /// `home` and, where diffs are messages, wait for the acknowledgement
    /// (the Table II "diff", `Csm::bench_diff`). Returns the bytes sent.
    pub(crate) fn send_diff(
        &self,
        st: &mut ProtocolState,
        home: u32,
        p: u32,
        words: &[u32],
        diff: &crate::twin::Diff,
    ) -> Result<usize, CsmError> {
        let bytes = self.data.write_diff(home, p, words, diff)?;
        if self.data.diffs_are_messages() {
            // A diff message is done when the home acknowledges it.
            self.diff_message_acked(st, home, p)?;
        }
        Ok(bytes)
    }

    /// The diff messages of a release, pipelined across homes (module
    /// docs): every twinned page of `st.releasing` whose home is another
    /// node is diffed and acknowledged, write-protected and Read after.
    fn flush_pipelined(&self, st: &mut ProtocolState) -> Result<(), CsmError> {
        let mut todo: Vec<u32> = Vec::new();
        for &p in &st.releasing {
            if st.pages[p as usize].twinned {
                todo.push(p);
            }
        }
        let mut rest = Vec::new();
        let mut in_flight = Vec::new();
        while !todo.is_empty() {
            // Homes with a diff of ours in flight (at most 64 nodes).
            let mut busy = 0u64;
            for &p in &todo {
                let home = self.home_of(st, p)?;
                if home == self.me {
                    // Its own master copy: the one-at-a-time path.
                    continue;
                }
                if busy & (1u64 << home) != 0 {
                    rest.push(p);
                    continue;
                }
                self.set_prot(p, Prot::Read)?;
                let bytes = self.write_diff(st, home, p)?;
                if bytes == 0 {
                    self.flushed(st, p)?;
                    continue;
                }
                st.stats.diffs += 1;
                st.stats.diff_bytes += bytes as u64;
                let seq = st.next_fetch_seq();
                self.data.send_request(home, seq, Request::Diff(p).word())?;
                st.stats.messages_sent += 1;
                if busy != 0 {
                    st.stats.diffs_pipelined += 1;
                }
                busy |= 1u64 << home;
                in_flight.push(InFlight { home, page: p, seq });
            }
            self.await_acks(st, &in_flight)?;
            for d in in_flight.drain(..) {
                self.flushed(st, d.page)?;
            }
            std::mem::swap(&mut todo, &mut rest);
            rest.clear();
        }
        Ok(())
    }

    /// A page whose diff is applied at its home: no longer twinned, Read.
    fn flushed(&self, st: &mut ProtocolState, p: u32) -> Result<(), CsmError> {
        st.pages[p as usize].twinned = false;
        st.pages[p as usize].state = PageState::Read;
        self.meta.set_state(p, DirectoryState::Read)
    }

    /// Wait for the acknowledgements of the diffs `in_flight`, answering
    /// requests meanwhile; those that do not come whole in time, or say the
    /// home moved, are asked for again one at a time once the others are in.
    fn await_acks(&self, st: &mut ProtocolState, in_flight: &[InFlight]) -> Result<(), CsmError> {
        let _fetch = times::enter(Activity::Fetch);
        let mut again = Vec::new();
        for d in in_flight {
            let slot = ReplySlot::Ack(d.home);
            let sent = Instant::now();
            let came = self.bell.wait(
                WaitKind::Remote,
                || {
                    if self.data.reply_seq(slot) == d.seq {
                        return Ok::<_, CsmError>(Some(true));
                    }
                    self.bell.polled();
                    self.serve_waiting(st)?;
                    self.check_failed()?;
                    Ok((sent.elapsed() > ACK_TIMEOUT).then_some(false))
                },
                || self.reply_arrival(slot),
            )?;
            if !came {
                st.stats.request_timeouts += 1;
                again.push(*d);
                continue;
            }
            let word = self.data.reply_word(slot);
            let mut entry = [0u8; ENTRY_BYTES];
            // The sharing set comes with it under message-based metadata.
            let out: &mut [u8] = if moved_to(word).is_none() && self.meta.messages().is_some() {
                &mut entry
            } else {
                &mut []
            };
            let whole = self.data.read_reply(slot, d.seq, word, out)?;
            if !whole || word != Request::Diff(d.page).word() {
                if !whole {
                    st.stats.damaged_replies += 1;
                }
                again.push(*d);
                continue;
            }
            if let Some(m) = self.meta.messages() {
                m.learn_entry(d.page, &entry);
            }
        }
        for d in again {
            // Its body is still this node's for that home: posted again
            // with the new request, to the new home if it moved.
            self.diff_message_acked(st, d.home, d.page)?;
        }
        Ok(())
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
        if self.data.diffs_are_messages() {
            self.flush_pipelined(st)?;
        }
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
                st.stale.all_stale(p);
                if self.choices.migration() {
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
                let n = u32::try_from(n).expect("a node number fits u32");
                let k = self.meta.send_notices(n, &list[sent..])?;
                if k > 0 && self.meta.messages().is_some() {
                    // A notices message: taken by the receiver before its
                    // acknowledgement, so before this release's store.
                    let count = u32::try_from(k).expect("notices sent at once fit u32");
                    self.fetch(st, n, Request::Notices(count), &mut [])?;
                }
                sent += k;
                st.stats.write_notices_sent += k as u64;
                if k == 0 {
                    // The receiver's bin is full: ask it to drain (seed 002
                    // s.4.3), answering requests while it does.
                    st.stats.drain_requests += 1;
                    self.fetch(st, n, Request::Drain, &mut [])?;
                }
            }
        }
        Ok(())
    }
}
