//! The joiner: a node whose adapter crashed and rejoined programs its PCT
//! again from the record (`pct_log`), maps the resync window for receive,
//! posts a join request and waits until a member has retransmitted the
//! control pages and the arena; then it clears the lock entries it left set.

use std::sync::{Arc, TryLockError};
use std::time::{Duration, Instant};

use firmware_model::{AdapterErrorStatus, NodeId, PctEntry};
use log::{debug, info, warn};

use super::notice::{status, Manager, POLL_BUSY};
use super::window::with_resync_window;
use super::JoinHost;
use super::{Coherence, Resync, BATCH};
use crate::error::McError;
use crate::layout::{JOIN_DONE, JOIN_REQUEST, META_LOCK, SERVE_LOCK};

/// How long the joiner waits for an answer before it posts its request again.
const REPOST: Duration = Duration::from_secs(5);

impl Manager {
    pub(super) fn join(&mut self, host: &Arc<dyn JoinHost>) -> Result<(), McError> {
        let inner = host.node();
        let (me, l) = (self.me, inner.layout);
        let t0 = Instant::now();
        if inner.coherence.set(Coherence::CatchingUp) == Coherence::Coherent {
            warn!(
                "node{me}: the adapter crashed and rejoined (epoch {}): catching up",
                self.epoch
            );
        } else {
            info!("node{me}: rejoined (epoch {}): catching up", self.epoch);
        }
        // 1. Receive again, as before the crash.
        host.node().port().replay()?;
        // This node serves nobody while it catches up; a serve lock entry it
        // left set when it crashed would block every member.
        host.node().store(
            Self::meta_addr(&l, SERVE_LOCK + 4 * me as usize),
            &0u32.to_le_bytes(),
        )?;
        let bytes = u64::from(l.resync_pages()) * u64::from(l.page_size);
        let others = host.node().members_mask() & !(1u64 << me);
        let server = if others == 0 {
            warn!("node{me}: no other member to catch up from: keeping this node's copy");
            None
        } else {
            // 2. The window aliases control pages and arena here.
            let mut frames = inner.control.frames();
            frames.extend(inner.arena.frames());
            with_resync_window(host.node(), PctEntry::receive(), &frames, || {
                self.request_and_wait(host)
            })?
        };
        repair_own_lock_entries(host)?;
        host.tables().forget_written();
        let report = Resync {
            epoch: self.epoch,
            server,
            elapsed: t0.elapsed(),
            bytes,
        };
        info!(
            "node{me}: coherent again after rejoining: {bytes} bytes from {} in {:?}",
            server.map_or("nobody".to_string(), |s| format!("node {}", s.0)),
            report.elapsed
        );
        inner.coherence.finish(report);
        Ok(())
    }

    /// 3. Post the request; wait for the answer. Returns the server.
    fn request_and_wait(&mut self, host: &Arc<dyn JoinHost>) -> Result<Option<NodeId>, McError> {
        let inner = host.node();
        let (me, l) = (self.me, inner.layout);
        let c = &inner.control;
        let req_off = JOIN_REQUEST + 8 * me as usize;
        let done_off = JOIN_DONE + 8 * me as usize;
        // Above anything this node asked for, even answers it missed.
        self.seq = self
            .seq
            .max(c.load_u64(req_off))
            .max(c.load_u64(done_off) >> 8)
            + 1;
        let seq = self.seq;
        let post = || {
            host.node()
                .store(Self::meta_addr(&l, req_off), &seq.to_le_bytes())
        };
        post()?;
        debug!("node{me}: join request {seq} posted");
        let start = Instant::now();
        let mut posted = start;
        loop {
            let done = c.load_u64(done_off);
            if done >> 8 >= seq {
                return Ok(Some(NodeId((done & 0xff) as u8)));
            }
            if Arc::strong_count(host) <= 1 {
                return Err(McError::Closed);
            }
            if let Some(st) = status(host.node()) {
                if !AdapterErrorStatus::from_word(st.error_status).online {
                    return Err(McError::Offline);
                }
                if st.members & !(1u64 << me) == 0 {
                    warn!("node{me}: every other member left while catching up: keeping this node's copy");
                    return Ok(None);
                }
                if posted.elapsed() > REPOST {
                    warn!(
                        "node{me}: join request {seq} unanswered for {:?} (members {:#x}): posting it again",
                        start.elapsed(),
                        st.members
                    );
                    post()?;
                    posted = Instant::now();
                }
            }
            std::thread::sleep(POLL_BUSY);
        }
    }
}

/// After catching up: clear this node's entries in lock arrays that no thread
/// of this node holds or is acquiring. Members ignored them while it was out;
/// now it is a member again, an entry left set when it crashed would block the
/// lock forever. Runs before the node is coherent again, so no thread of this
/// node is in the lock protocol past the entry check (see `lock.rs`).
fn repair_own_lock_entries(host: &Arc<dyn JoinHost>) -> Result<(), McError> {
    let inner = host.node();
    let (me, l) = (inner.me as usize, inner.layout);
    let c = &inner.control;
    let mut offsets = Vec::new();
    // The meta lock is held only inside a table update, under `meta`.
    let meta = match inner.meta.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    };
    if meta.is_some() && c.load_u32(META_LOCK + 4 * me) != 0 {
        offsets.push(META_LOCK + 4 * me);
    }
    for i in 0..l.lock_capacity() {
        let off = l.lock_offset(i);
        if c.load_u32(off + 4 * me) != 0 && !host.local_locks().held(off) {
            offsets.push(off + 4 * me);
        }
    }
    if !offsets.is_empty() {
        info!(
            "node{me}: clearing {} lock entries this node left set when it crashed",
            offsets.len()
        );
        let zero = 0u32.to_le_bytes();
        let records: Vec<(u64, &[u8])> = offsets
            .iter()
            .map(|&o| (l.page_addr(0) + o as u64, &zero[..]))
            .collect();
        for batch in records.chunks(BATCH) {
            host.node().store_batch(batch)?;
        }
    }
    drop(meta);
    Ok(())
}
