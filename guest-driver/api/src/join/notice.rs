//! The management thread of a node (seed 004: "Low-level kernel routines
//! detect cluster membership change and wake up a management service thread
//! on each node"): it polls the status page, notices when the adapter goes
//! offline and when it rejoined (a fresh adapter's PCT is empty: the meta
//! page, mapped for transmit since `open`, reads back disabled), and then
//! catches up (`joiner`); while coherent, it serves other nodes' join
//! requests (`server`).
//!
//! The probe reads the PCT entry rather than looking for a refused store: a
//! store is posted, and the adapter reports refusals for the node as a whole
//! (the last one, to whichever thread flushes first), so a refusal does not
//! say whose store it was.

use std::sync::Arc;
use std::time::{Duration, Instant};

use firmware_model::abi::{Status, StatusPage};
use firmware_model::AdapterErrorStatus;
use log::{debug, warn};

use super::{Coherence, JoinHost};
use crate::error::{McError, WaitFor};
use crate::layout::{Layout, JOIN_MARK};
use crate::node::{wait_for_loopback, Node};
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
pub(crate) fn start(host: &Arc<dyn JoinHost>) -> Result<(), McError> {
    let weak = Arc::downgrade(host);
    let me = host.node().me;
    let epoch = host.node().port().status().membership_epoch;
    std::thread::Builder::new()
        .name(format!("mc-join{me}"))
        .spawn(move || {
            let mut m = Manager::new(me, epoch);
            loop {
                let Some(host) = weak.upgrade() else { break };
                m.step(&host);
                drop(host);
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

    fn step(&mut self, host: &Arc<dyn JoinHost>) {
        let inner = host.node();
        let me = self.me;
        let Some(st) = status(host.node()) else {
            return;
        };
        if !AdapterErrorStatus::from_word(st.error_status).online {
            if inner.coherence.set(Coherence::Offline) != Coherence::Offline {
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
        if (self.probe_pending || !inner.coherence.is_coherent()) && now >= self.not_before {
            let rejoined = match Self::adapter_is_fresh(host) {
                Ok(fresh) => fresh || !inner.coherence.is_coherent(),
                Err(McError::Driver(e)) if e.status() == Some(Status::Offline) => {
                    inner.coherence.set(Coherence::Offline);
                    return;
                }
                Err(e) => {
                    warn!(
                        "node{me}: probing this node's PCT after a membership change: {}",
                        crate::ErrorChain(&e)
                    );
                    self.not_before = now + RETRY;
                    return;
                }
            };
            self.probe_pending = false;
            if rejoined {
                self.last_activity = Instant::now();
                if let Err(e) = self.join(host) {
                    warn!(
                        "node{me}: catching up after rejoining: {}; trying again",
                        crate::ErrorChain(&e)
                    );
                    self.probe_pending = true;
                    self.not_before = Instant::now() + RETRY;
                }
                return;
            }
        }
        if inner.coherence.is_coherent() && now >= self.not_before {
            self.serve_pending(host);
        }
    }

    /// Whether the adapter is a fresh one: page 0 (the meta page) is mapped
    /// for transmit from `open` on, and a rejoined adapter's PCT is empty.
    fn adapter_is_fresh(host: &Arc<dyn JoinHost>) -> Result<bool, McError> {
        Ok(host.node().port().pct_entry(0)?.transmit.is_none())
    }

    /// Store a marker (page 0: broadcast, loopback) and wait until it comes
    /// back: everything ordered before it is then in this node's copy. If
    /// this node's adapter crashes meanwhile, the marker (refused) never
    /// comes back: [`McError::Offline`], and the next step notices the rest.
    pub(super) fn marker(&mut self, host: &Arc<dyn JoinHost>) -> Result<(), McError> {
        self.mark += 1;
        let v = self.mark;
        let l = host.node().layout;
        let off = JOIN_MARK + 8 * self.me as usize;
        let epoch = self.epoch;
        host.node()
            .store(Self::meta_addr(&l, off), &v.to_le_bytes())?;
        let c = &host.node().control;
        let mut polls = 0u32;
        let back = wait_for_loopback(
            host.node(),
            WaitFor::JoinMarker,
            || {
                if c.load_u64(off) == v {
                    return Some(true);
                }
                // This thread is the one that would notice a crash: look now
                // and then (the status page takes the port lock).
                polls = polls.wrapping_add(1);
                let left = polls % 64 == 0
                    && status(host.node()).is_some_and(|st| {
                        !AdapterErrorStatus::from_word(st.error_status).online
                            || (st.membership_epoch != epoch
                                && Self::adapter_is_fresh(host).unwrap_or(false))
                    });
                left.then_some(false)
            },
            || host.node().arrival(host.node().control_addr(off), 8),
        )?;
        if back {
            Ok(())
        } else {
            Err(McError::Offline)
        }
    }
}

/// The status page, or None when it could not be read whole this time (the
/// port then gives an all-zero page, which would read as "offline"; epochs
/// start at 1).
pub(super) fn status(node: &Node) -> Option<StatusPage> {
    let st = node.port().status();
    (st.membership_epoch != 0).then_some(st)
}

/// Whether this node's adapter is offline (it crashed), as its status page
/// says; false when the page could not be read whole this time.
pub(crate) fn adapter_offline(node: &Node) -> bool {
    status(node).is_some_and(|st| !AdapterErrorStatus::from_word(st.error_status).online)
}
