//! A node's handle on Cashmere ([`Csm`]): starting it, what it is, the
//! timed window, allocation in the shared heap, and what it counted.
//! Synchronisation is in `sync_api`, the benchmark's hooks in
//! `bench_hooks`.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use mc_api::{vclock, MemoryChannel};

use crate::config::Config;
use crate::error::CsmError;
use crate::homes::HomeAssignment;
use crate::loss::LossWatch;
use crate::node::{self, Node};
use crate::site;
use crate::state::PageState;
use crate::times::{self, TimeBreakdown};
use crate::variant::Levels;
use dsm_core::SharedArray;
use dsm_core::Stats;

/// How often `Csm::poll` looks whether the clock is due to be brought up
/// to date (virtual time; `vclock::sync_when_due` then syncs at most every
/// `vclock::SYNC_GAP`).
pub const POLL_SYNC_EVERY: u32 = 16;

thread_local! {
    /// This thread's calls of `Csm::poll`, to look at the clock every
    /// `POLL_SYNC_EVERY`th.
    static POLLS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// A node's handle on Cashmere; clone it for each application thread.
#[derive(Clone)]
pub struct Csm {
    pub(crate) node: Arc<Node>,
    pub(crate) loss: LossWatch,
    pub(crate) server: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl Csm {
    /// Start Cashmere on this node: allocate (or find) the Memory Channel
    /// regions, map the heap, install the fault handler, start the protocol
    /// thread, and wait until every node has done the same. The handle is
    /// the node's threads' (2L); for 1L with several threads per node use
    /// [`Csm::start_one_level`].
    pub fn start(mc: &MemoryChannel, cfg: &Config) -> Result<Csm, CsmError> {
        cfg.check()?;
        if cfg.levels == Levels::One && cfg.threads > 1 {
            return Err(CsmError::OneLevelThreads {
                threads: cfg.threads,
            });
        }
        let site = site::Site::new(mc, 0, 1, Default::default())?;
        Self::start_at(mc, cfg, site)
    }

    /// Start the one-level protocol (CSM-1L) on this machine: a protocol node
    /// for each of its `cfg.threads` application threads, all on this
    /// machine's adapter (processor `t` of the machine on adapter node `a`
    /// is protocol node `a * threads + t`). Returns one handle per thread,
    /// in order; each thread uses its own, and calls [`Csm::finish`] on it.
    /// Every machine must call this with the same configuration.
    pub fn start_one_level(mc: &MemoryChannel, cfg: &Config) -> Result<Vec<Csm>, CsmError> {
        cfg.check()?;
        let per = cfg.threads;
        let one = Config {
            threads: 1,
            levels: Levels::One,
            ..cfg.clone()
        };
        let shared = Arc::new(site::Attachments::default());
        let sites = (0..per)
            .map(|t| site::Site::new(mc, t, per, shared.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        // Together: each waits in the start barrier for all the others.
        std::thread::scope(|s| {
            let started: Vec<_> = sites
                .into_iter()
                .map(|site| {
                    let one = &one;
                    s.spawn(move || Self::start_at(mc, one, site))
                })
                .collect();
            let mut csms = Vec::with_capacity(per as usize);
            let mut first_err = None;
            for h in started {
                match h.join() {
                    Ok(Ok(c)) => csms.push(c),
                    Ok(Err(e)) => {
                        first_err.get_or_insert(e);
                    }
                    Err(p) => std::panic::resume_unwind(p),
                }
            }
            match first_err {
                None => Ok(csms),
                Some(e) => {
                    // The others would wait for it at their first barrier.
                    for c in &csms {
                        c.abort();
                    }
                    Err(e)
                }
            }
        })
    }

    fn start_at(mc: &MemoryChannel, cfg: &Config, site: site::Site) -> Result<Csm, CsmError> {
        let (node, server) = node::start_node(mc, cfg, site)?;
        let csm = Csm {
            loss: LossWatch::new(mc),
            node,
            server: Arc::new(Mutex::new(Some(server))),
        };
        // Every node's regions and protocol thread are up past this point.
        csm.node.sync().start_barrier()?;
        Ok(csm)
    }

    pub fn node_id(&self) -> u32 {
        self.node.me()
    }
    pub fn nodes(&self) -> u32 {
        self.node.nodes()
    }
    pub fn threads(&self) -> u32 {
        self.node.threads()
    }
    pub fn page_size(&self) -> u32 {
        self.node.page_size()
    }

    /// Answer the requests of other nodes that have arrived, if any: message
    /// detection by polling (seed 000 s.2.1; the paper's binaries polled on
    /// every loop back edge, instrumented by a rewriting tool). Programs call
    /// it in their long loops, about every 10-100 us of work (once per row,
    /// say): a request then waits at most that long, instead of for the
    /// protocol thread, which has to be woken and then to win a core from the
    /// computing threads (hundreds of microseconds when every core
    /// computes). One load per other node when nothing has arrived; nothing
    /// under [`MessageDetection::Interrupt`].
    ///
    /// In virtual time every [`POLL_SYNC_EVERY`]th call also brings the
    /// thread's clock up to date, if it has not been for
    /// `vclock::SYNC_GAP`, and holds it at the quantum if it is too far
    /// ahead (a safe point: the program holds no protocol lock here).
    ///
    /// Inlined into the loop that polls: when nothing has arrived it costs
    /// a few loads and compares (the paper's "a load and a compare"), and
    /// the count that paces the clock is the thread's own, not a
    /// read-modify-write of a word the node's threads share.
    #[inline]
    pub fn poll(&self) -> Result<(), CsmError> {
        if vclock::enabled() {
            return self.poll_on_clock();
        }
        self.node.serve_if_waiting()
    }

    /// [`Csm::poll`] on the virtual clock. Out of line: inlined, the clock's
    /// machinery changed how the compiler built the program's loop around
    /// it, and under counted work (edges counted after optimisation) SOR's
    /// count of the same computation with it (making the raw count's read
    /// inlinable moved SOR small's one-thread count by 50%).
    #[inline(never)]
    fn poll_on_clock(&self) -> Result<(), CsmError> {
        // Which polls pace the clock, the pacing, and the look for
        // requests are not the thread's work under counted work (a
        // service found is protocol work, `times::enter`).
        let _clock = vclock::counter::Uncounted::enter();
        if POLLS.with(|c| {
            let n = c.get();
            c.set(n.wrapping_add(1));
            n % POLL_SYNC_EVERY == 0
        }) {
            vclock::sync_when_due();
        }
        self.node.serve_if_waiting()
    }

    /// Put the calling thread on the virtual clock (a predicted-time run;
    /// otherwise this does nothing): application thread `local` of this
    /// node, starting at virtual time `vt` (its spawner's,
    /// `vclock::now()`). Keep the returned guard for the thread's life.
    /// The protocol thread's work is charged to the node's thread 0.
    pub fn join_clock(&self, local: u32, vt: u64) -> Result<vclock::Participant, CsmError> {
        let p = dsm_core::join_clock(self.node_id(), local, vt)
            .map_err(|e| CsmError::Clock(Arc::new(e)))?;
        if local == 0 {
            if let Some(slot) = vclock::my_slot() {
                self.node.control().set_app0_slot(slot);
            }
        }
        Ok(p)
    }

    /// The predicted time of the timed part: from the node's earliest
    /// [`Csm::mark_start`] to its latest [`Csm::mark_end`] in virtual time,
    /// in seconds (a predicted-time run with both marks made).
    ///
    /// `None` too when a thread's work count went wrong
    /// (`vclock::check`): no prediction rather than a wrong one.
    pub fn predicted(&self) -> Option<f64> {
        self.node.window().predicted()
    }

    /// The virtual window itself: (earliest start, latest end), ns.
    pub fn virtual_window(&self) -> Option<(u64, u64)> {
        self.node.window().virtual_window()
    }

    /// Seconds since this node started Cashmere.
    pub fn elapsed(&self) -> f64 {
        self.node.window().elapsed()
    }

    /// Mark the start of the timed part of a program (the earliest mark of
    /// the node's threads counts). The calling thread's time breakdown
    /// ([`Csm::thread_breakdown`]) starts here too, and the protocol
    /// thread's at the node's first mark.
    pub fn mark_start(&self) {
        // The protocol thread's window opens with the first thread's mark.
        self.node
            .window()
            .mark_start(|| self.node.control().mark_start());
    }

    /// Mark the end of the timed part (the latest mark counts; so does the
    /// protocol thread's breakdown).
    pub fn mark_end(&self) {
        self.node
            .window()
            .mark_end(|| self.node.control().mark_end());
    }

    /// Seconds between the marks, if both were made.
    pub fn timed(&self) -> Option<f64> {
        self.node.window().timed()
    }

    /// Where the calling thread's time went since its [`Csm::mark_start`]
    /// (call it from each application thread after its `mark_end`; `name`
    /// names the thread in the result).
    pub fn thread_breakdown(&self, name: &str) -> TimeBreakdown {
        times::breakdown(name, self.node.me())
    }

    /// Where the node's protocol thread's time went in the timed window
    /// (from the node's first mark to its last), once [`Csm::finish`] has
    /// stopped it.
    pub fn protocol_breakdown(&self) -> Option<TimeBreakdown> {
        self.node.control().breakdown()
    }

    /// Allocate `len` elements in the shared heap (aligned to `T` and 8 bytes,
    /// or to a page with `page_aligned`). Allocation is deterministic: every
    /// node makes the same calls in the same order and gets the same array.
    pub fn alloc<T: Copy>(
        &self,
        len: usize,
        page_aligned: bool,
    ) -> Result<SharedArray<T>, CsmError> {
        let n = &self.node;
        n.allocator()
            .alloc(n.heap(), n.ps(), len, page_aligned)
            .map_err(|e| CsmError::HeapFull {
                heap: e.heap,
                wanted: e.wanted,
                at: e.at,
            })
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.node.lock_state().stats;
        s.message_bytes = self.node.message_bytes();
        s
    }

    /// The home of every page as far as this node knows it: imposed, or
    /// taken by first touch (the replicated directory). After
    /// [`Csm::finish`] every node knows every home assigned before the
    /// final barrier. Write it out (`HomeAssignment::render`) to impose it
    /// on a later run.
    pub fn homes(&self) -> HomeAssignment {
        self.node.home_assignment()
    }

    /// The protocol state of the page holding heap byte `offset` (for tests).
    pub fn page_state(&self, offset: usize) -> PageState {
        self.node.lock_state().pages[offset / self.node.ps()].state
    }
}
