//! Request/reply with a home (seed 002 s.5): page fetches, null and drain
//! requests, diff messages (CSM-MS), migration requests (CSM-MS-Mg) and
//! the directory and notices messages of message-based metadata (CSM-S),
//! answering other nodes while waiting, with end-to-end checks and retries
//! so a lost or damaged message costs time, not correctness.
//!
//! The request is one 8-byte store into the home's mailbox (after the
//! message's body, for a diff); the reply is the page, if any, and then a
//! header (sequence, word, checksum) into the requester's.
//! The requester waits for the header (the last store of the reply: packet
//! by packet and per-source FIFO, every packet before it has arrived), with
//! the node's waiting discipline: spin briefly, then sleep until the
//! mailbox's interrupt rings the doorbell. A node that is no longer a
//! page's home (its home migrated) answers "moved" with the home it knows,
//! and the requester asks that one (seed 002 s.4.1's lazy forwarding).
//! Runs on the faulting thread inside the SIGSEGV handler: no allocation,
//! no lock but the node's state, which the caller holds.

use std::time::{Duration, Instant};

use super::Node;
use crate::messages::{moved_to, ReplySlot, Request};
use crate::state::ProtocolState;
use crate::times::{self, Activity};
use crate::wait::WaitKind;
use crate::CsmError;

/// How long a page request waits for its reply before asking again. A reply
/// normally takes tens of microseconds; this is long enough that a home busy
/// on a loaded machine is not asked twice for nothing, short enough that a
/// lost message costs little.
const REPLY_TIMEOUT: Duration = Duration::from_millis(20);
/// The longest wait between two tries (the wait doubles from REPLY_TIMEOUT).
const REPLY_TIMEOUT_MAX: Duration = Duration::from_millis(640);
/// When a fetch gives up and the node fails.
const FETCH_GIVE_UP: Duration = Duration::from_secs(120);

/// What a wait for a reply ended with.
enum Heard {
    Reply,
    Nothing,
}

impl Node {
    /// Request/reply with the home, answering other nodes while waiting;
    /// the reply's data (a page) lands in `buf`. For requests other than
    /// [`Request::Migrate`] the reply must answer the request itself.
    pub(crate) fn fetch(
        &self,
        st: &mut ProtocolState,
        home: u32,
        req: Request,
        buf: &mut [u8],
    ) -> Result<(), CsmError> {
        self.request(st, home, req, buf).map(|_| ())
    }

    /// Request/reply with node `home`; returns the reply's word. Follows
    /// "moved" replies to the home they name (updating this node's idea of
    /// the page's home); a diff's body is posted again with each new try.
    ///
    /// The message layer checks every reply end to end (sequence, word and a
    /// checksum over the data, `messages`) and asks again, with a new
    /// sequence number, when the reply is damaged (a packet of it was lost or
    /// discarded by the CRC) or does not come within [`REPLY_TIMEOUT`] (the
    /// request or the whole reply was lost), doubling the wait each time. A
    /// request is idempotent at the home, so asking twice is harmless.
    pub(super) fn request(
        &self,
        st: &mut ProtocolState,
        mut home: u32,
        req: Request,
        buf: &mut [u8],
    ) -> Result<u32, CsmError> {
        let _fetch = times::enter(Activity::Fetch);
        let start = Instant::now();
        let mut wait = REPLY_TIMEOUT;
        let mut first = true;
        let word = req.word();
        let page = req.page().unwrap_or(u32::MAX);
        // The diff's body was written for the home first asked.
        let origin = home;
        // The last try got no whole answer (not: it was sent on elsewhere),
        // and how many times in a row.
        let mut again = false;
        let mut tries = 0u32;
        let reply = loop {
            // Where the answer lands: a diff's in the answering node's
            // acknowledgement slot.
            let slot = ReplySlot::for_request(req, home);
            if !std::mem::take(&mut first) {
                // The body may be what was lost, or it went to a node that
                // is no longer the home.
                match req {
                    Request::Diff(_) => self.data.repost_diff(origin, home)?,
                    Request::Notices(_) => {
                        if let Some(m) = self.meta.messages() {
                            m.repost_notices(home)?;
                        }
                    }
                    _ => {}
                }
            }
            // A migration request asked again keeps its sequence number
            // (`Request::retried_in_place`); anything else is asked anew.
            if std::mem::take(&mut again) && req.retried_in_place() {
                tries += 1;
            } else {
                tries = 0;
                st.next_fetch_seq();
            }
            let seq = st.fetch_seq;
            self.data.send_request(home, seq, req.try_word(tries))?;
            st.stats.messages_sent += 1;
            let sent = Instant::now();
            let heard = self.bell.wait(
                WaitKind::Remote,
                || {
                    if self.data.reply_seq(slot) == seq {
                        return Ok(Some(Heard::Reply));
                    }
                    // Two nodes fetching from each other both answer meanwhile.
                    self.bell.polled();
                    self.serve_waiting(st)?;
                    self.check_failed()?;
                    if start.elapsed() > FETCH_GIVE_UP {
                        return Err(CsmError::NoReply {
                            home,
                            page,
                            after: FETCH_GIVE_UP,
                            timeouts: st.stats.request_timeouts,
                            damaged: st.stats.damaged_replies,
                        });
                    }
                    Ok((sent.elapsed() > wait).then_some(Heard::Nothing))
                },
                || self.reply_arrival(slot),
            )?;
            match heard {
                Heard::Reply => {
                    let got = self.data.reply_word(slot);
                    let data = req.reply_has_data(got) && moved_to(got).is_none();
                    let out: &mut [u8] = if data { &mut *buf } else { &mut [] };
                    // A null request's `buf` is empty: only the header is checked.
                    if !self.data.read_reply(slot, seq, got, out)? {
                        st.stats.damaged_replies += 1;
                        again = true;
                        continue;
                    }
                    match moved_to(got) {
                        Some(to) => {
                            st.stats.moved_replies += 1;
                            // A node whose idea of the home is older than
                            // ours (its directory replica lags, or it
                            // learned it from one that did) may name us or
                            // itself: ask the directory instead, and ask
                            // again until the beliefs catch up.
                            let next = if to != self.me && to != home {
                                to
                            } else {
                                self.meta
                                    .home(page)
                                    .filter(|&h| h != self.me)
                                    .unwrap_or(home)
                            };
                            home = next;
                            if let Some(pg) = st.pages.get_mut(page as usize) {
                                pg.home = Some(next);
                            }
                            first = false;
                        }
                        None if got == word || matches!(req, Request::Migrate(_)) => break got,
                        None => {
                            st.stats.damaged_replies += 1;
                            again = true;
                        }
                    }
                }
                Heard::Nothing => {
                    st.stats.request_timeouts += 1;
                    again = true;
                    wait = (wait * 2).min(REPLY_TIMEOUT_MAX);
                }
            }
        };
        if req.reply_has_page(reply) {
            st.stats.page_transfers += 1;
        }
        Ok(reply)
    }
}
