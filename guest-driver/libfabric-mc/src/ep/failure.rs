//! Failures (seed 004, "Error Management": detection, not recovery): a
//! channel that UMP found damaged fails its peer's operations; a stall
//! that only a lost packet explains fails the whole endpoint; the cause is
//! printed once.

use std::time::{Duration, Instant};

use ump::UmpError;

use super::{say, Ep, Recv, Sent, State, Target};

/// How long pending work may see no data at all, with the node's network
/// error count moved, before the endpoint gives up (a lost packet that
/// left a message unfinished, which no message boundary will reveal).
const STALL: Duration = Duration::from_secs(2);
/// How long a message that has begun to arrive may stop before the
/// endpoint gives up (a dropped packet is counted nowhere). Long, because
/// a healthy writer can stop too: 5 s failed a fault-free run of 8 ranks
/// with 4 MiB messages on 2 loaded cores in a debug build (the writer's
/// CRC over the payload, before the trailer, with a tenth of a core).
const STALL_PARTIAL: Duration = Duration::from_secs(30);
/// How often a stalled endpoint reads the status page for lost packets.
const LOSS_CHECK: Duration = Duration::from_millis(50);

impl Ep {
    /// Mark the peer failed, fail what depended on it, say why once.
    pub(super) fn peer_failed(&self, st: &mut State, from: u64, why: String) {
        let first = match st.peers.get_mut(&from) {
            Some(p) if p.failed.is_none() => {
                p.failed = Some(why.clone());
                if let Some(inc) = p.incoming.take() {
                    match inc.to {
                        Target::Recv(r) => Self::fail_recv(st, &r, libc::EIO as i64),
                        // An unexpected message whose payload will never
                        // come whole: it goes, and a receive that took it
                        // while it streamed in fails (it waited for ever:
                        // seen under 0.05% drops).
                        Target::Unexp(id) => {
                            if let Some(i) = st.unexpected.iter().position(|u| u.id == id) {
                                if let Some(u) = st.unexpected.remove(i) {
                                    if let Some(r) = u.taken {
                                        Self::fail_recv(st, &r, libc::EIO as i64);
                                    }
                                }
                            }
                        }
                    }
                }
                if let Some(ch) = st.peers.get_mut(&from).and_then(|p| p.ch.take()) {
                    let _ = self.ump.close(ch);
                }
                true
            }
            _ => false,
        };
        if !first {
            return;
        }
        // fail_all said it already, for every peer.
        if st.failed.is_none() {
            say(self.dom.me, &why);
        }
        // A receive from this peer, or from anyone, may have wanted the
        // lost message.
        let (dead, live): (Vec<Recv>, Vec<Recv>) = st
            .posted
            .drain(..)
            .partition(|r| r.from.is_none_or(|f| f == from));
        st.posted = live.into();
        for r in &dead {
            Self::fail_recv(st, r, libc::EIO as i64);
        }
        let (dead, live): (Vec<Sent>, Vec<Sent>) = st.sends.drain(..).partition(|s| s.to == from);
        st.sends = live.into();
        for s in &dead {
            Self::complete_send(st, &s.spec, libc::EIO as i64);
        }
    }

    /// Fail everything: the endpoint cannot go on.
    pub(super) fn fail_all(&self, st: &mut State, why: String) {
        if st.failed.is_some() {
            return;
        }
        say(self.dom.me, &why);
        st.failed = Some(why.clone());
        let peers: Vec<u64> = st.peers.keys().copied().collect();
        for p in peers {
            self.peer_failed(st, p, why.clone());
        }
        let dead: Vec<Recv> = st.posted.drain(..).collect();
        for r in &dead {
            Self::fail_recv(st, r, libc::EIO as i64);
        }
        let dead: Vec<Sent> = st.sends.drain(..).collect();
        for s in &dead {
            Self::complete_send(st, &s.spec, libc::EIO as i64);
        }
    }

    pub(super) fn damaged(&self, st: &mut State, from: u64, e: &UmpError) {
        let why = format!(
            "the message stream from node{} is broken, the run cannot go on: {}",
            crate::domain::node_of(from).unwrap_or(0),
            mc_api::ErrorChain(e)
        );
        self.peer_failed(st, from, why);
    }

    /// A packet lost where no message boundary will show it: a message
    /// begun and stopped for STALL_PARTIAL, or pending work that has seen
    /// nothing for STALL while this node's network error count, or its
    /// adapter's count of packets lost on its link (drops, which no error
    /// count shows: mc-api's `losses`), moved.
    /// Give up, naming the cause.
    pub(super) fn watch_stall(&self, st: &mut State) {
        let busy = !st.posted.is_empty()
            || !st.sends.is_empty()
            || st.peers.values().any(|p| p.incoming.is_some());
        if !busy {
            st.last_data = None;
            return;
        }
        let since = *st.last_data.get_or_insert_with(Instant::now);
        if since.elapsed() < STALL {
            return;
        }
        // A message whose header came, with its payload stopped for
        // STALL_PARTIAL: the writer streams a message without pausing while
        // this end reads, so a packet of it (a producer index) was dropped,
        // which no error count sees.
        if since.elapsed() >= STALL_PARTIAL {
            let partial = st
                .peers
                .iter()
                .find_map(|(&from, p)| p.incoming.as_ref().map(|i| (from, i.got, i.hdr.len)));
            if let Some((from, got, len)) = partial {
                let why = format!(
                    "a message of {len} bytes from node{} stopped arriving after {got} bytes and nothing has moved for {} s: a packet was lost on the network (Memory Channel does not retransmit), the run cannot go on",
                    crate::domain::node_of(from).unwrap_or(0),
                    STALL_PARTIAL.as_secs()
                );
                self.fail_all(st, why);
                return;
            }
        }
        // The status page, read at most every LOSS_CHECK while stalled.
        if st.loss_checked.is_some_and(|at| at.elapsed() < LOSS_CHECK) {
            return;
        }
        st.loss_checked = Some(Instant::now());
        let mc = self.dom.memory_channel();
        let now = mc.error_count();
        let losses = mc.losses();
        // Losses before the endpoint opened (UMP's set-up: a directory
        // record that never came whole) explain a stall too, given longer.
        let earlier = losses > 0 && since.elapsed() >= mc_api::LOSS_WAIT_EARLIER;
        if now != st.err_base || losses != st.loss_base || earlier {
            st.last_data = Some(Instant::now());
            let why = format!(
                "no data has moved for {} s while work is pending, and packets were lost on the network \
                 (node{}'s adapter counted {} packets lost on its link since the Memory Channel API \
                 opened, {} since the endpoint did; the Memory Channel error count went from {} to {}): \
                 a lost packet left a message, its room or its channel unannounced (Memory Channel \
                 does not retransmit), the run cannot go on",
                since.elapsed().as_secs(),
                self.dom.me,
                losses,
                losses.saturating_sub(st.loss_base),
                st.err_base,
                now,
            );
            self.fail_all(st, why);
        }
    }

    /// Why an operation to or from `to` (None: a receive from any source)
    /// cannot be done. A receive from any source could want a lost message
    /// of any failed peer, as the ones posted when it failed could
    /// (`peer_failed`): Open MPI's MTL posts every receive so, and one
    /// posted after the failure waited for ever (seen under 0.05% drops).
    pub(super) fn failure(&self, st: &State, to: Option<u64>) -> Option<String> {
        st.failed.clone().or_else(|| match to {
            Some(t) => st.peers.get(&t).and_then(|p| p.failed.clone()),
            None => st.peers.values().find_map(|p| p.failed.clone()),
        })
    }
}
