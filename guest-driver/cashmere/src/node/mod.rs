//! A node of Cashmere: its working copies, the three seams (data,
//! metadata, synchronisation), its protocol state and its doorbell (seed
//! 000 s.2.1, seed 002 s.3). `Node`'s fields are private to this folder,
//! and its methods are here, each part of the protocol in the module named
//! for it: `fault` (read and write faults, resolved on the faulting
//! thread), `fetch` (request/reply with a home), `requests` (answering
//! other nodes, taking in write notices), `release`, `acquire`, `home` (a
//! page's home and the home's own master copy), `broadcast` (CSM-ADB's
//! kills, placements and copies); `startup` builds a node and
//! `protocol_thread` is the thread that answers other nodes. This file
//! holds the node itself, its state lock, the wait for its own echo and
//! polling for requests. A change of protection is made *before* the protocol reads a
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
mod broadcast;
mod fault;
mod fetch;
mod home;
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
