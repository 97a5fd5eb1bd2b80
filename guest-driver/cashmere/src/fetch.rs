//! Fetching a page from its home by request/reply (seed 002 s.5), answering
//! other nodes while waiting, with end-to-end checks and retries so a lost or
//! damaged message costs time, not correctness.
//!
//! The request is one 8-byte store into the home's mailbox; the reply is the
//! page and then a header (sequence, page, checksum) into the requester's.
//! The requester waits for the header (the last store of the reply: packet
//! by packet and per-source FIFO, every packet before it has arrived), with
//! the node's waiting discipline: spin briefly, then sleep until the
//! mailbox's interrupt rings the doorbell. Runs on the faulting thread inside
//! the SIGSEGV handler: no allocation, no lock but the node's state, which
//! the caller holds.

use std::time::{Duration, Instant};

use crate::node::{diff_request, Node, DRAIN_PAGE, NULL_PAGE};
use crate::state::State;
use crate::times::{self, Activity};
use crate::wait::WaitFor;
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
    /// Request/reply with the home, answering other nodes while waiting.
    /// `p` is a page, [`NULL_PAGE`] (a null message), [`DRAIN_PAGE`]
    /// (empty your bins) or a diff request (`DIFF_REQUEST | page`, whose
    /// body `write_diff` posted: its reply is the acknowledgement); `buf`
    /// receives the page (empty for the others).
    ///
    /// The message layer checks every reply end to end (sequence, page and a
    /// checksum over the data, `dms_data`) and asks again, with a new
    /// sequence number, when the reply is damaged (a packet of it was lost or
    /// discarded by the CRC) or does not come within [`REPLY_TIMEOUT`] (the
    /// request or the whole reply was lost), doubling the wait each time. A
    /// request is idempotent at the home, so asking twice is harmless.
    pub(crate) fn fetch(
        &self,
        st: &mut State,
        home: u32,
        p: u32,
        buf: &mut [u8],
    ) -> Result<(), CsmError> {
        let _fetch = times::enter(Activity::Fetch);
        let start = Instant::now();
        let mut wait = REPLY_TIMEOUT;
        let mut first = true;
        loop {
            if !std::mem::take(&mut first) && diff_request(p).is_some() {
                // The body may be what was lost.
                self.data.repost_diff(home)?;
            }
            st.fetch_seq = st.fetch_seq.wrapping_add(1).max(1);
            let seq = st.fetch_seq;
            self.data.send_request(home, seq, p)?;
            st.stats.messages_sent += 1;
            let sent = Instant::now();
            let heard = self.bell.wait(WaitFor::Remote, || {
                if self.data.reply_seq() == seq {
                    return Ok(Some(Heard::Reply));
                }
                // Two nodes fetching from each other both answer meanwhile.
                if self.requests_waiting() {
                    let _serve = times::enter(Activity::Serve);
                    self.serve_requests(st)?;
                }
                self.check_failed()?;
                if start.elapsed() > FETCH_GIVE_UP {
                    return Err(CsmError::NoReply {
                        home,
                        page: p,
                        after: FETCH_GIVE_UP,
                        timeouts: st.stats.request_timeouts,
                        damaged: st.stats.damaged_replies,
                    });
                }
                Ok((sent.elapsed() > wait).then_some(Heard::Nothing))
            })?;
            match heard {
                Heard::Reply => {
                    // A null request's `buf` is empty: only the header is checked.
                    if self.data.read_reply(seq, p, buf)? {
                        break;
                    }
                    st.stats.damaged_replies += 1;
                }
                Heard::Nothing => {
                    st.stats.request_timeouts += 1;
                    wait = (wait * 2).min(REPLY_TIMEOUT_MAX);
                }
            }
        }
        if p != NULL_PAGE && p != DRAIN_PAGE && diff_request(p).is_none() {
            st.stats.page_transfers += 1;
        }
        Ok(())
    }
}
