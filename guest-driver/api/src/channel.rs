//! The node's handle on the API ([`MemoryChannel`]): the public face of the
//! parts, each of which owns its own state. `Inner` holds the node (the
//! adapter and the shared memory, `node`), the tables' bookkeeping
//! (`table`), the threads' local locks (`lock`) and the local attachments
//! (`region`), and hands each part what it asks for through that part's
//! own narrow trait (`LockHost`, `RegionHost`, `JoinHost`). The handles a
//! part returns (lock sets, regions) and the late-join thread hold the same
//! `Inner`, so the API stays open while any of them lives.
//!
//! Bring-up is `open`; what each call does lives in the part named for it.

use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::Duration;

use firmware_model::abi::Registers;
use firmware_model::NodeId;

use crate::error::McError;
use crate::error_count::ErrorCheck;
use crate::events::{EventSignal, Notification};
use crate::host::NodeHost;
use crate::join::{Coherence, JoinHost, Resync, Window};
use crate::layout::Layout;
use crate::lock::{self, LocalLocks, LockHost, LockSet};
use crate::loss::{LossSource, LossWatch};
use crate::membership::HostList;
use crate::node::Node;
use crate::region::{self, Attachments, RegionHost, RxRegion, Sharing, TxRegion};
use crate::table::{Permissions, RegionEntry, Table, Tables};

/// What a node's threads share behind a [`MemoryChannel`].
pub(crate) struct Inner {
    node: Node,
    tables: Tables,
    locks: LocalLocks,
    attachments: Attachments,
}

impl Inner {
    pub(crate) fn new(node: Node) -> Inner {
        Inner {
            node,
            tables: Tables::default(),
            locks: LocalLocks::default(),
            attachments: Attachments::default(),
        }
    }
}

impl NodeHost for Inner {
    fn node(&self) -> &Node {
        &self.node
    }
    fn tables(&self) -> &Tables {
        &self.tables
    }
}

impl LockHost for Inner {
    fn local_locks(&self) -> &LocalLocks {
        &self.locks
    }
}

impl RegionHost for Inner {
    fn attachments(&self) -> &Attachments {
        &self.attachments
    }
}

impl JoinHost for Inner {
    fn local_locks(&self) -> &LocalLocks {
        &self.locks
    }
}

/// A node's handle on the Memory Channel API. Cheap to clone; every thread of
/// the node may use it.
#[derive(Clone)]
pub struct MemoryChannel {
    inner: Arc<Inner>,
}

impl MemoryChannel {
    pub(crate) fn from_inner(inner: Arc<Inner>) -> MemoryChannel {
        MemoryChannel { inner }
    }

    /// The virtual arrival of the last stamped store that landed here in
    /// the granule of `global_addr` (virtual time on: every store carries
    /// its sender's virtual time and the adapter writes each packet's
    /// arrival before its data; docs/virtual-time.md). A thread that waited
    /// for data reads it after seeing the data and resumes there
    /// (`mc_driver::vclock::wait_end`). `None` without virtual time or
    /// before any stamped store landed there.
    pub fn arrival(&self, global_addr: u64) -> Option<u64> {
        self.inner.node.arrival(global_addr, 1)
    }

    /// The latest such arrival over `[global_addr, global_addr + len)`.
    pub fn arrival_range(&self, global_addr: u64, len: u64) -> Option<u64> {
        self.inner.node.arrival(global_addr, len)
    }

    /// The node, for the parts of the API above the handle (bring-up,
    /// barriers).
    pub(crate) fn node(&self) -> &Node {
        &self.inner.node
    }

    /// This handle's state, as the late-join thread holds it.
    pub(crate) fn join_host(&self) -> Arc<dyn JoinHost> {
        self.inner.clone()
    }

    fn lock_host(&self) -> Arc<dyn LockHost> {
        self.inner.clone()
    }

    fn region_host(&self) -> Arc<dyn RegionHost> {
        self.inner.clone()
    }

    pub fn node_id(&self) -> NodeId {
        self.node().id()
    }

    pub fn nodes(&self) -> u32 {
        self.node().regs.nodes
    }

    pub fn registers(&self) -> Registers {
        self.node().regs
    }

    pub fn layout(&self) -> Layout {
        self.node().layout
    }

    /// How many regions the cluster's region table holds (allocated by
    /// anyone, this program included).
    pub fn region_table_capacity(&self) -> u32 {
        let page_size = self.node().layout.page_size as usize;
        u32::try_from(Table::<RegionEntry>::capacity(page_size))
            .expect("a table page holds fewer than 2^32 entries")
    }

    /// Whether this handle retries each store until it went through clean
    /// (`OpenOptions::reliable`).
    pub fn is_reliable(&self) -> bool {
        self.node().reliable
    }

    // The store path (`store`).

    /// The write barrier (the Alpha's `mb`, seed 004 Figure 6): stores queued
    /// after it reach the network after those queued before it, and this
    /// thread's own loads and stores are not moved across it. The transmit
    /// FIFO already keeps a node's stores in order, so this costs a CPU
    /// fence and no wait.
    pub fn fence(&self) {
        fence(Ordering::SeqCst);
    }

    /// Wait until every store this node queued before the call has been
    /// handed to the hub: for a program that must not end with stores in
    /// flight. It does not mean they arrived anywhere; an ACK-page check
    /// ([`MemoryChannel::check_errors`]) proves that. Reports a store the
    /// adapter refused since the last flush ([`McError::Refused`]).
    pub fn flush(&self) -> Result<(), McError> {
        self.node().flush()
    }

    // Error detection (`error_count`).

    /// The cluster error count: one load from the status page (imc_rderrcnt).
    /// Not guaranteed current for errors on remote nodes; see
    /// [`MemoryChannel::check_errors`].
    pub fn error_count(&self) -> u64 {
        self.node().error_count()
    }

    /// Packets lost on this node's link since the API opened, as this
    /// node's adapter counted them on its status page: drops (which no
    /// error count shows: docs/device.md, faults) and, for an API that is
    /// not reliable, network errors. The emulator's count; a real adapter
    /// counts only the errors (`loss` module).
    pub fn losses(&self) -> u64 {
        self.node().losses_since_open()
    }

    /// A watch for evidence that a wait on another node's store is
    /// explained by a lost packet: [`LossWatch::check`] says so once the
    /// wait has lasted [`crate::LOSS_WAIT`] with losses counted meanwhile
    /// (or [`crate::LOSS_WAIT_EARLIER`] with losses since the API opened).
    pub fn loss_watch(&self) -> LossWatch<'_> {
        LossWatch::new(self.node())
    }

    /// Read every adapter's error status through this node's ACK page
    /// (imc_ckerrcnt). The ACK is ordered after every store this node made
    /// before it, and its answer lands only once every one of them has
    /// reached every adapter: "save count, write, check" detects any error in
    /// between, and a check that returns proves arrival. A store the adapter
    /// refused is reported as [`McError::Refused`].
    pub fn check_errors(&self) -> Result<ErrorCheck, McError> {
        self.node().check_errors()
    }

    /// [`MemoryChannel::check_errors`], giving up after `timeout` (the query is
    /// lost while this node's link is down).
    pub fn check_errors_within(&self, timeout: Duration) -> Result<ErrorCheck, McError> {
        self.node().check_errors_within(timeout)
    }

    // Membership (`membership`).

    /// Current cluster members (bit i = node i), from the status page.
    pub fn members_mask(&self) -> u64 {
        self.node().members_mask()
    }

    /// Cluster members and the membership epoch (imc_gethosts).
    pub fn hosts(&self) -> HostList {
        self.node().hosts()
    }

    /// Membership changes seen since the last call: (epoch, members).
    pub fn membership_changes(&self) -> Vec<(u64, u64)> {
        self.node().membership_changes()
    }

    // Events (`events`).

    /// What a thread blocks on until the adapter delivers an event (a store
    /// into a region attached with `notify`, a membership change): the
    /// interrupt of seed 004's interrupt-on-receive regions. `None` where the
    /// driver has no such signal (PCI in a QEMU guest: no interrupts reach a
    /// user-space driver), and the caller must poll.
    pub fn event_signal(&self) -> Result<Option<EventSignal>, McError> {
        self.node().event_signal()
    }

    /// Take the page-written notifications of `rx` that have arrived, without
    /// waiting. This also re-arms the adapter's signal.
    pub fn take_notifications(&self, rx: &RxRegion) -> Vec<Notification> {
        self.node().take_notifications(rx.pages())
    }

    /// Wait for a store into `rx` (attached with `notify`).
    pub fn wait_notification(
        &self,
        rx: &RxRegion,
        timeout: Duration,
    ) -> Result<Notification, McError> {
        self.node().wait_notification(rx.pages(), timeout)
    }

    // Lock sets (`lock`).

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
        lock::alloc(&self.lock_host(), key, count, exclusive, creator)
    }

    // Regions (`region`).

    /// Allocate `size` bytes of Memory Channel space under cluster-wide `key`,
    /// or find the region another node allocated under it (imc_asalloc). A
    /// coherent region is received by every node from the start, so a node that
    /// attaches late sees its current contents.
    pub fn region_alloc(&self, key: u32, size: u64, coherent: bool) -> Result<u32, McError> {
        region::alloc(self.node(), &self.inner.tables, key, size, coherent)
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
        region::alloc_with(
            self.node(),
            &self.inner.tables,
            key,
            size,
            coherent,
            permissions,
        )
    }

    /// The id of the region allocated under `key`.
    pub fn region_lookup(&self, key: u32) -> Result<u32, McError> {
        region::lookup(self.node(), &self.inner.tables, key)
    }

    /// Deallocate region `id` (imc_asdealloc). Refused while any node has it
    /// attached.
    pub fn region_dealloc(&self, id: u32) -> Result<(), McError> {
        region::dealloc(self.node(), &self.inner.tables, id)
    }

    /// Attach region `id` for transmit (imc_asattach with IMC_TRANSMIT). With
    /// `loopback`, this node's writes also reach its own receive mapping.
    pub fn attach_transmit(
        &self,
        id: u32,
        sharing: Sharing,
        loopback: bool,
    ) -> Result<TxRegion, McError> {
        region::attach_transmit(&self.region_host(), id, sharing, loopback)
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
        region::attach_transmit_to(&self.region_host(), id, sharing, dest)
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
        region::attach_receive(&self.region_host(), id, sharing, notify)
    }

    // Late join (`join`, `coherence`).

    /// Whether this node's copy of the control pages and the coherent arena is
    /// up to date, or its adapter is offline, or it rejoined and is catching up.
    pub fn coherence(&self) -> Coherence {
        self.node().coherence.coherence()
    }

    /// Wait until this node is coherent again after its adapter crashed and
    /// rejoined: a surviving member has retransmitted the control pages and
    /// the coherent arena (seed 004, "Late Join"). Returns at once on a node
    /// that is coherent. Waits also while the adapter is still offline.
    /// Lock and table operations wait by themselves while the node catches up
    /// (and fail with [`McError::Offline`] while it is offline); reads of
    /// coherent regions do not, so call this before trusting them.
    pub fn wait_coherent(&self, timeout: Duration) -> Result<(), McError> {
        self.node().coherence.wait(timeout, true)
    }

    /// How many times this node caught up after a rejoin.
    pub fn rejoins(&self) -> u64 {
        self.node().coherence.rejoins()
    }

    /// The last catch-up after a rejoin, if any.
    pub fn last_resync(&self) -> Option<Resync> {
        self.node().coherence.last()
    }

    /// This node's copy of the coherent state: control pages, then the arena.
    /// For tests and diagnostics (every coherent node holds the same bytes once
    /// the cluster is quiet).
    pub fn coherent_snapshot(&self) -> Vec<u8> {
        let l = self.node().layout;
        let mut v = vec![0u8; l.resync_pages() as usize * l.page_size as usize];
        Window::of(self.node()).read(0, &mut v);
        v
    }
}
