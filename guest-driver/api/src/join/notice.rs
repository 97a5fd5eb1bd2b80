//! The management thread of a node (seed 004: "Low-level kernel routines
//! detect cluster membership change and wake up a management service thread
//! on each node"): it polls the status page, notices when the adapter goes
//! offline and when it rejoined (a store to the node's marker word is refused
//! by a fresh, empty PCT), and then catches up (`joiner`); while coherent, it
//! serves other nodes' join requests (`server`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use firmware_model::abi::{Status, StatusPage};
use firmware_model::AdapterErrorStatus;
use log::{debug, warn};

use super::Coherence;
use crate::channel::{wait_for, MemoryChannel, OP_TIMEOUT};
use crate::error::{McError, WaitFor};
use crate::layout::{Layout, JOIN_MARK};
use crate::port::McPort;

/// How long to back off after a failed join or serve.
pub(super) const RETRY: Duration = Duration::from_millis(100);

/// Poll intervals of the management thread: short for a while after anything
/// happened, longer when all is quiet. Never a spin: two cores here.
pub(super) const POLL_BUSY: Duration = Duration::from_millis(1);
const POLL_IDLE: Duration = Duration::from_millis(2);
const BUSY_FOR: Duration = Duration::from_secs(1);

/// Start the management thread of a node whose API just opened. It holds only
/// a weak reference and ends when the last handle is dropped.
pub(crate) fn start(mc: &MemoryChannel) -> Result<(), McError> {
    let weak = Arc::downgrade(&mc.inner);
    let me = mc.inner.me;
    let epoch = mc.port().status().membership_epoch;
    std::thread::Builder::new()
        .name(format!("mc-join{me}"))
        .spawn(move || {
            let mut m = Manager::new(me, epoch);
            loop {
                let Some(inner) = weak.upgrade() else { break };
                let mc = MemoryChannel { inner };
                m.step(&mc);
                drop(mc);
                std::thread::sleep(if m.last_activity.elapsed() < BUSY_FOR {
                    POLL_BUSY
                } else {
                    POLL_IDLE
                });
            }
            debug!("node{me}: late-join thread ends: the API was closed");
        })
        .map_err(McError::JoinThread)?;
    Ok(())
}

/// The management thread's own state.
pub(super) struct Manager {
    pub(super) me: u32,
    pub(super) epoch: u64,
    pub(super) probe_pending: bool,
    /// Marker values: unique for the life of the process.
    pub(super) mark: u64,
    /// The last join request this node posted.
    pub(super) seq: u64,
    /// When this node first saw each pending request (node, seq, when).
    pub(super) seen: Vec<(u32, u64, Instant)>,
    pub(super) last_activity: Instant,
    pub(super) not_before: Instant,
}

impl Manager {
    fn new(me: u32, epoch: u64) -> Self {
        let now = Instant::now();
        Manager {
            me,
            epoch,
            probe_pending: false,
            mark: 0,
            seq: 0,
            seen: Vec::new(),
            last_activity: now,
            not_before: now,
        }
    }

    pub(super) fn meta_addr(l: &Layout, offset: usize) -> u64 {
        l.page_addr(0) + offset as u64
    }

    fn step(&mut self, mc: &MemoryChannel) {
        let inner = &*mc.inner;
        let me = self.me;
        let Some(st) = status(mc) else { return };
        if !AdapterErrorStatus::from_word(st.error_status).online {
            if inner.join.set(Coherence::Offline) != Coherence::Offline {
                warn!("node{me}: adapter offline: out of the cluster until it rejoins");
                self.last_activity = Instant::now();
            }
            self.probe_pending = true;
            return;
        }
        if st.membership_epoch != self.epoch {
            debug!(
                "node{me}: membership epoch {} -> {} (members {:#x})",
                self.epoch, st.membership_epoch, st.members
            );
            self.epoch = st.membership_epoch;
            self.probe_pending = true;
            self.last_activity = Instant::now();
        }
        let now = Instant::now();
        if (self.probe_pending || !inner.join.is_coherent()) && now >= self.not_before {
            let rejoined = match self.probe(mc) {
                Ok(_) => !inner.join.is_coherent(),
                // Page 0 (the meta page) is always mapped for transmit: the
                // PCT is empty, so the adapter is a fresh one.
                Err(McError::Refused {
                    status: Status::TransmitDisabled,
                    detail: 0,
                }) => true,
                Err(McError::Refused {
                    status: Status::Offline,
                    ..
                }) => {
                    inner.join.set(Coherence::Offline);
                    return;
                }
                Err(e) => {
                    warn!("node{me}: probing this node's PCT after a membership change: {e}");
                    self.not_before = now + RETRY;
                    return;
                }
            };
            self.probe_pending = false;
            if rejoined {
                self.last_activity = Instant::now();
                if let Err(e) = self.join(mc) {
                    warn!("node{me}: catching up after rejoining: {e}; trying again");
                    self.probe_pending = true;
                    self.not_before = Instant::now() + RETRY;
                }
                return;
            }
        }
        if inner.join.is_coherent() && now >= self.not_before {
            self.serve_pending(mc);
        }
    }

    /// A store to this node's marker word (page 0: broadcast, loopback),
    /// flushed: the adapter's verdict on it (or on an earlier store) comes
    /// back as a refusal.
    fn probe(&mut self, mc: &MemoryChannel) -> Result<u64, McError> {
        self.mark += 1;
        let l = mc.inner.layout;
        let off = JOIN_MARK + 8 * self.me as usize;
        mc.store(Self::meta_addr(&l, off), &self.mark.to_le_bytes())?;
        mc.flush()?;
        Ok(self.mark)
    }

    /// Store a marker and wait until it comes back: everything ordered before
    /// it is then in this node's copy.
    pub(super) fn marker(&mut self, mc: &MemoryChannel) -> Result<(), McError> {
        let v = self.probe(mc)?;
        let off = JOIN_MARK + 8 * self.me as usize;
        let c = &mc.inner.control;
        wait_for(WaitFor::JoinMarker, OP_TIMEOUT, || {
            (c.load_u64(off) == v).then_some(())
        })
    }
}

/// The status page, or None when it could not be read whole this time (the
/// port then gives an all-zero page, which would read as "offline"; epochs
/// start at 1).
pub(super) fn status(mc: &MemoryChannel) -> Option<StatusPage> {
    let st = mc.port().status();
    (st.membership_epoch != 0).then_some(st)
}
