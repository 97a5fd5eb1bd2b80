//! Fetching a page from its home by request/reply (seed 002 s.5), answering
//! other nodes while waiting, with end-to-end checks and retries so a lost or
//! damaged message costs time, not correctness.

use mc_api::backoff::Backoff;

use crate::node::{Node, WAIT_POLICY};
use crate::state::State;
use crate::CsmError;

/// How long a page request waits for its reply before asking again. A reply
/// normally takes tens of microseconds; this is long enough that a home busy
/// on a loaded machine is not asked twice for nothing, short enough that a
/// lost message costs little.
const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(20);
/// The longest wait between two tries (the wait doubles from REPLY_TIMEOUT).
const REPLY_TIMEOUT_MAX: std::time::Duration = std::time::Duration::from_millis(640);
/// When a fetch gives up and the node fails.
const FETCH_GIVE_UP: std::time::Duration = std::time::Duration::from_secs(120);

impl Node {
    /// Request/reply with the home, answering other nodes while waiting.
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
        let start = std::time::Instant::now();
        let mut wait = REPLY_TIMEOUT;
        'ask: loop {
            st.fetch_seq = st.fetch_seq.wrapping_add(1).max(1);
            let seq = st.fetch_seq;
            self.data.send_request(home, seq, p)?;
            st.stats.messages_sent += 1;
            let sent = std::time::Instant::now();
            let mut backoff = Backoff::with_policy(WAIT_POLICY);
            loop {
                if self.data.reply_seq() == seq {
                    // A null request's `buf` is empty: only the header is checked.
                    if self.data.read_reply(seq, p, buf)? {
                        break 'ask;
                    }
                    st.stats.damaged_replies += 1;
                    log::debug!(
                        "node{}: reply {seq} from node {home} for page {p} damaged; asking again",
                        self.me
                    );
                    continue 'ask;
                }
                if let Some(n) = self.sync.aborted() {
                    return Err(CsmError::NodeFailed { node: n });
                }
                if start.elapsed() > FETCH_GIVE_UP {
                    return Err(CsmError::NoReply {
                        home,
                        page: p,
                        after: FETCH_GIVE_UP,
                        timeouts: st.stats.request_timeouts,
                        damaged: st.stats.damaged_replies,
                    });
                }
                if sent.elapsed() > wait {
                    st.stats.request_timeouts += 1;
                    log::debug!(
                        "node{}: no reply {seq} from node {home} for page {p} in {wait:?}; asking again",
                        self.me
                    );
                    wait = (wait * 2).min(REPLY_TIMEOUT_MAX);
                    continue 'ask;
                }
                self.poll_others(st)?;
                backoff.snooze();
            }
        }
        if p != u32::MAX {
            st.stats.page_transfers += 1;
        }
        Ok(())
    }
}
