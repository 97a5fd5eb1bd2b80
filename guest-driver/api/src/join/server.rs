//! The server: a coherent member elected by the serve lock (lower-numbered
//! members offer first) maps the resync window for point-to-point transmit to
//! the joiner and retransmits its copy of the control pages and the arena,
//! round after round, until every word is settled (see `join`), then answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use firmware_model::PctEntry;
use log::{debug, info, warn};

use super::notice::{Manager, RETRY};
use super::window::with_resync_window;
use super::JoinHost;
use super::{Window, BATCH};
use crate::error::McError;
use crate::layout::{JOIN_DONE, JOIN_MARK, JOIN_REQUEST, SERVE_LOCK};
use crate::node::node_id;
use crate::spinlock::ClusterLock;

/// How much later than the member below it a member offers to serve.
const RANK_DELAY: Duration = Duration::from_millis(20);
/// Rounds of retransmission before the server gives up (and tries again later).
const MAX_ROUNDS: u32 = 48;
/// The largest record a retransmission sends.
const RECORD: usize = 4096;

impl Manager {
    /// Serve one pending join request, if this node is elected for it.
    pub(super) fn serve_pending(&mut self, host: &Arc<dyn JoinHost>) {
        let inner = host.node();
        let me = self.me;
        let c = &inner.control;
        let members = host.node().members_mask();
        let nodes = inner.regs.nodes.min(64);
        let pending = |n: u32| {
            c.load_u64(JOIN_REQUEST + 8 * n as usize) > c.load_u64(JOIN_DONE + 8 * n as usize) >> 8
        };
        let now = Instant::now();
        let mut seen = Vec::new();
        let mut chosen = None;
        for j in 0..nodes {
            if j == me || members & (1 << j) == 0 || !pending(j) {
                continue;
            }
            let seq = c.load_u64(JOIN_REQUEST + 8 * j as usize);
            let since = self
                .seen
                .iter()
                .find(|(n, s, _)| *n == j && *s == seq)
                .map_or(now, |e| e.2);
            seen.push((j, seq, since));
            // Coherent members below this one offer first.
            let rank = (0..me)
                .filter(|&m| m != j && members & (1 << m) != 0 && !pending(m))
                .count();
            let rank = u32::try_from(rank).expect("at most 64 members");
            if chosen.is_none() && now.duration_since(since) >= RANK_DELAY * rank {
                chosen = Some((j, seq));
            }
        }
        self.seen = seen;
        let Some((j, seq)) = chosen else { return };
        self.last_activity = now;
        let lock = ClusterLock { offset: SERVE_LOCK };
        match lock.acquire(host.node(), true) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                warn!("node{me}: the serve lock: {}", crate::ErrorChain(&e));
                self.not_before = now + RETRY;
                return;
            }
        }
        // Another member may have served it just before we got the lock.
        let r = if pending(j) && c.load_u64(JOIN_REQUEST + 8 * j as usize) == seq {
            self.serve(host, j, seq)
        } else {
            Ok(())
        };
        if let Err(e) = &r {
            warn!(
                "node{me}: serving join request {seq} of node {j}: {}",
                crate::ErrorChain(e)
            );
            self.not_before = Instant::now() + RETRY;
        }
        if let Err(e) = lock.release(host.node()) {
            warn!(
                "node{me}: releasing the serve lock: {}",
                crate::ErrorChain(&e)
            );
        }
    }

    fn serve(&mut self, host: &Arc<dyn JoinHost>, j: u32, seq: u64) -> Result<(), McError> {
        let inner = host.node();
        let (me, l) = (self.me, inner.layout);
        let t0 = Instant::now();
        info!("node{me}: serving join request {seq} of node {j}");
        let (rounds, sent) =
            with_resync_window(host.node(), PctEntry::transmit_to(node_id(j)), &[], || {
                self.retransmit(host, j)
            })?;
        // Ordered after every retransmission: the joiner sees it last.
        let answer = (seq << 8) | u64::from(me);
        host.node().store(
            Self::meta_addr(&l, JOIN_DONE + 8 * j as usize),
            &answer.to_le_bytes(),
        )?;
        info!(
            "node{me}: node {j} is up to date: {sent} bytes in {rounds} round(s), {:?}",
            t0.elapsed()
        );
        Ok(())
    }

    /// Send control pages and arena to `j` through the window until every
    /// word is settled (see the module comment). Returns (rounds, bytes sent).
    fn retransmit(&mut self, host: &Arc<dyn JoinHost>, j: u32) -> Result<(u32, u64), McError> {
        let inner = host.node();
        let l = inner.layout;
        let ps = l.page_size as usize;
        let win = Window::of(inner);
        let len = l.resync_pages() as usize * ps;
        let base = l.page_addr(l.resync_first());
        let mut sent = vec![0u8; len];
        win.read(0, &mut sent);
        let mut cur = vec![0u8; len];
        let mut pending = vec![(0, len / 8)];
        let mut bytes = 0u64;
        for round in 0..MAX_ROUNDS {
            bytes += send_runs(host, base, &sent, &pending)?;
            self.marker(host)?;
            if host.node().members_mask() & (1 << j) == 0 {
                return Err(McError::JoinerLeft { joiner: node_id(j) });
            }
            for &(w, n) in &pending {
                win.read(8 * w, &mut cur[8 * w..8 * (w + n)]);
            }
            // The marker is itself a write ordered after the retransmission:
            // the joiner has it, whatever was sent.
            let mark_word = (JOIN_MARK + 8 * self.me as usize) / 8;
            let suspects: Vec<usize> = differing_words(&sent, &cur, &pending)
                .into_iter()
                .filter(|&w| w != mark_word)
                .collect();
            if suspects.is_empty() {
                return Ok((round + 1, bytes));
            }
            std::thread::sleep(observe_delay(round));
            let mut again = Vec::with_capacity(suspects.len());
            for &w in &suspects {
                let mut b = [0u8; 8];
                win.read(8 * w, &mut b);
                if unsettled(&sent[8 * w..8 * w + 8], &cur[8 * w..8 * w + 8], &b) {
                    sent[8 * w..8 * w + 8].copy_from_slice(&b);
                    again.push(w);
                }
            }
            debug!(
                "node{}: resync round {round}: {} word(s) differ, {} to send again",
                self.me,
                suspects.len(),
                again.len()
            );
            if again.is_empty() {
                return Ok((round + 1, bytes));
            }
            pending = runs(&again);
        }
        Err(McError::ResyncUnsettled {
            joiner: node_id(j),
            rounds: MAX_ROUNDS,
        })
    }
}

/// Send the word runs of `data` to the window at `base`; returns bytes sent.
fn send_runs(
    host: &Arc<dyn JoinHost>,
    base: u64,
    data: &[u8],
    runs: &[(usize, usize)],
) -> Result<u64, McError> {
    let mut records: Vec<(u64, &[u8])> = Vec::new();
    let mut bytes = 0u64;
    for &(w, n) in runs {
        let (start, end) = (8 * w, 8 * (w + n));
        let mut at = start;
        while at < end {
            let to = (at + RECORD).min(end);
            records.push((base + at as u64, &data[at..to]));
            bytes += (to - at) as u64;
            at = to;
        }
    }
    for batch in records.chunks(BATCH) {
        host.node().store_batch(batch)?;
    }
    Ok(bytes)
}

/// Indices of the 8-byte words in `runs` where `a` and `b` differ.
fn differing_words(a: &[u8], b: &[u8], runs: &[(usize, usize)]) -> Vec<usize> {
    const BLOCK: usize = 64;
    let mut out = Vec::new();
    for &(w, n) in runs {
        let mut i = w;
        while i < w + n {
            let k = BLOCK.min(w + n - i);
            if a[8 * i..8 * (i + k)] != b[8 * i..8 * (i + k)] {
                out.extend((i..i + k).filter(|&x| a[8 * x..8 * x + 8] != b[8 * x..8 * x + 8]));
            }
            i += k;
        }
    }
    out
}

/// Whether a word must be sent again, given what was `sent`, what the copy
/// held `after` the marker, and what it holds `now`, a while later. Per byte
/// (stores may write single bytes): a byte is settled if it was sent as it
/// was after the marker, or if it changed again since: a write ordered after
/// the retransmission, which the joiner receives too.
fn unsettled(sent: &[u8], after: &[u8], now: &[u8]) -> bool {
    sent.iter()
        .zip(after)
        .zip(now)
        .any(|((s, a), n)| s != a && n == a)
}

/// Sorted word indices as (first, count) runs.
fn runs(words: &[usize]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &w in words {
        match out.last_mut() {
            Some((f, n)) if *f + *n == w => *n += 1,
            _ => out.push((w, 1)),
        }
    }
    out
}

/// How long the server watches differing words before it sends them again:
/// longer each round, so a word written continuously shows a later write.
fn observe_delay(round: u32) -> Duration {
    Duration::from_micros((200u64 << round.min(7)).min(20_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differing_words_and_runs() {
        let a = vec![0u8; 8 * 200];
        let mut b = a.clone();
        for w in [3usize, 4, 5, 70, 199] {
            b[8 * w + 7] = 1;
        }
        // Word 70 is outside the runs looked at.
        let d = differing_words(&a, &b, &[(0, 64), (100, 100)]);
        assert_eq!(d, vec![3, 4, 5, 199]);
        assert_eq!(runs(&d), vec![(3, 3), (199, 1)]);
        assert!(differing_words(&a, &a, &[(0, 200)]).is_empty());
        assert_eq!(runs(&[]), vec![]);
    }

    #[test]
    fn a_byte_is_settled_by_a_later_write_to_it_only() {
        let sent = [0u8; 8];
        // Same as sent: nothing to do.
        assert!(!unsettled(&sent, &sent, &[9; 8]));
        // Byte 0 differs after the marker and stays: send again.
        let after = [1, 0, 0, 0, 0, 0, 0, 0];
        assert!(unsettled(&sent, &after, &after));
        // It changed again since: a later write the joiner also gets.
        assert!(!unsettled(&sent, &after, &[2, 0, 0, 0, 0, 0, 0, 0]));
        // A later write to another byte of the word does not settle byte 0.
        assert!(unsettled(&sent, &after, &[1, 5, 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn observation_grows_and_is_bounded() {
        assert!(observe_delay(1) > observe_delay(0));
        assert_eq!(observe_delay(40), Duration::from_millis(20));
    }
}
