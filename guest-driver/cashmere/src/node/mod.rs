//! A node of Cashmere: its working copies, the three seams (data,
//! metadata, synchronisation), its protocol state and its doorbell (seed
//! 000 s.2.1, seed 002 s.3). `Node`'s fields are private to this folder,
//! and its methods are here, each part of the protocol in the module named
//! for it: `fault` (read and write faults, resolved on the faulting
//! thread), `fetch` (request/reply with a home), `requests` (answering
//! other nodes, taking in write notices), `release`, `acquire`; `startup`
//! builds a node and `protocol_thread` is the thread that answers other
//! nodes. A change of protection is made *before* the protocol reads a
//! page it is about to flush or invalidate (the `mprotect` is the
//! shoot-down), so a concurrent local writer faults and waits instead of
//! writing behind the diff.
//!
//! The parts with state of their own are owners beside it, each with
//! private fields and its methods in one module: `working_copies` (the
//! heap, each page's protection, the twins), `served` (the last request
//! answered per node), `protocol_control` (stop, failure, the protocol
//! thread's window and the processor its work is charged to); the node's
//! own barrier is the DSM core's `NodeBarrier`, the protocol state is
//! `state::ProtocolState` (under one mutex), and what the node chooses is
//! `choices::Choices`.
//!
//! The protocol thread (`protocol_thread`) sleeps until a store lands in the node's mailbox (the
//! adapter's event signal; where the transport has none, as PCI in a QEMU
//! guest, it polls the events with growing sleeps), takes the events, rings
//! the doorbell for the node's other waiters, and answers requests. With
//! message detection by polling (the default, seed 000 s.2.1) the
//! application threads answer requests where they poll (`Csm::poll` in the
//! programs' loops, barrier and flag waits, a fetch's wait); while they do
//! and none of them sleeps on the doorbell, the protocol thread does not wait
//! for the event signal but ticks (`POLL_TICK`), so each store into the
//! mailbox does not wake it onto a core the application threads compute on.

mod acquire;
mod fault;
mod fetch;
mod protocol_control;
mod protocol_thread;
mod release;
mod requests;
mod served;
mod startup;
mod working_copies;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dsm_core::node_barrier::{NodeBarrier, NodeBarrierError};
use mc_api::MemoryChannel;

use crate::adb::BroadcastBuffers;
use crate::choices::Choices;
use crate::homes::HomeAssignment;
use crate::mailbox::Mailboxes;
use crate::messages::ReplySlot;
use crate::seams::{DataPropagation, Metadata, Synchronization};
use crate::sigsegv;
use crate::state::{ProtocolState, StateGuard};
use crate::times::{self, Activity};
use crate::vm::{HeapMemory, Prot};
use crate::wait::{await_echo, FutexBell};
use crate::CsmError;
use mc_api::vclock;
use protocol_control::ProtocolControl;
use served::{request_key, ServedRequests};
use working_copies::WorkingCopies;

pub(crate) use startup::start_node;

/// How long a wait for this node's own echo may take before the node is
/// considered broken.
const ECHO_GIVE_UP: Duration = Duration::from_secs(120);

/// One node's Cashmere, shared by its application threads (through `Csm`)
/// and its protocol thread.
pub(crate) struct Node {
    me: u32,
    nodes: u32,
    /// Other protocol nodes share this node's adapter (1L, several
    /// processors per machine), and so its one event signal: a store into
    /// this node's mailbox may wake a sibling's protocol thread instead of
    /// this one's, which then finds it at its next nap
    /// (`protocol_thread::SHARED_NAP`).
    shared_adapter: bool,
    page_size: u32,
    threads: u32,
    /// What the node's protocol chooses: the variant and its switches.
    choices: Choices,
    /// CSM-ADB's broadcast buffers (seed 000 s.2.3.3).
    adb: Option<BroadcastBuffers>,
    /// Homes imposed from an earlier run (`Config::homes`).
    imposed_homes: Option<Arc<HomeAssignment>>,
    copies: WorkingCopies,
    /// Index in the fault handler's table (`sigsegv`), once registered.
    registration: AtomicUsize,
    data: Box<dyn DataPropagation>,
    meta: Box<dyn Metadata>,
    sync: Box<dyn Synchronization>,
    mc: MemoryChannel,
    mail: Arc<Mailboxes>,
    bell: Arc<FutexBell>,
    state: Mutex<ProtocolState>,
    served: ServedRequests,
    /// The node's own barrier, which its threads pass together.
    local: NodeBarrier<CsmError>,
    alloc: dsm_core::Allocator,
    /// The timed part of the program, in wall-clock and virtual time.
    window: dsm_core::TimedWindow,
    /// Between the application threads and the protocol thread.
    control: ProtocolControl,
}

impl Drop for Node {
    fn drop(&mut self) {
        let r = self.registration.load(Ordering::Acquire);
        if r != usize::MAX {
            sigsegv::unregister(r);
        }
    }
}

impl Node {
    pub(crate) fn ps(&self) -> usize {
        self.page_size as usize
    }

    pub(crate) fn me(&self) -> u32 {
        self.me
    }

    pub(crate) fn nodes(&self) -> u32 {
        self.nodes
    }

    /// Application threads on this node.
    pub(crate) fn threads(&self) -> u32 {
        self.threads
    }

    pub(crate) fn page_size(&self) -> u32 {
        self.page_size
    }

    pub(crate) fn heap(&self) -> &Arc<HeapMemory> {
        self.copies.heap()
    }

    pub(crate) fn allocator(&self) -> &dsm_core::Allocator {
        &self.alloc
    }

    pub(crate) fn window(&self) -> &dsm_core::TimedWindow {
        &self.window
    }

    pub(crate) fn control(&self) -> &ProtocolControl {
        &self.control
    }

    /// The variant's synchronisation (locks, barriers, flags, abort).
    pub(crate) fn sync(&self) -> &dyn Synchronization {
        &*self.sync
    }

    pub(crate) fn mc(&self) -> &MemoryChannel {
        &self.mc
    }

    pub(crate) fn bell(&self) -> &FutexBell {
        &self.bell
    }

    /// Bytes this node has sent in messages.
    pub(crate) fn message_bytes(&self) -> u64 {
        self.mail.sent_bytes()
    }

    /// Pass the node's own barrier as one of its threads; the last to
    /// arrive runs `last` (the cluster part) for all of them.
    pub(crate) fn node_barrier(
        &self,
        last: impl FnOnce() -> Result<(), CsmError>,
    ) -> Result<(), CsmError> {
        self.local
            .arrive(
                self.threads,
                || {
                    self.sync
                        .aborted()
                        .map(|node| CsmError::NodeFailed { node })
                },
                last,
            )
            .map_err(|e| match e {
                NodeBarrierError::Failed(e) => CsmError::NodeBarrier(e),
                NodeBarrierError::Aborted(e) => e,
            })
    }

    fn set_prot(&self, p: u32, prot: Prot) -> Result<(), CsmError> {
        self.copies.set_prot(p, prot)
    }

    /// Fail if a node has failed (the abort word, or a lost member).
    pub(crate) fn check_failed(&self) -> Result<(), CsmError> {
        match self.sync.aborted() {
            Some(node) => Err(CsmError::NodeFailed { node }),
            None => Ok(()),
        }
    }

    fn home_of(&self, st: &mut ProtocolState, p: u32) -> Result<u32, CsmError> {
        if let Some(h) = st.pages[p as usize].home {
            return Ok(h);
        }
        // An imposed home needs no directory entry: every node imposes the
        // same one.
        let h = match self.imposed_home(p).or_else(|| self.meta.home(p)) {
            Some(h) => h,
            None => match self.meta.messages().map(|m| m.manager(p)) {
                // Message-based metadata: the page's directory manager
                // assigns the home (msg_meta).
                Some(m) if m != self.me => self.ask_home(st, m, p)?,
                _ => {
                    // The master copy is received before the claim can be
                    // seen (CSM-DMS: its receive mapping).
                    self.data.prepare_home(p)?;
                    self.meta.claim_home(p, &|| self.check_failed())?
                }
            },
        };
        st.pages[p as usize].home = Some(h);
        if h == self.me {
            self.map_master(st, p);
        }
        Ok(h)
    }

    /// The home of a page another node touched first, for the Table II
    /// operations: the directory's, or, with message-based metadata, the
    /// page's directory manager's answer (which makes this node the home of
    /// a page nobody touched).
    pub(crate) fn bench_home(&self, st: &mut ProtocolState, p: u32) -> Result<u32, CsmError> {
        if let Some(h) = st.pages[p as usize].home.or_else(|| self.meta.home(p)) {
            return Ok(h);
        }
        match self.meta.messages().map(|m| m.manager(p)) {
            Some(m) if m != self.me => self.ask_home(st, m, p),
            _ => Err(CsmError::NoHome(p)),
        }
    }

    /// Ask page `p`'s directory manager `m` for its home, claiming it for
    /// this node if it has none (message-based metadata, `msg_meta`).
    fn ask_home(&self, st: &mut ProtocolState, m: u32, p: u32) -> Result<u32, CsmError> {
        let mut b = [0u8; 8];
        self.fetch(st, m, crate::messages::Request::Home(p), &mut b)?;
        let h = u32::try_from(u64::from_le_bytes(b)).unwrap_or(u32::MAX);
        if h >= self.nodes {
            return Err(CsmError::BadRequest { from: m, page: p });
        }
        if let Some(mm) = self.meta.messages() {
            mm.learn_home(p, h);
        }
        Ok(h)
    }

    /// At the home, once per page: map the master copy (the receive
    /// mapping) as the page's working copy, so the home's threads write it
    /// directly (seed 000 s.2.3.2). Done before the home's first access to
    /// the page, whose working copy has nothing yet. Where the master copy
    /// cannot be mapped (a private or huge-page receive memory), the home
    /// keeps a separate working copy and diffs its writes into the master
    /// copy by loopback.
    fn map_master(&self, st: &mut ProtocolState, p: u32) {
        let pg = &mut st.pages[p as usize];
        if pg.direct_tried || !(self.choices.home_direct() || self.data.master_in_heap()) {
            return;
        }
        pg.direct_tried = true;
        if self.data.master_in_heap() {
            // CSM-MS: the heap is the master copy at the home already.
            pg.direct = true;
            st.stats.direct_home_pages += 1;
            return;
        }
        debug_assert!(pg.state == crate::state::PageState::Invalid);
        let Some(src) = self.data.master_addr(p) else {
            return;
        };
        match self.copies.alias_master(p, src) {
            Ok(()) => {
                st.pages[p as usize].direct = true;
                st.stats.direct_home_pages += 1;
            }
            Err(e) => {
                if st.stats.direct_home_pages == 0 {
                    log::warn!(
                        "node{}: page {p}: the master copy cannot be the working copy ({e}); \
                         the home diffs its writes into it",
                        self.me
                    );
                }
            }
        }
    }

    /// The home of every page as far as this node knows it: its own,
    /// imposed, or the directory's (`Csm::homes`).
    pub(crate) fn home_assignment(&self) -> HomeAssignment {
        let st = self.lock_state();
        HomeAssignment {
            nodes: self.nodes,
            page_size: self.page_size,
            homes: (0..u32::try_from(st.pages.len()).expect("page numbers fit u32"))
                .map(|p| self.known_home(&st, p))
                .collect(),
        }
    }

    /// The home of `p` as this node knows it (its own record, an imposed
    /// home, the directory).
    fn known_home(&self, st: &ProtocolState, p: u32) -> Option<u32> {
        st.pages[p as usize]
            .home
            .or_else(|| self.imposed_home(p))
            .or_else(|| self.meta.home(p))
    }

    /// The home imposed on page `p`, if any.
    fn imposed_home(&self, p: u32) -> Option<u32> {
        self.imposed_homes
            .as_ref()
            .and_then(|h| h.homes.get(p as usize).copied().flatten())
    }

    pub(crate) fn lock_state(&self) -> StateGuard<'_> {
        // Whether the state is free follows the host: under counted work
        // taking it is not the thread's work, contended or not.
        let _taking = vclock::counter::Uncounted::enter();
        match self.state.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                // Blocked behind another thread of this node (which may
                // itself be waiting for a reply): on the virtual clock that
                // is a wait, so the thread leaves the board's floor while
                // it cannot move, and threads ahead are not held at the
                // quantum for it until the stall rule passes them (quantum
                // breaks). It costs no virtual time, as the blocked thread
                // burnt no CPU time before.
                vclock::wait_begin();
                let g = self.state.lock().unwrap_or_else(|p| p.into_inner());
                vclock::wait_end_quiet();
                g
            }
        }
    }

    /// Wait until this node's echo `mark` is back: everything it posted
    /// before the echo has reached it, and so has everything any node sent
    /// that is ordered before (total order, loopback in order). With the
    /// node's state in hand, answer requests meanwhile (other nodes may be
    /// waiting for this one).
    fn await_echo(&self, mut st: Option<&mut ProtocolState>, mark: u64) -> Result<(), CsmError> {
        let start = Instant::now();
        await_echo(
            &self.bell,
            mark,
            || self.data.post_echo(),
            || self.data.echo_seen(),
            || {
                self.check_failed()?;
                if on_protocol_thread() {
                    // Nobody else takes the events that ring the doorbell.
                    if !self.mc.take_notifications(self.mail.own()).is_empty() {
                        self.bell.ring();
                    }
                }
                if let Some(st) = st.as_deref_mut() {
                    self.serve_waiting(st)?;
                }
                if start.elapsed() > ECHO_GIVE_UP {
                    return Err(CsmError::NoEcho {
                        after: ECHO_GIVE_UP,
                    });
                }
                Ok(())
            },
            || self.mail.arrival(self.mail.at().echo(), 8),
        )
    }

    /// The virtual arrival of the newest reply in `slot` of this node's
    /// mailbox (its header lands after its data).
    fn reply_arrival(&self, slot: ReplySlot) -> Option<u64> {
        self.mail.arrival(slot.header_offset(self.mail.at()), 8)
    }

    /// Before this node (a home) reads its own master copy of `p` for its
    /// own use: its own last store into it (a diff of its writes, or the
    /// page published as it left Exclusive) must have come back, or it
    /// would read the copy from before its own writes.
    fn settle_own_master(&self, st: &mut ProtocolState, p: u32) -> Result<(), CsmError> {
        let want = st.pages[p as usize].own_store_echo;
        if want != 0 && self.data.echo_seen() < want {
            st.stats.echo_waits += 1;
            let mark = self.data.post_echo()?;
            self.await_echo(Some(st), mark)?;
        }
        st.pages[p as usize].own_store_echo = 0;
        Ok(())
    }

    /// This node has just stored into its own master copy of `p`: note the
    /// first echo that will follow it.
    fn stored_own_master(&self, st: &mut ProtocolState, p: u32) {
        st.pages[p as usize].own_store_echo = self.data.echo_posted() + 1;
    }

    /// CSM-ADB: page `p` is about to change at its home (a diff applied, a
    /// write by the home): kill any broadcast copy of it first, so a node
    /// that synchronises with the change and looks in the buffers finds
    /// none older (the kill is ordered before the change's acknowledgement
    /// or write notices). A copy may be there if this node placed it, or an
    /// earlier home did (ordered before this node became the home, so in
    /// its receive copy now).
    fn adb_invalidate(&self, st: &mut ProtocolState, p: u32) -> Result<(), CsmError> {
        let Some(adb) = &self.adb else {
            return Ok(());
        };
        if st.adb.placed(p) || adb.holds(p)? {
            adb.invalidate(p)?;
            st.adb.set_placed(p, false);
            st.stats.adb_invalidations += 1;
        }
        Ok(())
    }

    /// CSM-ADB at the home, having answered node `r`'s request for `p`
    /// (whose data is `data`): count the request in the home's interval
    /// (its releases), and place the page in the broadcast buffers when
    /// seed 000 s.2.3.3's heuristics see several consumers: requests
    /// answered in the same pass, two or more in this interval, or two or
    /// more in the previous one. Never while a thread here writes the page.
    fn adb_consider(&self, st: &mut ProtocolState, p: u32, data: &[u8]) -> Result<(), CsmError> {
        let Some(adb) = &self.adb else {
            return Ok(());
        };
        let several = st.adb.requested(p, st.stats.releases, st.serve_pass);
        let writing = matches!(
            st.pages[p as usize].state,
            crate::state::PageState::ReadWrite | crate::state::PageState::Exclusive
        );
        if several && !writing && !st.adb.placed(p) {
            adb.place(p, data)?;
            st.adb.set_placed(p, true);
            st.stats.adb_placements += 1;
        }
        Ok(())
    }

    /// CSM-ADB at a consumer: a valid broadcast copy of `p` into `out`, if
    /// the buffers hold one. First this node's echo: its directory word
    /// (posted just before) is back, so every kill ordered before it is
    /// here (a change this node must see was announced after its kill).
    fn adb_copy(&self, st: &mut ProtocolState, p: u32, out: &mut [u8]) -> Result<bool, CsmError> {
        let Some(adb) = &self.adb else {
            return Ok(false);
        };
        st.stats.echo_waits += 1;
        let mark = self.data.post_echo()?;
        self.await_echo(Some(st), mark)?;
        let hit = adb.read(p, out)?;
        if hit {
            st.stats.adb_hits += 1;
        }
        Ok(hit)
    }

    /// Some other node's request is waiting to be answered.
    #[inline]
    fn requests_waiting(&self) -> bool {
        (0..self.nodes)
            .filter(|&r| r != self.me)
            .any(|r| request_key(self.data.poll_request(r)) != self.served.last(r))
    }

    /// A thread that waits without holding the state (at a barrier, for a
    /// flag) answers requests meanwhile if it can take the state at once:
    /// it is awake anyway, and the protocol thread may have to be woken.
    #[inline]
    pub(crate) fn serve_if_waiting(&self) -> Result<(), CsmError> {
        if !self.choices.polling() {
            return Ok(());
        }
        // Whether a request is there yet, and whether the state is free,
        // follow the host's timing: under counted work neither the look
        // nor the way to the service and back is the thread's work, up to
        // where both paths meet again (the region's end); the service
        // itself counts, as protocol work (`times::enter`).
        // (One relaxed load when the clock is off: this is every poll.)
        let looking = vclock::enabled().then(vclock::counter::Uncounted::enter);
        self.bell.polled();
        let r = if self.requests_waiting() {
            self.serve_arrived()
        } else {
            Ok(())
        };
        drop(looking);
        r
    }

    /// [`Node::serve_if_waiting`] when a request has arrived.
    #[cold]
    #[inline(never)]
    fn serve_arrived(&self) -> Result<(), CsmError> {
        let mut st = match self.state.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(()),
        };
        let _serve = times::enter(Activity::Serve);
        self.serve_requests(&mut st)
    }
}

thread_local! {
    /// Set on a node's protocol thread, the one that takes the events.
    static PROTOCOL_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn on_protocol_thread() -> bool {
    PROTOCOL_THREAD.with(|p| p.get())
}

/// Mark the calling thread as its node's protocol thread.
fn mark_protocol_thread() {
    PROTOCOL_THREAD.with(|p| p.set(true));
}
