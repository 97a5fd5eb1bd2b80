//! The Memory Channel API, after the TruCluster Memory Channel API (seed 004,
//! Table 1), in Rust: regions allocated by cluster-wide key and attached for
//! transmit or receive, cluster spinlocks, error counts, the host list and
//! notifications.
//!
//! | TruCluster | here |
//! |---|---|
//! | `imc_asalloc` | [`MemoryChannel::region_alloc`] |
//! | `imc_asattach` | [`MemoryChannel::attach_transmit`], [`MemoryChannel::attach_receive`] |
//! | `imc_asdetach` | dropping the [`TxRegion`] / [`RxRegion`] |
//! | `imc_asdealloc` | [`MemoryChannel::region_dealloc`] |
//! | `imc_lkalloc` | [`MemoryChannel::lock_alloc`] |
//! | `imc_lkacquire` / `imc_lkrelease` | [`LockSet::acquire`] / [`LockSet::release`] |
//! | `imc_lkdealloc` | [`LockSet::dealloc`] |
//! | `imc_rderrcnt` | [`MemoryChannel::error_count`] |
//! | `imc_ckerrcnt` | [`MemoryChannel::check_errors`] |
//! | `imc_gethosts` | [`MemoryChannel::hosts`] |
//!
//! All cluster-wide bookkeeping lives in Memory Channel space (see [`layout`]),
//! updated under a cluster spinlock with old/new copies and a toggle; there is
//! no side channel between nodes. A node whose adapter crashed and rejoined is
//! brought up to date by a surviving member (`join`).

mod adapter_port;
mod barrier;
mod join;
pub mod layout;
mod lock;
mod pct_log;
pub mod port;
mod region;
pub mod table;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use firmware_model::abi::{event_type, EventRecord, Registers, Status};
use firmware_model::{AdapterErrorStatus, NodeId, PctEntry};
use log::{debug, info};
use mc_driver::backoff::poll_until;

pub use adapter_port::AdapterPort;
pub use barrier::Barrier;
pub use join::{Coherence, Resync};
pub use lock::LockSet;
/// The one way the guest side waits (re-exported for the layers above).
pub use mc_driver::backoff;
pub use port::{McPort, ReceiveMemory};
pub use region::{RxRegion, TxRegion};

use layout::{Layout, ARENA_PAGE, CONTROL_PAGES, HELLO, LOCKSET_TOGGLE, META_LOCK, REGION_TOGGLE};
pub use table::Permissions;
use table::{first_fit, LockSetEntry, RegionEntry, Table, TableEntry};

/// Errors of the Memory Channel API.
#[derive(Debug, thiserror::Error)]
pub enum McError {
    #[error("adapter: {0}")]
    Device(String),
    #[error("the adapter refused the request: {status} (detail {detail})")]
    Refused { status: Status, detail: u32 },
    #[error("no region with {0}")]
    NoSuchRegion(String),
    #[error("region key {key} exists with {size} bytes, not {wanted}")]
    RegionSize { key: u32, size: u64, wanted: u64 },
    #[error("no lock set with key {0}")]
    NoSuchLockSet(u32),
    #[error("lock set key {0} already exists (exclusive creation)")]
    LockSetExists(u32),
    #[error("lock set key {key} exists with {count} locks, not {wanted}")]
    LockSetSize { key: u32, count: u32, wanted: u32 },
    #[error("out of Memory Channel space: {0}")]
    NoSpace(String),
    #[error("{what} is busy: {reason}")]
    Busy { what: String, reason: String },
    #[error("lock {index} of set {set} is not held by this node")]
    NotHeld { set: u32, index: u32 },
    #[error("lock {index} of set {set} is already held by this node")]
    AlreadyHeld { set: u32, index: u32 },
    #[error("node {node} may not attach region {id} for {direction}: the creator's permissions forbid it")]
    PermissionDenied {
        node: u8,
        id: u32,
        direction: &'static str,
    },
    #[error("point-to-point transmit to {0} is not possible here: it must be another node of the cluster, and the region an ordinary (not coherent) one")]
    BadDestination(NodeId),
    #[error("lock index {index} out of range: set {set} has {count} locks")]
    NoSuchLock { set: u32, index: u32, count: u32 },
    #[error("access of {len} bytes at offset {offset} is outside the {size}-byte region")]
    OutOfBounds {
        offset: usize,
        len: usize,
        size: usize,
    },
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, String),
    #[error("this node's adapter is offline (crashed): it is out of the cluster until it rejoins")]
    Offline,
    #[error("corrupt Memory Channel state: {0}")]
    Corrupt(String),
    #[error("the cluster layout does not fit: {0}")]
    Layout(String),
}

/// How a region is shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    Shared,
    /// No other node may attach in the same direction.
    Exclusive,
}

/// Options for [`MemoryChannel::open`].
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Bytes of the coherent arena (coherent regions are allocated there).
    pub arena_bytes: u64,
    /// How long to wait for every member to open the API.
    pub rendezvous_timeout: Duration,
    /// Check every store with the ACK page and send it again until it went
    /// through clean: "save count, write, check, retry" (seed 004, Error
    /// Management) applied to everything, so programs survive corrupted packets
    /// and link flaps, more slowly. Silent drops are not detected.
    pub reliable: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            arena_bytes: 4 << 20,
            rendezvous_timeout: Duration::from_secs(60),
            reliable: false,
        }
    }
}

/// Members of the cluster (imc_gethosts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostList {
    pub epoch: u64,
    pub members: Vec<NodeId>,
}

/// Result of an ACK-page check (imc_ckerrcnt).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorCheck {
    /// The cluster error count including every error up to the check.
    pub count: u64,
    /// Every adapter's error status, word i for node i.
    pub statuses: Vec<AdapterErrorStatus>,
}

impl ErrorCheck {
    /// Every member online with its link up.
    pub fn all_healthy(&self, members: u64) -> bool {
        self.statuses
            .iter()
            .enumerate()
            .all(|(i, s)| members & (1 << i) == 0 || s.is_healthy())
    }
}

/// A page written event on an interrupt-on-receive region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notification {
    pub page: u32,
    pub source: NodeId,
}

/// This node's attachments of one region.
#[derive(Default)]
struct LocalAttach {
    /// Loopback, and the destination (None = broadcast).
    tx: Option<(bool, Option<NodeId>)>,
    rx: Option<(Arc<dyn ReceiveMemory>, bool)>,
}

pub(crate) struct Inner {
    port: Mutex<pct_log::RecordingPort>,
    regs: Registers,
    layout: Layout,
    me: u32,
    control: Box<dyn ReceiveMemory>,
    arena: Arc<dyn ReceiveMemory>,
    ack: Box<dyn ReceiveMemory>,
    /// Serialises this node's threads on the meta lock and the ACK slot.
    meta: Mutex<()>,
    ack_slot: Mutex<()>,
    /// Which slot of the ACK page the next check uses: each check has its own
    /// slot, so a late answer to an earlier check cannot be taken for its own.
    ack_seq: std::sync::atomic::AtomicU32,
    reliable: bool,
    attach: Mutex<HashMap<u32, LocalAttach>>,
    events: Mutex<Vec<EventRecord>>,
    pub(crate) lock_state: lock::LocalLocks,
    pub(crate) join: join::JoinState,
    /// Receive memory of detached ordinary regions, unbound from the PCT,
    /// kept for the next attachment of the same size: the driver's DMA
    /// allocator never frees, so attach/detach cycles would otherwise use
    /// up the guest's DMA memory.
    rx_pool: Mutex<Vec<(u32, Arc<dyn ReceiveMemory>)>>,
}

/// Detached receive memories kept for reuse, at most.
const RX_POOL_MAX: usize = 64;

/// A node's handle on the Memory Channel API. Cheap to clone; every thread of
/// the node may use it.
#[derive(Clone)]
pub struct MemoryChannel {
    inner: Arc<Inner>,
}

/// Wait (the common backoff) until `f` yields a value: the device or another
/// node is about to write. `what` names it in the timeout error.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    f: impl FnMut() -> Option<T>,
) -> Result<T, McError> {
    poll_until(timeout, f).ok_or_else(|| McError::Timeout(timeout, what.to_string()))
}

/// Bytes per checked piece of a reliable store.
pub const RELIABLE_CHUNK: usize = 128;
/// How long a reliable store waits for its ACK answer before sending again.
const RELIABLE_ACK_WAIT: Duration = Duration::from_millis(50);

/// How long cluster operations wait before they report a timeout.
pub(crate) const OP_TIMEOUT: Duration = Duration::from_secs(30);

impl MemoryChannel {
    /// Bring up the API on this node: map the control pages and the coherent
    /// arena (broadcast, loopback, receive), this node's ACK page and status
    /// page, then wait until every cluster member has done the same. Starts
    /// the node's management thread, which brings the node up to date if its
    /// adapter crashes and rejoins (see [`MemoryChannel::wait_coherent`]).
    pub fn open(port: Box<dyn McPort>, opts: &OpenOptions) -> Result<MemoryChannel, McError> {
        // Every PCT entry is recorded, to be programmed again after a rejoin.
        let mut port = pct_log::RecordingPort::new(port);
        let regs = port.registers();
        let page_size = regs.page_size;
        let layout = Layout {
            page_size,
            nodes: regs.nodes,
            pages: (regs.address_space / u64::from(page_size)) as u32,
            arena_pages: (opts.arena_bytes / u64::from(page_size)) as u32,
        };
        if !layout.fits() {
            return Err(McError::Layout(format!("{layout:?}")));
        }
        let me = regs.node_id;
        let coherent = PctEntry::transmit_broadcast()
            .with_loopback()
            .with_receive();
        let control = port.alloc_receive(CONTROL_PAGES)?;
        port.set_pct(0, CONTROL_PAGES, coherent, &control.frames())?;
        let arena: Arc<dyn ReceiveMemory> = Arc::from(port.alloc_receive(layout.arena_pages)?);
        port.set_pct(ARENA_PAGE, layout.arena_pages, coherent, &arena.frames())?;
        let ack = port.alloc_receive(1)?;
        port.set_pct(layout.ack_page(me), 1, PctEntry::ack_page(), &ack.frames())?;
        let mc = MemoryChannel {
            inner: Arc::new(Inner {
                port: Mutex::new(port),
                regs,
                layout,
                me,
                control,
                arena,
                ack,
                meta: Mutex::new(()),
                ack_slot: Mutex::new(()),
                ack_seq: std::sync::atomic::AtomicU32::new(0),
                reliable: opts.reliable,
                attach: Mutex::new(HashMap::new()),
                events: Mutex::new(Vec::new()),
                lock_state: lock::LocalLocks::default(),
                join: join::JoinState::new(),
                rx_pool: Mutex::new(Vec::new()),
            }),
        };
        mc.rendezvous(opts.rendezvous_timeout)?;
        join::start(&mc)?;
        info!("node{me}: Memory Channel API open ({} nodes)", regs.nodes);
        Ok(mc)
    }

    /// Start-up rendezvous: each node broadcasts the set of nodes it has heard
    /// from, until every member reports every member. A node that maps the
    /// control pages late would otherwise miss writes made before it listened.
    fn rendezvous(&self, timeout: Duration) -> Result<(), McError> {
        let me = self.inner.me;
        let start = Instant::now();
        loop {
            // A node that leaves the cluster meanwhile (its adapter crashed) is
            // no longer waited for.
            let members = self.members_mask();
            let mut seen = 1u64 << me;
            let mut all_full = true;
            for n in 0..self.inner.regs.nodes {
                if members & (1 << n) == 0 {
                    continue;
                }
                let w = self.inner.control.load_u64(HELLO + 8 * n as usize);
                if w != 0 {
                    seen |= 1 << n;
                }
                if w & members != members {
                    all_full = false;
                }
            }
            let mine = if seen & members == members {
                members
            } else {
                seen
            };
            let was = self.inner.control.load_u64(HELLO + 8 * me as usize);
            if was != mine || !all_full {
                self.store(
                    self.inner.layout.page_addr(0) + (HELLO + 8 * me as usize) as u64,
                    &mine.to_le_bytes(),
                )?;
            }
            if all_full && mine == members {
                return Ok(());
            }
            if start.elapsed() > timeout {
                let missing: Vec<u32> = (0..self.inner.regs.nodes)
                    .filter(|n| members & (1 << n) != 0 && seen & (1 << n) == 0)
                    .collect();
                return Err(McError::Timeout(
                    timeout,
                    format!("nodes {missing:?} to open the Memory Channel API (are they running?)"),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    pub fn node_id(&self) -> NodeId {
        NodeId(self.inner.me as u8)
    }

    pub fn nodes(&self) -> u32 {
        self.inner.regs.nodes
    }

    pub fn registers(&self) -> Registers {
        self.inner.regs
    }

    pub fn layout(&self) -> Layout {
        self.inner.layout
    }

    fn port(&self) -> MutexGuard<'_, pct_log::RecordingPort> {
        self.inner.port.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn store(&self, addr: u64, data: &[u8]) -> Result<(), McError> {
        if self.inner.reliable {
            return self.reliable_store(&[(addr, data)]);
        }
        self.port().store(addr, data)
    }

    pub(crate) fn store_batch(&self, records: &[(u64, &[u8])]) -> Result<(), McError> {
        if self.inner.reliable {
            return self.reliable_store(records);
        }
        self.port().store_batch(records)
    }

    /// Save the count, write, check, and write again until the check is clean.
    /// Stores go in pieces of [`RELIABLE_CHUNK`] bytes, each checked on its own:
    /// at 1% corruption a large write would almost never come through whole.
    fn reliable_store(&self, records: &[(u64, &[u8])]) -> Result<(), McError> {
        let start = Instant::now();
        for &(addr, data) in records {
            for (k, piece) in data.chunks(RELIABLE_CHUNK).enumerate() {
                let at = addr + (k * RELIABLE_CHUNK) as u64;
                let mut attempt = 0u32;
                loop {
                    let saved = self.error_count();
                    self.port().store(at, piece)?;
                    match self.check_errors_within(RELIABLE_ACK_WAIT) {
                        Ok(c) if c.count == saved && c.all_healthy(self.members_mask()) => break,
                        Ok(_) | Err(McError::Timeout(..)) => {}
                        Err(e) => return Err(e),
                    }
                    attempt += 1;
                    if start.elapsed() > OP_TIMEOUT {
                        return Err(McError::Timeout(
                            OP_TIMEOUT,
                            format!("a clean store at {at:#x} ({attempt} tries)"),
                        ));
                    }
                    // A link that is down stays down for a while: back off.
                    std::thread::sleep(Duration::from_micros(u64::from(attempt.min(50)) * 20));
                }
            }
        }
        Ok(())
    }

    /// Current cluster members (bit i = node i), from the status page.
    pub fn members_mask(&self) -> u64 {
        let m = self.port().status().members;
        if m == 0 {
            self.inner.regs.members
        } else {
            m
        }
    }

    /// Cluster members and the membership epoch (imc_gethosts).
    pub fn hosts(&self) -> HostList {
        let s = self.port().status();
        HostList {
            epoch: s.membership_epoch,
            members: (0..64)
                .filter(|n| s.members & (1u64 << n) != 0)
                .map(|n| NodeId(n as u8))
                .collect(),
        }
    }

    /// The cluster error count: one load from the status page (imc_rderrcnt).
    /// Not guaranteed current for errors on remote nodes; see
    /// [`MemoryChannel::check_errors`].
    pub fn error_count(&self) -> u64 {
        self.port().cluster_error_count()
    }

    /// Read every adapter's error status through this node's ACK page
    /// (imc_ckerrcnt). The ACK is ordered after every store this node made
    /// before it, so "save count, write, check" detects any error in between.
    pub fn check_errors(&self) -> Result<ErrorCheck, McError> {
        self.check_errors_within(OP_TIMEOUT)
    }

    /// [`MemoryChannel::check_errors`], giving up after `timeout` (the query is
    /// lost while this node's link is down).
    pub fn check_errors_within(&self, timeout: Duration) -> Result<ErrorCheck, McError> {
        let _slot = self
            .inner
            .ack_slot
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let l = self.inner.layout;
        let n = self.inner.regs.nodes as usize;
        let slots = (l.page_size as usize / (4 * n)).max(1);
        let seq = self
            .inner
            .ack_seq
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed) as usize;
        let base = (seq % slots) * 4 * n;
        // Words never have bits 24..29 set, so all-ones marks "not yet answered".
        self.inner.ack.write_local(base, &vec![0xff; 4 * n]);
        let addr = l.page_addr(l.ack_page(self.inner.me)) + base as u64;
        self.port().store(addr, &[1])?;
        let ack = &self.inner.ack;
        wait_for("the ACK page answer", timeout, || {
            (0..n)
                .all(|i| ack.load_u32(base + 4 * i) != u32::MAX)
                .then_some(())
        })?;
        let statuses = (0..n)
            .map(|i| AdapterErrorStatus::from_word(ack.load_u32(base + 4 * i)))
            .collect();
        Ok(ErrorCheck {
            count: self.error_count(),
            statuses,
        })
    }

    /// Events from the device, kept until someone asks for them.
    fn pump_events(&self) {
        let new = self.port().poll_events();
        if !new.is_empty() {
            self.inner
                .events
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(new);
        }
    }

    /// Wait for a store into `rx` (attached with `notify`).
    pub fn wait_notification(
        &self,
        rx: &RxRegion,
        timeout: Duration,
    ) -> Result<Notification, McError> {
        let (first, pages) = rx.pages();
        wait_for("a notification", timeout, || {
            self.pump_events();
            let mut ev = self.inner.events.lock().unwrap_or_else(|p| p.into_inner());
            let pos = ev.iter().position(|e| {
                e.kind == event_type::PAGE_WRITTEN
                    && (first..first + pages).contains(&(e.v0 as u32))
            })?;
            let e = ev.remove(pos);
            Some(Notification {
                page: e.v0 as u32,
                source: NodeId(e.a as u8),
            })
        })
    }

    /// Whether this node's copy of the control pages and the coherent arena is
    /// up to date, or its adapter is offline, or it rejoined and is catching up.
    pub fn coherence(&self) -> Coherence {
        self.inner.join.coherence()
    }

    /// Wait until this node is coherent again after its adapter crashed and
    /// rejoined: a surviving member has retransmitted the control pages and
    /// the coherent arena (seed 004, "Late Join"). Returns at once on a node
    /// that is coherent. Waits also while the adapter is still offline.
    /// Lock and table operations wait by themselves while the node catches up
    /// (and fail with [`McError::Offline`] while it is offline); reads of
    /// coherent regions do not, so call this before trusting them.
    pub fn wait_coherent(&self, timeout: Duration) -> Result<(), McError> {
        self.inner.join.wait(timeout, true)
    }

    /// How many times this node caught up after a rejoin.
    pub fn rejoins(&self) -> u64 {
        self.inner.join.rejoins()
    }

    /// The last catch-up after a rejoin, if any.
    pub fn last_resync(&self) -> Option<Resync> {
        self.inner.join.last()
    }

    /// This node's copy of the coherent state: control pages, then the arena.
    /// For tests and diagnostics (every coherent node holds the same bytes once
    /// the cluster is quiet).
    pub fn coherent_snapshot(&self) -> Vec<u8> {
        let l = self.inner.layout;
        let mut v = vec![0u8; l.resync_pages() as usize * l.page_size as usize];
        join::Window::of(&self.inner).read(0, &mut v);
        v
    }

    /// Membership changes seen since the last call: (epoch, members).
    pub fn membership_changes(&self) -> Vec<(u64, u64)> {
        self.pump_events();
        let mut ev = self.inner.events.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        ev.retain(|e| {
            if e.kind == event_type::MEMBERSHIP {
                out.push((e.v0, e.v1));
                false
            } else {
                true
            }
        });
        out
    }

    // ---- tables -------------------------------------------------------

    fn read_table<E: TableEntry>(
        &self,
        toggle: usize,
        page: u32,
    ) -> Result<(u64, Table<E>), McError> {
        // A node catching up after a rejoin has stale tables.
        self.inner.join.gate(OP_TIMEOUT)?;
        let ps = self.inner.layout.page_size as usize;
        let c = &self.inner.control;
        for _ in 0..1000 {
            let g1 = c.load_u64(toggle);
            if g1 == 0 {
                return Ok((0, Table::empty()));
            }
            let mut b = vec![0u8; ps];
            c.read((page + (g1 & 1) as u32) as usize * ps, &mut b);
            if c.load_u64(toggle) == g1 {
                return Table::decode(&b).map(|t| (g1, t));
            }
        }
        Err(McError::Corrupt(
            "table keeps changing under the reader".into(),
        ))
    }

    /// Write a new copy into the slot the toggle does not name, then flip the
    /// toggle; total order makes the copy visible everywhere before the toggle.
    fn write_table<E: TableEntry>(
        &self,
        toggle: usize,
        page: u32,
        gen: u64,
        t: &Table<E>,
    ) -> Result<(), McError> {
        let l = self.inner.layout;
        let new_gen = gen + 1;
        let bytes = t.encode(l.page_size as usize)?;
        let copy_addr = l.page_addr(page + (new_gen & 1) as u32);
        let toggle_addr = l.page_addr(0) + toggle as u64;
        let g = new_gen.to_le_bytes();
        self.store_batch(&[(copy_addr, &bytes), (toggle_addr, &g)])
    }

    /// Run `f` on the region table under the meta lock; write it back if `f`
    /// says it changed.
    fn with_regions<T>(
        &self,
        f: impl FnOnce(&mut Table<RegionEntry>) -> Result<(T, bool), McError>,
    ) -> Result<T, McError> {
        self.with_table(REGION_TOGGLE, layout::REGION_TABLE_PAGE, f)
    }

    fn with_locksets<T>(
        &self,
        f: impl FnOnce(&mut Table<LockSetEntry>) -> Result<(T, bool), McError>,
    ) -> Result<T, McError> {
        self.with_table(LOCKSET_TOGGLE, layout::LOCKSET_TABLE_PAGE, f)
    }

    fn with_table<E: TableEntry, T>(
        &self,
        toggle: usize,
        page: u32,
        f: impl FnOnce(&mut Table<E>) -> Result<(T, bool), McError>,
    ) -> Result<T, McError> {
        let _local = self.inner.meta.lock().unwrap_or_else(|p| p.into_inner());
        let meta = lock::ClusterLock { offset: META_LOCK };
        meta.acquire(self, false)?;
        let r = (|| {
            let (gen, mut t) = self.read_table::<E>(toggle, page)?;
            let (v, changed) = f(&mut t)?;
            if changed {
                self.write_table(toggle, page, gen, &t)?;
            }
            Ok(v)
        })();
        meta.release(self)?;
        r
    }

    // ---- regions ------------------------------------------------------

    /// Allocate `size` bytes of Memory Channel space under cluster-wide `key`,
    /// or find the region another node allocated under it (imc_asalloc). A
    /// coherent region is received by every node from the start, so a node that
    /// attaches late sees its current contents.
    pub fn region_alloc(&self, key: u32, size: u64, coherent: bool) -> Result<u32, McError> {
        self.region_alloc_with(key, size, coherent, Permissions::ALL)
    }

    /// [`MemoryChannel::region_alloc`] with permissions for the other nodes
    /// (they apply if this call creates the region).
    pub fn region_alloc_with(
        &self,
        key: u32,
        size: u64,
        coherent: bool,
        permissions: Permissions,
    ) -> Result<u32, McError> {
        if size == 0 {
            return Err(McError::NoSpace("a region needs at least one byte".into()));
        }
        let l = self.inner.layout;
        let pages = size.div_ceil(u64::from(l.page_size));
        let pages = u32::try_from(pages).map_err(|_| McError::NoSpace(format!("{size} bytes")))?;
        let me = self.inner.me as u8;
        self.with_regions(|t| {
            if let Some(e) = t.by_key(key) {
                if e.size != size {
                    return Err(McError::RegionSize {
                        key,
                        size: e.size,
                        wanted: size,
                    });
                }
                return Ok((e.id, false));
            }
            let (start, end) = if coherent {
                (ARENA_PAGE, l.arena_end())
            } else {
                (l.arena_end(), l.ordinary_end())
            };
            let mut used: Vec<(u32, u32)> =
                t.entries.iter().map(|e| (e.first_page, e.pages)).collect();
            let first = first_fit(&mut used, start, end, pages).ok_or_else(|| {
                McError::NoSpace(format!(
                    "{pages} free pages in the {} area",
                    if coherent { "coherent" } else { "region" }
                ))
            })?;
            let id = t.next_id;
            t.next_id += 1;
            t.entries.push(RegionEntry {
                key,
                id,
                first_page: first,
                pages,
                size,
                coherent,
                creator: me,
                tx_mask: 0,
                rx_mask: 0,
                tx_exclusive: None,
                rx_exclusive: None,
                permissions,
            });
            debug!(
                "node{me}: region key {key} id {id}: pages {first}..{}",
                first + pages
            );
            Ok((id, true))
        })
    }

    /// The id of the region allocated under `key`.
    pub fn region_lookup(&self, key: u32) -> Result<u32, McError> {
        let (_, t) = self.read_table::<RegionEntry>(REGION_TOGGLE, layout::REGION_TABLE_PAGE)?;
        t.by_key(key)
            .map(|e| e.id)
            .ok_or_else(|| McError::NoSuchRegion(format!("key {key}")))
    }

    /// Deallocate region `id` (imc_asdealloc). Refused while any node has it
    /// attached.
    pub fn region_dealloc(&self, id: u32) -> Result<(), McError> {
        self.with_regions(|t| {
            let e = t
                .by_id(id)
                .ok_or_else(|| McError::NoSuchRegion(format!("id {id}")))?;
            if e.tx_mask | e.rx_mask != 0 {
                return Err(McError::Busy {
                    what: format!("region {id}"),
                    reason: format!("attached on nodes {:#x}", e.tx_mask | e.rx_mask),
                });
            }
            t.entries.retain(|e| e.id != id);
            Ok(((), true))
        })
    }

    fn attach_bookkeeping(
        &self,
        id: u32,
        transmit: bool,
        sharing: Sharing,
        attach: bool,
    ) -> Result<RegionEntry, McError> {
        let me = self.inner.me as u8;
        let bit = 1u64 << me;
        self.with_regions(|t| {
            let e = t
                .by_id_mut(id)
                .ok_or_else(|| McError::NoSuchRegion(format!("id {id}")))?;
            let allowed = e.creator == me
                || if transmit {
                    e.permissions.others_transmit
                } else {
                    e.permissions.others_receive
                };
            if attach && !allowed {
                return Err(McError::PermissionDenied {
                    node: me,
                    id,
                    direction: if transmit { "transmit" } else { "receive" },
                });
            }
            let (mask, excl) = if transmit {
                (&mut e.tx_mask, &mut e.tx_exclusive)
            } else {
                (&mut e.rx_mask, &mut e.rx_exclusive)
            };
            if attach {
                let dir = if transmit { "transmit" } else { "receive" };
                if let Some(x) = *excl {
                    if x != me {
                        return Err(McError::Busy {
                            what: format!("region {id}"),
                            reason: format!("node {x} holds it exclusively for {dir}"),
                        });
                    }
                }
                if sharing == Sharing::Exclusive && *mask & !bit != 0 {
                    return Err(McError::Busy {
                        what: format!("region {id}"),
                        reason: format!("attached for {dir} on nodes {:#x}", *mask & !bit),
                    });
                }
                *mask |= bit;
                if sharing == Sharing::Exclusive {
                    *excl = Some(me);
                }
            } else {
                *mask &= !bit;
                if *excl == Some(me) {
                    *excl = None;
                }
            }
            Ok((*e, true))
        })
    }

    /// Program this node's PCT for region `e` from its local attachments.
    fn reprogram(&self, e: &RegionEntry) -> Result<(), McError> {
        if e.coherent {
            // The arena is mapped for everything at open.
            return Ok(());
        }
        let attach = self.inner.attach.lock().unwrap_or_else(|p| p.into_inner());
        let a = attach.get(&e.id);
        let tx = a.and_then(|a| a.tx);
        let rx = a.and_then(|a| a.rx.as_ref());
        let mut entry = PctEntry::DISABLED;
        if let Some((lb, dest)) = tx {
            entry.transmit = Some(match dest {
                None => firmware_model::Destination::Broadcast,
                Some(n) => firmware_model::Destination::Node(n),
            });
            entry.loopback = lb;
        }
        let mut frames = Vec::new();
        if let Some((mem, notify)) = rx {
            entry.receive = true;
            entry.interrupt = *notify;
            frames = mem.frames();
        }
        // Loopback without a receive mapping reflects nothing, and is allowed.
        drop(attach);
        self.port().set_pct(e.first_page, e.pages, entry, &frames)
    }

    /// Attach region `id` for transmit (imc_asattach with IMC_TRANSMIT). With
    /// `loopback`, this node's writes also reach its own receive mapping.
    pub fn attach_transmit(
        &self,
        id: u32,
        sharing: Sharing,
        loopback: bool,
    ) -> Result<TxRegion, McError> {
        self.attach_tx(id, sharing, loopback, None)
    }

    /// Attach region `id` for transmit to one node only (Memory Channel 2's
    /// point-to-point mode): other nodes' receive mappings see nothing. Only
    /// ordinary regions: a coherent region goes to every node by definition.
    pub fn attach_transmit_to(
        &self,
        id: u32,
        sharing: Sharing,
        dest: NodeId,
    ) -> Result<TxRegion, McError> {
        self.attach_tx(id, sharing, false, Some(dest))
    }

    fn attach_tx(
        &self,
        id: u32,
        sharing: Sharing,
        loopback: bool,
        dest: Option<NodeId>,
    ) -> Result<TxRegion, McError> {
        if let Some(d) = dest {
            if u32::from(d.0) >= self.nodes() || d == self.node_id() {
                return Err(McError::BadDestination(d));
            }
            let (_, t) =
                self.read_table::<RegionEntry>(REGION_TOGGLE, layout::REGION_TABLE_PAGE)?;
            if t.by_id(id).is_some_and(|e| e.coherent) {
                return Err(McError::BadDestination(d));
            }
        }
        let e = self.attach_bookkeeping(id, true, sharing, true)?;
        self.inner
            .attach
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id)
            .or_default()
            .tx = Some((loopback, dest));
        if let Err(err) = self.reprogram(&e) {
            let _ = self.detach(&e, true);
            return Err(err);
        }
        Ok(TxRegion::new(self.clone(), e))
    }

    /// Attach region `id` for receive (imc_asattach with IMC_RECEIVE). With
    /// `notify`, every store into it raises a notification
    /// ([`MemoryChannel::wait_notification`]).
    pub fn attach_receive(
        &self,
        id: u32,
        sharing: Sharing,
        notify: bool,
    ) -> Result<RxRegion, McError> {
        let e = self.attach_bookkeeping(id, false, sharing, true)?;
        let l = self.inner.layout;
        let (mem, offset): (Arc<dyn ReceiveMemory>, usize) = if e.coherent {
            (
                self.inner.arena.clone(),
                ((e.first_page - ARENA_PAGE) * l.page_size) as usize,
            )
        } else if let Some(m) = self.reuse_receive(e.pages) {
            (m, 0)
        } else {
            match self.port().alloc_receive(e.pages) {
                Ok(m) => (Arc::from(m), 0),
                Err(err) => {
                    let _ = self.attach_bookkeeping(id, false, sharing, false);
                    return Err(err);
                }
            }
        };
        self.inner
            .attach
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id)
            .or_default()
            .rx = Some((mem.clone(), notify));
        if let Err(err) = self.reprogram(&e) {
            let _ = self.detach(&e, false);
            return Err(err);
        }
        Ok(RxRegion::new(self.clone(), e, mem, offset))
    }

    /// Receive memory of `pages` pages from the pool, zeroed, if one that
    /// nobody else still holds is there.
    fn reuse_receive(&self, pages: u32) -> Option<Arc<dyn ReceiveMemory>> {
        let mut pool = self.inner.rx_pool.lock().unwrap_or_else(|p| p.into_inner());
        let i = pool
            .iter()
            .position(|(n, m)| *n == pages && Arc::strong_count(m) == 1)?;
        let (_, m) = pool.swap_remove(i);
        let bytes = pages as usize * self.inner.layout.page_size as usize;
        m.write_local(0, &vec![0u8; bytes]);
        Some(m)
    }

    /// Undo one attachment (called when a region handle is dropped).
    pub(crate) fn detach(&self, e: &RegionEntry, transmit: bool) -> Result<(), McError> {
        let mut freed = None;
        {
            let mut attach = self.inner.attach.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(a) = attach.get_mut(&e.id) {
                if transmit {
                    a.tx = None;
                } else {
                    freed = a.rx.take().map(|(m, _)| m);
                }
                if a.tx.is_none() && a.rx.is_none() {
                    attach.remove(&e.id);
                }
            }
        }
        self.reprogram(e)?;
        // Unbound now: the adapter no longer writes these frames.
        if let Some(m) = freed.filter(|_| !e.coherent) {
            let mut pool = self.inner.rx_pool.lock().unwrap_or_else(|p| p.into_inner());
            if pool.len() < RX_POOL_MAX {
                pool.push((e.pages, m));
            }
        }
        self.attach_bookkeeping(e.id, transmit, Sharing::Shared, false)
            .map(|_| ())
    }

    // ---- lock sets ----------------------------------------------------

    /// Allocate (or find) the set of `count` cluster spinlocks under `key`
    /// (imc_lkalloc). `exclusive`: fail if it exists. `creator`: if this call
    /// creates the set, it returns holding lock 0, so the creator can
    /// initialise shared data before anyone else gets in.
    pub fn lock_alloc(
        &self,
        key: u32,
        count: u32,
        exclusive: bool,
        creator: bool,
    ) -> Result<LockSet, McError> {
        if count == 0 {
            return Err(McError::NoSpace(
                "a lock set needs at least one lock".into(),
            ));
        }
        let l = self.inner.layout;
        let me = self.inner.me;
        let (entry, created) = self.with_locksets(|t| {
            if let Some(e) = t.by_key(key).copied() {
                if exclusive {
                    return Err(McError::LockSetExists(key));
                }
                if e.count != count {
                    return Err(McError::LockSetSize {
                        key,
                        count: e.count,
                        wanted: count,
                    });
                }
                let e2 = t.by_id_mut(e.id).map(|x| {
                    x.attached |= 1 << me;
                    *x
                });
                return Ok(((e2.unwrap_or(e), false), true));
            }
            let mut used: Vec<(u32, u32)> =
                t.entries.iter().map(|e| (e.first_lock, e.count)).collect();
            let first = first_fit(&mut used, 0, l.lock_capacity(), count)
                .ok_or_else(|| McError::NoSpace(format!("{count} free cluster spinlocks")))?;
            let id = t.next_id;
            t.next_id += 1;
            let e = LockSetEntry {
                key,
                id,
                first_lock: first,
                count,
                creator: me as u8,
                attached: 1 << me,
            };
            t.entries.push(e);
            if creator {
                // Taken before the table update is visible: nobody can get in first.
                let lock0 = lock::ClusterLock {
                    offset: l.lock_offset(first),
                };
                lock0.acquire(self, false)?;
            }
            Ok(((e, true), true))
        })?;
        let set = LockSet::new(self.clone(), entry);
        if created && creator {
            set.mark_held(0);
        }
        Ok(set)
    }

    pub(crate) fn dealloc_lockset(&self, id: u32) -> Result<(), McError> {
        let me = self.inner.me;
        self.with_locksets(|t| {
            let e = t.by_id_mut(id).ok_or(McError::NoSuchLockSet(id))?;
            e.attached &= !(1 << me);
            if e.attached == 0 {
                t.entries.retain(|e| e.id != id);
            }
            Ok(((), true))
        })
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }
}

impl Inner {
    pub(crate) fn control(&self) -> &dyn ReceiveMemory {
        &*self.control
    }
    pub(crate) fn me(&self) -> u32 {
        self.me
    }
    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }
}
