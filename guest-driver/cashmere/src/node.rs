//! A node of Cashmere: its heap, its fault queue, the three seams (data,
//! metadata, synchronisation), its protocol state, and the protocol thread
//! that resolves faults and answers other nodes (seed 000 s.2.1, seed 002
//! s.3).
//!
//! The protocol's parts are `Node` methods, each in the module named for it:
//! `fault` (read and write faults), `fetch` (request/reply with a home),
//! `requests` (answering other nodes, taking in write notices), `release`,
//! `acquire`. A change of protection is made *before* the protocol reads a
//! page it is about to flush or invalidate (the `mprotect` is the
//! shoot-down), so a concurrent local writer faults and waits instead of
//! writing behind the diff.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use mc_api::backoff::{Backoff, BackoffPolicy};

use crate::seams::{DataPropagation, Metadata, Synchronization};
use crate::sigsegv::{self, FaultQueue};
use crate::state::{State, StateGuard};
use crate::vm::{HeapMemory, Prot};
use crate::CsmError;

/// The node's own barrier: its threads arrive here, and the last one takes
/// the node through the cluster barrier for all of them.
pub(crate) struct LocalBarrier {
    pub(crate) arrived: u32,
    pub(crate) generation: u64,
    pub(crate) failed: Option<Arc<CsmError>>,
}

/// One node's Cashmere, shared by its application threads (through `Csm`)
/// and its protocol thread.
pub(crate) struct Node {
    pub(crate) me: u32,
    pub(crate) nodes: u32,
    pub(crate) page_size: u32,
    pub(crate) threads: u32,
    pub(crate) exclusive_mode: bool,
    pub(crate) incoming_diffs: bool,
    pub(crate) heap: HeapMemory,
    pub(crate) faults: Box<FaultQueue>,
    pub(crate) registration: usize,
    pub(crate) data: Box<dyn DataPropagation>,
    pub(crate) meta: Box<dyn Metadata>,
    pub(crate) sync: Box<dyn Synchronization>,
    pub(crate) state: Mutex<State>,
    pub(crate) stop: AtomicBool,
    pub(crate) local: Mutex<LocalBarrier>,
    pub(crate) local_cv: Condvar,
    pub(crate) next_alloc: Mutex<usize>,
    pub(crate) start: Instant,
    /// What stopped the protocol thread, if it stopped.
    pub(crate) failure: Mutex<Option<Arc<CsmError>>>,
    /// The timed part of the program: (start, end), seconds since `start`.
    pub(crate) window: Mutex<(Option<f64>, Option<f64>)>,
}

impl Drop for Node {
    fn drop(&mut self) {
        sigsegv::unregister(self.registration);
    }
}

impl Node {
    pub(crate) fn ps(&self) -> usize {
        self.page_size as usize
    }

    pub(crate) fn set_prot(&self, p: u32, prot: Prot) -> Result<(), CsmError> {
        let ps = self.ps();
        self.heap.protect(p as usize * ps, ps, prot)?;
        self.faults.prot[p as usize].store(prot as u8, Ordering::Release);
        Ok(())
    }

    pub(crate) fn home_of(&self, st: &mut State, p: u32) -> Result<u32, CsmError> {
        if let Some(h) = st.pages[p as usize].home {
            return Ok(h);
        }
        let h = match self.meta.home(p) {
            Some(h) => h,
            None => self.meta.claim_home(p)?,
        };
        st.pages[p as usize].home = Some(h);
        Ok(h)
    }

    pub(crate) fn lock_state(&self) -> StateGuard<'_> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How the protocol waits for other nodes: a short spin, then yielding, then
/// short sleeps.
pub(crate) const WAIT_POLICY: BackoffPolicy = BackoffPolicy {
    spins: 64,
    yields: 1_936,
    max_sleep: std::time::Duration::from_micros(20),
};

/// Log a protocol failure, tell the other nodes, and keep it for the
/// application threads' next call.
fn report_failure(node: &Node, e: Arc<CsmError>) {
    log::error!("node{}: cashmere protocol thread: {e}", node.me);
    node.sync.abort();
    *node.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
}

/// The node's protocol thread: resolve faults handed over by the SIGSEGV
/// handler, answer page requests, drain write notices.
pub(crate) fn protocol_thread(node: &Node) {
    let mut faults = Vec::new();
    let mut backoff = Backoff::with_policy(WAIT_POLICY);
    while !node.stop.load(Ordering::Acquire) {
        faults.clear();
        node.faults.pending(&mut faults);
        let mut st = node.lock_state();
        let before = (st.stats.messages_served, st.stats.write_notices_received);
        let mut r = Ok(());
        for f in &faults {
            let x = node.handle_fault(&mut st, f).map_err(Arc::new);
            if let (Err(e), Ok(())) = (&x, &r) {
                // Said before the fault is completed: the faulting thread
                // then aborts the process, and the reason must be out first.
                report_failure(node, e.clone());
            }
            node.faults.complete(f, x.is_ok());
            if x.is_err() && r.is_ok() {
                r = x;
            }
        }
        let reported = r.is_err();
        if r.is_ok() {
            r = node.poll_others(&mut st).map_err(Arc::new);
        }
        let busy = !faults.is_empty()
            || before != (st.stats.messages_served, st.stats.write_notices_received);
        drop(st);
        if let Err(e) = r {
            if !reported {
                report_failure(node, e);
            }
            // Keep failing faults so application threads do not hang.
            while !node.stop.load(Ordering::Acquire) {
                faults.clear();
                node.faults.pending(&mut faults);
                for f in &faults {
                    node.faults.complete(f, false);
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            return;
        }
        if busy {
            backoff.restart();
        } else {
            backoff.snooze();
        }
    }
}
