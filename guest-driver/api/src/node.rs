//! What every part of the API works through (a [`Node`]): the adapter, the
//! control pages, the coherent arena and the ACK page, the store path, the
//! node's coherence, and the one way the API waits for the device or
//! another node. The parts that keep state of their own (`table`, `lock`,
//! `region`, `join`) are handed a `Node` and own the rest; `channel`
//! composes them into the public handle.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use firmware_model::abi::{EventRecord, Registers};
use firmware_model::NodeId;
use mc_driver::backoff::{poll_until, poll_until_with, BackoffPolicy};
use mc_driver::{vclock, ArrivalTable};

use crate::coherence::JoinState;
use crate::error::{McError, WaitFor};
use crate::layout::Layout;
use crate::loss::{LossCounts, LossSource, LossWatch};
use crate::lost::LostPacket;
use crate::pct_log::RecordingPort;
use crate::port::{McPort, ReceiveMemory, StorePath};

/// How long cluster operations wait before they report a timeout.
pub(crate) const OP_TIMEOUT: Duration = Duration::from_secs(30);

/// A node's adapter and the memory every part of the API shares.
pub(crate) struct Node {
    port: Mutex<RecordingPort>,
    /// Posted stores: every thread uses it at once, outside `port`'s lock.
    pub(crate) stores: Arc<dyn StorePath>,
    pub(crate) regs: Registers,
    pub(crate) layout: Layout,
    pub(crate) me: u32,
    /// The control pages (meta page, tables, lock arrays), received by every
    /// node.
    pub(crate) control: Box<dyn ReceiveMemory>,
    /// The coherent arena, received by every node.
    pub(crate) arena: Arc<dyn ReceiveMemory>,
    /// This node's ACK page.
    pub(crate) ack: Box<dyn ReceiveMemory>,
    /// Serialises this node's threads on the meta lock.
    pub(crate) meta: Mutex<()>,
    /// Serialises this node's threads on the ACK page.
    pub(crate) ack_slot: Mutex<()>,
    /// Which slot of the ACK page the next check uses: each check has its own
    /// slot, so a late answer to an earlier check cannot be taken for its own.
    pub(crate) ack_seq: AtomicU32,
    pub(crate) reliable: bool,
    /// Events from the device not yet asked for.
    pub(crate) events: Mutex<Vec<EventRecord>>,
    /// Where the node stands with the coherent state (moved by `join`).
    pub(crate) coherence: JoinState,
    /// Stamped packets' virtual arrivals (virtual time on).
    pub(crate) arrivals: Option<ArrivalTable>,
    /// The adapter's loss counts when the API opened (`loss`).
    pub(crate) loss_base: LossCounts,
    /// Cluster locks whose holders' release this node saw lost
    /// (`spinlock`): a later wait on one fails at once while its holders
    /// are unchanged, instead of waiting for the evidence again.
    pub(crate) lost_releases: Mutex<Vec<crate::lost::LostRelease>>,
}

/// Node `n` of the cluster. Node numbers are below the cluster's size,
/// which `open` checked is at most 64 (`Layout::fits`, and this node's own
/// number against it).
pub(crate) fn node_id(n: u32) -> NodeId {
    NodeId(u8::try_from(n).expect("node numbers are below 64"))
}

impl Node {
    /// This node.
    pub(crate) fn id(&self) -> NodeId {
        node_id(self.me)
    }

    /// The node whose adapter's bring-up (`open`) has mapped the control
    /// pages, the arena and the ACK page.
    pub(crate) fn new(
        port: RecordingPort,
        regs: Registers,
        layout: Layout,
        control: Box<dyn ReceiveMemory>,
        arena: Arc<dyn ReceiveMemory>,
        ack: Box<dyn ReceiveMemory>,
        reliable: bool,
    ) -> Node {
        let status = port.status();
        Node {
            loss_base: LossCounts {
                drops: status.drops,
                errors: status.errors,
            },
            stores: port.store_path(),
            arrivals: port.arrival_table(),
            port: Mutex::new(port),
            regs,
            layout,
            me: regs.node_id,
            control,
            arena,
            ack,
            meta: Mutex::new(()),
            ack_slot: Mutex::new(()),
            ack_seq: AtomicU32::new(0),
            reliable,
            events: Mutex::new(Vec::new()),
            coherence: JoinState::new(),
            lost_releases: Mutex::new(Vec::new()),
        }
    }

    /// The latest virtual arrival of a stamped packet into
    /// `[global_addr, global_addr + len)` here, if the node keeps them.
    pub(crate) fn arrival(&self, global_addr: u64, len: u64) -> Option<u64> {
        self.arrivals.as_ref()?.arrival_range(global_addr, len)
    }

    /// Global address of byte `offset` of the control pages.
    pub(crate) fn control_addr(&self, offset: usize) -> u64 {
        self.layout.page_addr(0) + offset as u64
    }

    /// The adapter, for one request at a time.
    pub(crate) fn port(&self) -> MutexGuard<'_, RecordingPort> {
        self.port.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl LossSource for Node {
    /// From the adapter's counts on its status page, against those it had
    /// when the API opened.
    fn losses_since_open(&self) -> u64 {
        let s = self.port().status();
        let now = LossCounts {
            drops: s.drops,
            errors: s.errors,
        };
        now.since(self.loss_base, self.reliable)
    }
}

impl Drop for Node {
    /// The last user is gone: hand what is still queued to the hub, so a
    /// program that ends right after its last store does not lose it.
    fn drop(&mut self) {
        if let Err(e) = self.stores.flush() {
            log::warn!(
                "node{}: closing the Memory Channel API: {}",
                self.me,
                crate::ErrorChain(&e)
            );
        }
    }
}

/// How the API's waits for other nodes (a barrier, a contended lock, an
/// ACK answer, a notification) step down: spin, a few yields, then sleeps
/// that grow to a cap proportional to the cluster's size. A wait for other
/// nodes can last as long as they compute; with dozens of guest processes
/// on a few cores, waiters that yield or wake every few microseconds take
/// the cores from the nodes they wait for. With the cap at
/// `nodes x SLEEP_PER_NODE`, all waiters together wake at most about
/// `1 / SLEEP_PER_NODE` times a second however many nodes there are.
pub(crate) fn wait_policy(nodes: u32) -> BackoffPolicy {
    BackoffPolicy {
        spins: 200,
        yields: 4,
        max_sleep: (SLEEP_PER_NODE * nodes.max(1)).clamp(MIN_SLEEP_CAP, MAX_SLEEP_CAP),
    }
}
const SLEEP_PER_NODE: Duration = Duration::from_micros(16);
const MIN_SLEEP_CAP: Duration = Duration::from_micros(50);
const MAX_SLEEP_CAP: Duration = Duration::from_millis(1);

/// Wait ([`wait_policy`]) until `f` yields a value: the device or another
/// node is about to write. `what` names it in the timeout error.
///
/// In virtual time the wait costs the thread nothing of its own: it resumes
/// at the later of its time and `arrival()` (the virtual arrival of what it
/// waited for, read once `f` saw it), plus the cost of noticing
/// (`vclock::wait_end`).
pub(crate) fn wait_for<T>(
    node: &Node,
    what: WaitFor,
    timeout: Duration,
    mut f: impl FnMut() -> Option<T>,
    arrival: impl FnOnce() -> Option<u64>,
) -> Result<T, McError> {
    vclock::wait_begin();
    let r = poll_until_with(wait_policy(node.layout.nodes), timeout, || {
        Ok::<_, std::convert::Infallible>(f())
    })
    .unwrap_or_else(|e| match e {});
    vclock::wait_end(if r.is_some() { arrival() } else { None });
    r.ok_or(McError::Timeout {
        after: timeout,
        waiting_for: what,
    })
}

/// [`wait_for`], for a store of another node that a lost packet would
/// leave missing for ever: once the wait has lasted long with evidence
/// that packets were lost on this node's link (`loss`), it fails with
/// [`McError::LostPacket`], naming the packet `lost()` says it waits for,
/// instead of waiting out `timeout`.
pub(crate) fn wait_for_others<T>(
    node: &Node,
    what: WaitFor,
    timeout: Duration,
    mut f: impl FnMut() -> Option<T>,
    lost: impl Fn() -> LostPacket,
    arrival: impl FnOnce() -> Option<u64>,
) -> Result<T, McError> {
    vclock::wait_begin();
    let mut watch = LossWatch::new(node);
    let r = poll_until_with(wait_policy(node.layout.nodes), timeout, || {
        if let Some(v) = f() {
            return Ok(Some(v));
        }
        match watch.check() {
            Some(evidence) => Err(McError::LostPacket {
                waiting_for: what,
                lost: lost(),
                evidence,
            }),
            None => Ok(None),
        }
    });
    vclock::wait_end(if matches!(r, Ok(Some(_))) {
        arrival()
    } else {
        None
    });
    r?.ok_or(McError::Timeout {
        after: timeout,
        waiting_for: what,
    })
}

/// How long a wait for this node's own store gives it before asking whether
/// it was lost, when the cluster error count has moved meanwhile.
const LOSS_CHECK_AFTER_ERROR: Duration = Duration::from_millis(2);
/// ... and when it has not (a store dropped without trace counts no error).
const LOSS_CHECK_AFTER: Duration = Duration::from_millis(250);
/// How long one such ACK query may take (it is lost while the link is down:
/// the wait then goes on and asks again later).
const LOSS_QUERY_TIMEOUT: Duration = Duration::from_secs(1);

/// Wait until `f` sees a store of this node's own come back by loopback.
///
/// Memory Channel does not retransmit (seed 004, Error Management): a store
/// the network corrupts is discarded by the receiver, which counts an error;
/// a dropped one is simply gone. So a loopback that has not come back is
/// either late or lost, and the ACK page tells which: its answer lands only
/// once everything this node queued before the query has reached every
/// adapter. A store still missing after that answer will never come, and
/// the wait ends at once with [`McError::Lost`] instead of after
/// [`OP_TIMEOUT`]. The query is made soon after the cluster error count
/// moves, and now and then otherwise.
///
/// In virtual time, as [`wait_for`]: the thread resumes at `arrival()`, the
/// virtual arrival of its own store back here, at the earliest.
pub(crate) fn wait_for_loopback<T>(
    node: &Node,
    what: WaitFor,
    f: impl FnMut() -> Option<T>,
    arrival: impl FnOnce() -> Option<u64>,
) -> Result<T, McError> {
    vclock::wait_begin();
    let r = loopback_wait(node, what, f);
    vclock::wait_end(if r.is_ok() { arrival() } else { None });
    r
}

fn loopback_wait<T>(
    node: &Node,
    what: WaitFor,
    mut f: impl FnMut() -> Option<T>,
) -> Result<T, McError> {
    let start = Instant::now();
    let errors_before = node.error_count();
    let mut asked_at = start;
    loop {
        if let Some(v) = poll_until(LOSS_CHECK_AFTER_ERROR, &mut f) {
            return Ok(v);
        }
        let errors_now = node.error_count();
        // Each poll above lasted LOSS_CHECK_AFTER_ERROR already.
        if errors_now != errors_before || asked_at.elapsed() >= LOSS_CHECK_AFTER {
            asked_at = Instant::now();
            // Only a query that was answered proves anything; one lost to a
            // link that is down, or refused by an adapter that crashed, is
            // asked again later (`f` notices a crash by itself).
            if let Ok(Some(())) = node.ack_round_trip(LOSS_QUERY_TIMEOUT, |_, _, _| ()) {
                if let Some(v) = f() {
                    return Ok(v);
                }
                return Err(McError::Lost {
                    waiting_for: what,
                    errors_before,
                    errors_now: node.error_count(),
                });
            }
        }
        if start.elapsed() >= OP_TIMEOUT {
            return Err(McError::Timeout {
                after: OP_TIMEOUT,
                waiting_for: what,
            });
        }
    }
}
