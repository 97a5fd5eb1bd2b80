//! Cashmere-2L, CSM-DMS: page-based software distributed shared memory on the
//! Memory Channel API (seed 000 s.2; seed 002 s.3-6). See docs/cashmere.md.
//!
//! Every node runs the same program: [`Csm::start`] with the heap size, then
//! [`Csm::alloc`] (the same allocations in the same order on every node give
//! the same addresses), shared data accessed through [`SharedArray`], and
//! [`Csm::lock_acquire`] / [`Csm::lock_release`], [`Csm::barrier`],
//! [`Csm::flag_set`] / [`Csm::flag_wait`]. Data-race-free programs see
//! release consistency. Several threads of a node share its frames and its
//! protocol state (2L); one thread per node is 1L.
//!
//! Files: `node` (a node and its protocol thread) and `state` (its protocol
//! state); the protocol's parts as `Node` methods: `fault` (read and write
//! faults, resolved on the faulting thread), `fetch` (request/reply with a
//! home), `requests` (answering other nodes), `release`, `acquire`;
//! `sigsegv` (access detection: the SIGSEGV handler), `vm` (the heap's two
//! mappings), `shared` (typed arrays in the heap), `twin` (twins and diffs),
//! `wait` (the one waiting discipline), `loss` (noticing lost stores), `seams` (the variant traits),
//! `dms_data` / `dms_meta` / `dms_sync` (CSM-DMS on Memory Channel),
//! `ms_data` (data by messages), `msg_meta` / `msg_sync` (metadata and
//! synchronisation by messages: CSM-S, CSM-None),
//! `mailbox` (each node's interrupting mailbox), `space` (where that lives
//! in Memory Channel space), `stats` (counts), `times` (where time goes),
//! `error`.

mod acquire;
mod adb;
mod dms_data;
mod dms_meta;
mod dms_sync;
mod error;
mod fault;
mod fetch;
mod homes;
mod loss;
mod mailbox;
mod messages;
mod ms_data;
mod msg_meta;
mod msg_sync;
mod node;
mod release;
mod requests;
pub mod seams;
mod shared;
mod sigsegv;
mod site;
pub mod space;
mod state;
mod stats;
mod times;
pub mod twin;
mod vm;
mod wait;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use mc_api::MemoryChannel;

pub use error::{BarrierWait, CsmError};
pub use homes::{HomeAssignment, HomesError};
pub use shared::SharedArray;
pub use site::MAX_PROTOCOL_NODES;
pub use space::CsmSpace;
pub use state::PageState;
pub use stats::Stats;
pub use times::TimeBreakdown;

use mailbox::Mailboxes;
use messages::Request;
use node::{protocol_thread, window, LocalBarrier, Node};
use state::ProtocolState;
use times::Activity;
use twin::TwinSpace;
use vm::HeapMemory;
use wait::{FutexBell, WaitKind};

/// The protocol variant (seed 000 Table I): how data, metadata and
/// synchronisation move between nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CsmVariant {
    /// CSM-DMS: data, metadata and synchronisation by Memory Channel remote
    /// writes (seed 000 s.2.3.1.1).
    #[default]
    Dms,
    /// CSM-MS: shared data outside Memory Channel space, diffs as messages
    /// with acknowledgements; metadata and synchronisation by Memory Channel
    /// (seed 000 s.2.3.1.2).
    Ms,
    /// CSM-MS-Mg: CSM-MS with home migration to a writer when no thread at
    /// the home is writing the page (seed 000 s.2.3.2).
    MsMg,
    /// CSM-ADB (2L): CSM-MS-Mg, and pages with several consumers are
    /// broadcast through globally received buffers (seed 000 s.2.3.3).
    Adb,
    /// CSM-S: data as CSM-MS, and metadata by explicit messages too
    /// (directory changes to the page's home, piggybacked where they can
    /// be; write notices as messages); synchronisation by Memory Channel
    /// (seed 000 s.2.3.1.3).
    S,
    /// CSM-None: CSM-S, and synchronisation by explicit messages too
    /// (queue locks with a manager per lock, barriers and flags by
    /// messages): no Memory Channel feature beyond low-latency messages
    /// (seed 000 s.2.3.1.4, seed 002 s.6.1).
    None,
    /// CSM-None-Mg: CSM-None with home migration as CSM-MS-Mg's (seed 000
    /// s.2.3.2).
    NoneMg,
}

impl CsmVariant {
    /// Shared data outside Memory Channel space, diffs as messages.
    fn data_by_messages(self) -> bool {
        !matches!(self, CsmVariant::Dms)
    }

    /// Directory and write notices by explicit messages.
    fn metadata_by_messages(self) -> bool {
        matches!(self, CsmVariant::S | CsmVariant::None | CsmVariant::NoneMg)
    }

    /// Locks, barriers and flags by explicit messages.
    fn sync_by_messages(self) -> bool {
        matches!(self, CsmVariant::None | CsmVariant::NoneMg)
    }

    /// Homes migrate to a writer (seed 000 s.2.3.2).
    fn migration(self) -> bool {
        matches!(
            self,
            CsmVariant::MsMg | CsmVariant::Adb | CsmVariant::NoneMg
        )
    }
}

/// One or two levels (seed 000 s.3.2, Fig. 1): whether the threads of a
/// machine share its frames and protocol state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Levels {
    /// CSM-1L: every application thread is a protocol node of its own (its
    /// own frames, twins, directory entries, mailbox and home region), and
    /// the threads of a machine share only its adapter ([`Csm::start_one_level`]).
    One,
    /// CSM-2L: the threads of a machine share its frames and protocol state
    /// (hardware coherence inside the node); the machine is the protocol
    /// node.
    #[default]
    Two,
}

/// How a node notices the requests of other nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MessageDetection {
    /// Application threads poll (seed 000 s.2.1: "each processor ... poll[s]
    /// for messages on every loop back edge"): in the programs' long loops
    /// ([`Csm::poll`]) and while they wait at barriers and flags. The
    /// protocol thread, woken by the adapter's interrupt-on-receive event,
    /// answers what nobody polled for (a node whose threads are all inside
    /// a long stretch without a poll).
    #[default]
    Polling,
    /// Only the protocol thread answers, woken by the interrupt (seed 004's
    /// interrupt-on-receive regions); `Csm::poll` does nothing and waiting
    /// threads do not answer (a thread waiting while it holds the
    /// protocol state still does: nobody else could).
    Interrupt,
}

/// The largest shared heap: every node's home region is the heap's size, and
/// the largest Memory Channel address space an adapter offers is 1 GiB
/// (`firmware_model::config::MAX_ADDRESS_SPACE`).
pub const MAX_HEAP_BYTES: usize = 1 << 30;

/// The most application threads per node: each is an OS thread and, at 1L,
/// a protocol node with a protocol thread of its own; the paper's nodes had
/// four processors.
pub const MAX_THREADS: u32 = 64;

/// What [`Csm::start`] needs; every node must pass the same values.
#[derive(Clone, Debug)]
pub struct Config {
    /// Shared heap, 1 byte to [`MAX_HEAP_BYTES`] (rounded up to pages).
    pub heap_bytes: usize,
    /// Coherence unit: 8192 (default) or 4096.
    pub page_size: u32,
    /// Application threads per node (machine), 1 to [`MAX_THREADS`].
    pub threads: u32,
    /// 2L: the node's threads share one protocol node; 1L: each is its own
    /// ([`Csm::start_one_level`]).
    pub levels: Levels,
    pub locks: u32,
    pub flags: u32,
    /// The home of a page with no other sharer skips twins (seed 000 s.2.1).
    pub exclusive_mode: bool,
    /// With several threads per node, update a write-noticed page that local
    /// threads are writing by an incoming diff at the acquire, instead of
    /// invalidating it (which stops those writers: a shoot-down). Seed 000
    /// s.2.1.
    pub incoming_diffs: bool,
    /// The home maps its master copy (its receive mapping) as its working
    /// copy and writes it directly, with no twins or diffs (seed 000
    /// s.2.3.2). Off: the home keeps a separate working copy and diffs its
    /// writes into the master copy by loopback (the protocol before).
    pub home_direct: bool,
    /// Homes imposed from an earlier run ([`Csm::homes`]); pages it leaves
    /// without one, and every page without it, get theirs by first touch.
    pub homes: Option<Arc<HomeAssignment>>,
    pub variant: CsmVariant,
    pub detection: MessageDetection,
    /// Where the application view of the heap goes: `None`, wherever
    /// `mmap` puts it; `Some(addr)`, exactly there on every node, or an
    /// error if that range is taken (C programs store heap pointers in
    /// shared data, so libcsm gives every node the same base).
    pub heap_base: Option<usize>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heap_bytes: 1 << 20,
            page_size: 8192,
            threads: 1,
            levels: Levels::Two,
            locks: 64,
            flags: 64,
            exclusive_mode: true,
            incoming_diffs: true,
            home_direct: true,
            homes: None,
            variant: CsmVariant::Dms,
            detection: MessageDetection::Polling,
            heap_base: None,
        }
    }
}

impl Config {
    /// Where CSM-DMS keeps its state for this configuration on `nodes` nodes.
    pub fn space(&self, nodes: u32) -> CsmSpace {
        CsmSpace {
            nodes,
            pages: self.heap_bytes.div_ceil(self.page_size as usize) as u32,
            page_size: self.page_size,
            flags: self.flags,
        }
    }
}

/// A node's handle on Cashmere; clone it for each application thread.
#[derive(Clone)]
pub struct Csm {
    node: Arc<Node>,
    loss: loss::LossWatch,
    server: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl Csm {
    /// Start Cashmere on this node: allocate (or find) the Memory Channel
    /// regions, map the heap, install the fault handler, start the protocol
    /// thread, and wait until every node has done the same. The handle is
    /// the node's threads' (2L); for 1L with several threads per node use
    /// [`Csm::start_one_level`].
    pub fn start(mc: &MemoryChannel, cfg: &Config) -> Result<Csm, CsmError> {
        Self::check_config(cfg)?;
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
        Self::check_config(cfg)?;
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

    fn check_config(cfg: &Config) -> Result<(), CsmError> {
        if cfg.page_size != 4096 && cfg.page_size != 8192 {
            return Err(CsmError::PageSize(cfg.page_size));
        }
        if cfg.threads == 0 {
            return Err(CsmError::NoThreads);
        }
        if cfg.threads > MAX_THREADS {
            return Err(CsmError::TooManyThreads(cfg.threads));
        }
        if !(1..=MAX_HEAP_BYTES).contains(&cfg.heap_bytes) {
            return Err(CsmError::HeapSize(cfg.heap_bytes));
        }
        Ok(())
    }

    fn start_at(mc: &MemoryChannel, cfg: &Config, site: site::Site) -> Result<Csm, CsmError> {
        times::init();
        let nodes = site.nodes;
        let space = cfg.space(nodes);
        if let Some(h) = &cfg.homes {
            h.check(nodes, cfg.page_size, space.pages)?;
        }
        let ps = cfg.page_size as usize;
        let heap = Arc::new(HeapMemory::new(space.heap_bytes() as usize, cfg.heap_base)?);
        let twins = TwinSpace::new(space.pages as usize, ps / 4)?;
        let bell = Arc::new(FutexBell::default());
        // Before the start barrier: no node writes to a mailbox before its
        // owner receives it.
        let mail = Arc::new(Mailboxes::new(mc, space, &site)?);
        let v = cfg.variant;
        let data: Box<dyn seams::DataPropagation> = if v.data_by_messages() {
            Box::new(ms_data::MsData::new(
                &site,
                space,
                mail.clone(),
                heap.clone(),
            )?)
        } else {
            Box::new(dms_data::DmsData::new(mc, space, mail.clone(), &site)?)
        };
        let meta: Box<dyn seams::Metadata> = if v.metadata_by_messages() {
            Box::new(msg_meta::MsgMeta::new(&site, space, mail.clone())?)
        } else {
            Box::new(dms_meta::DmsMeta::new(
                mc,
                space,
                mail.clone(),
                bell.clone(),
                &site,
            )?)
        };
        let sync: Box<dyn seams::Synchronization> = if v.sync_by_messages() {
            Box::new(msg_sync::MsgSync::new(
                mc,
                space,
                cfg.locks,
                mail.clone(),
                bell.clone(),
                &site,
            )?)
        } else {
            Box::new(dms_sync::DmsSync::new(
                mc,
                space,
                cfg.locks,
                mail.clone(),
                bell.clone(),
                &site,
            )?)
        };
        let signal = mc.event_signal()?;
        let node = Arc::new(Node {
            me: site.me,
            nodes,
            shared_adapter: site.per_adapter > 1,
            page_size: cfg.page_size,
            threads: cfg.threads,
            exclusive_mode: cfg.exclusive_mode,
            incoming_diffs: cfg.incoming_diffs && cfg.threads > 1,
            home_direct: cfg.home_direct,
            polling: cfg.detection == MessageDetection::Polling,
            migration: v.migration(),
            adb: match cfg.variant {
                CsmVariant::Adb => Some(adb::BroadcastBuffers::new(mc, space, &site)?),
                _ => None,
            },
            imposed_homes: cfg.homes.clone(),
            prot: (0..space.pages).map(|_| AtomicU8::new(0)).collect(),
            heap,
            twins,
            registration: AtomicUsize::new(usize::MAX),
            data,
            meta,
            sync,
            mc: mc.clone(),
            mail,
            bell,
            signal,
            state: Mutex::new(ProtocolState::new(space.pages, nodes, cfg.page_size)),
            served: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            stop: AtomicBool::new(false),
            local: Mutex::new(LocalBarrier {
                arrived: 0,
                generation: 0,
                failed: None,
            }),
            local_cv: Condvar::new(),
            next_alloc: Mutex::new(0),
            start: Instant::now(),
            failure: Mutex::new(None),
            window: Mutex::new((None, None)),
            proto_window: AtomicU8::new(window::NONE),
            proto_times: Mutex::new(None),
        });
        let registration =
            sigsegv::register(&node).ok_or(CsmError::TooManyHeaps(sigsegv::MAX_HEAPS))?;
        node.registration.store(registration, Ordering::Release);
        {
            // Requests answered before this start are not ours to answer.
            let mut st = node.lock_state();
            for r in 0..nodes {
                let key = node::request_key(node.data.poll_request(r));
                st.served[r as usize] = key;
                node.served[r as usize].store(key, Ordering::Relaxed);
            }
            // Past every sequence number an earlier run's replies carry, so
            // none of them passes for an answer to this run's requests.
            st.fetch_seq = (0..nodes)
                .map(|n| node.data.reply_seq(messages::ReplySlot::Ack(n)))
                .fold(node.data.reply_seq(messages::ReplySlot::Reply), |a, b| {
                    if b.wrapping_sub(a) < u32::MAX / 2 {
                        b
                    } else {
                        a
                    }
                });
        }
        let n2 = node.clone();
        let server = std::thread::Builder::new()
            .name(format!("csm-proto{}", node.me))
            .spawn(move || protocol_thread(&n2))?;
        let csm = Csm {
            loss: loss::LossWatch::new(mc),
            node,
            server: Arc::new(Mutex::new(Some(server))),
        };
        // Every node's regions and protocol thread are up past this point.
        csm.node.sync.start_barrier()?;
        Ok(csm)
    }

    pub fn node_id(&self) -> u32 {
        self.node.me
    }
    pub fn nodes(&self) -> u32 {
        self.node.nodes
    }
    pub fn threads(&self) -> u32 {
        self.node.threads
    }
    pub fn page_size(&self) -> u32 {
        self.node.page_size
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
    pub fn poll(&self) -> Result<(), CsmError> {
        self.node.serve_if_waiting()
    }

    /// Seconds since this node started Cashmere.
    pub fn elapsed(&self) -> f64 {
        self.node.start.elapsed().as_secs_f64()
    }

    /// Mark the start of the timed part of a program (the earliest mark of
    /// the node's threads counts). The calling thread's time breakdown
    /// ([`Csm::thread_breakdown`]) starts here too, and the protocol
    /// thread's at the node's first mark.
    pub fn mark_start(&self) {
        times::begin_window();
        let t = self.elapsed();
        let mut w = self.node.window.lock().unwrap_or_else(|p| p.into_inner());
        w.0 = Some(w.0.map_or(t, |s| s.min(t)));
        if self
            .node
            .proto_window
            .compare_exchange(
                window::NONE,
                window::BEGIN,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            self.node.wake_protocol_thread();
        }
    }

    /// Mark the end of the timed part (the latest mark counts; so does the
    /// protocol thread's breakdown).
    pub fn mark_end(&self) {
        times::end_window();
        let t = self.elapsed();
        let mut w = self.node.window.lock().unwrap_or_else(|p| p.into_inner());
        w.1 = Some(w.1.map_or(t, |e| e.max(t)));
        drop(w);
        let pw = &self.node.proto_window;
        let now = pw.load(Ordering::Acquire);
        if now >= window::BEGIN {
            pw.store(window::END, Ordering::Release);
            self.node.wake_protocol_thread();
        }
    }

    /// Seconds between the marks, if both were made.
    pub fn timed(&self) -> Option<f64> {
        let w = self.node.window.lock().unwrap_or_else(|p| p.into_inner());
        Some(w.1? - w.0?)
    }

    /// Where the calling thread's time went since its [`Csm::mark_start`]
    /// (call it from each application thread after its `mark_end`; `name`
    /// names the thread in the result).
    pub fn thread_breakdown(&self, name: &str) -> TimeBreakdown {
        times::breakdown(name, self.node.me)
    }

    /// Where the node's protocol thread's time went in the timed window
    /// (from the node's first mark to its last), once [`Csm::finish`] has
    /// stopped it.
    pub fn protocol_breakdown(&self) -> Option<TimeBreakdown> {
        self.node
            .proto_times
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Allocate `len` elements in the shared heap (aligned to `T` and 8 bytes,
    /// or to a page with `page_aligned`). Allocation is deterministic: every
    /// node makes the same calls in the same order and gets the same array.
    pub fn alloc<T: Copy>(
        &self,
        len: usize,
        page_aligned: bool,
    ) -> Result<SharedArray<T>, CsmError> {
        let mut next = self
            .node
            .next_alloc
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let align = if page_aligned {
            self.node.page_size as usize
        } else {
            std::mem::align_of::<T>().max(8)
        };
        let off = next.div_ceil(align) * align;
        let bytes = len * std::mem::size_of::<T>();
        if off + bytes > self.node.heap.len() {
            return Err(CsmError::HeapFull {
                heap: self.node.heap.len(),
                wanted: bytes,
                at: off,
            });
        }
        *next = off + bytes;
        // SAFETY: `off + bytes` is within the heap (checked above), so the
        // pointer stays in bounds of the application view.
        let ptr = unsafe { self.node.heap.app_base().add(off) } as *mut T;
        // SAFETY: `ptr` is aligned for `T` (`off` is a multiple of its
        // alignment, the mapping page-aligned) and points at `len` elements
        // inside the application view, which stays mapped while this node's
        // `Csm` handles live; programs use an array only while they do (see
        // `SharedArray`).
        Ok(unsafe { SharedArray::new(ptr, len, off) })
    }

    fn check_failed(&self) -> Result<(), CsmError> {
        if let Some(e) = self
            .node
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            return Err(CsmError::ProtocolThread(e));
        }
        Ok(())
    }

    pub fn lock_acquire(&self, lock: u32) -> Result<(), CsmError> {
        self.check_failed()?;
        {
            let _lock = times::enter(Activity::Lock);
            self.node.sync.lock_acquire(lock)?;
        }
        let mut st = self.node.lock_state();
        st.stats.lock_acquires += 1;
        self.node.acquire(&mut st)
    }

    pub fn lock_release(&self, lock: u32) -> Result<(), CsmError> {
        {
            let mut st = self.node.lock_state();
            self.node.release(&mut st)?;
        }
        self.node.sync.lock_release(lock)
    }

    /// A barrier of every thread on every node. The last thread of a node to
    /// arrive releases for all of them (they share the frames, so the node's
    /// dirty list holds every thread's writes: the seed's "diff performed
    /// only by the last writer to enter the barrier", seed 002 s.3.3), takes
    /// the node through the cluster barrier and the acquire, then lets its
    /// node's threads go.
    pub fn barrier(&self) -> Result<(), CsmError> {
        self.check_failed()?;
        self.loss.check(&self.node.mc)?;
        let _barrier = times::enter(Activity::Barrier);
        let n = &self.node;
        let mut lb = n.local.lock().unwrap_or_else(|p| p.into_inner());
        lb.arrived += 1;
        let gen = lb.generation;
        if lb.arrived < n.threads {
            while lb.generation == gen {
                lb = n
                    .local_cv
                    .wait_timeout(lb, std::time::Duration::from_millis(10))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                if lb.generation == gen {
                    if let Some(node) = n.sync.aborted() {
                        return Err(CsmError::NodeFailed { node });
                    }
                }
            }
            return match &lb.failed {
                Some(e) => Err(CsmError::NodeBarrier(e.clone())),
                None => Ok(()),
            };
        }
        drop(lb);
        let r = (|| {
            let episode = {
                let mut st = n.lock_state();
                n.release(&mut st)?;
                st.barrier_episode += 1;
                st.stats.barriers += 1;
                st.barrier_episode
            };
            n.sync.barrier(episode, &mut || n.serve_if_waiting())?;
            let mut st = n.lock_state();
            n.acquire(&mut st)
        })()
        .map_err(Arc::new);
        let mut lb = n.local.lock().unwrap_or_else(|p| p.into_inner());
        lb.arrived = 0;
        lb.generation += 1;
        if let Err(e) = &r {
            lb.failed = Some(e.clone());
        }
        n.local_cv.notify_all();
        r.map_err(CsmError::NodeBarrier)
    }

    /// Write-once flag: release, then broadcast `value` (nonzero).
    pub fn flag_set(&self, flag: u32, value: u64) -> Result<(), CsmError> {
        if value == 0 {
            return Err(CsmError::ZeroFlagValue);
        }
        {
            let mut st = self.node.lock_state();
            self.node.release(&mut st)?;
        }
        self.node.sync.flag_set(flag, value)
    }

    /// Wait until `flag` is set, then acquire; returns its value.
    pub fn flag_wait(&self, flag: u32) -> Result<u64, CsmError> {
        let v = {
            let _flag = times::enter(Activity::Flag);
            self.node.bell.wait(WaitKind::Remote, || {
                let v = self.node.sync.flag_get(flag)?;
                if v != 0 {
                    return Ok::<_, CsmError>(Some(v));
                }
                self.check_failed()?;
                self.node.check_failed()?;
                self.node.serve_if_waiting()?;
                Ok(None)
            })?
        };
        let mut st = self.node.lock_state();
        st.stats.flag_waits += 1;
        self.node.acquire(&mut st)?;
        Ok(v)
    }

    /// Tell every node this one has failed: their barriers, flag waits and
    /// page fetches then fail instead of waiting for it.
    pub fn abort(&self) {
        self.node.sync.abort();
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.node.lock_state().stats;
        s.message_bytes = self.node.mail.sent_bytes();
        s
    }

    /// The home of every page as far as this node knows it: imposed, or
    /// taken by first touch (the replicated directory). After
    /// [`Csm::finish`] every node knows every home assigned before the
    /// final barrier. Write it out (`HomeAssignment::render`) to impose it
    /// on a later run.
    pub fn homes(&self) -> HomeAssignment {
        let n = &self.node;
        let st = n.lock_state();
        HomeAssignment {
            nodes: n.nodes,
            page_size: n.page_size,
            homes: (0..st.pages.len() as u32)
                .map(|p| {
                    st.pages[p as usize]
                        .home
                        .or_else(|| n.imposed_home(p))
                        .or_else(|| n.meta.home(p))
                })
                .collect(),
        }
    }

    /// The protocol state of the page holding heap byte `offset` (for tests).
    pub fn page_state(&self, offset: usize) -> PageState {
        self.node.lock_state().pages[offset / self.node.page_size as usize].state
    }

    /// One null request/reply with `home` (the Table II "null message").
    pub fn null_round_trip(&self, home: u32) -> Result<(), CsmError> {
        let mut st = self.node.lock_state();
        self.node.fetch(&mut st, home, Request::Null, &mut [])
    }

    /// Fetch a copy of `page` from its home by request/reply and return it,
    /// leaving the working copy and the page's state alone (for the
    /// benchmark and for tests of the message layer).
    pub fn bench_fetch(&self, page: u32) -> Result<Vec<u8>, CsmError> {
        let n = &self.node;
        let mut st = n.lock_state();
        let home = n.bench_home(&mut st, page)?;
        let mut buf = vec![0u8; n.page_size as usize];
        n.fetch(&mut st, home, Request::Page(page), &mut buf)?;
        Ok(buf)
    }

    /// Make a twin of `page` from the working copy (the Table II "twin"
    /// operation: a copy of the page into twin memory; here a scratch page,
    /// so the page's real twin, if any, is left alone).
    pub fn bench_twin(&self, page: u32) -> Result<(), CsmError> {
        let n = &self.node;
        let mut st = n.lock_state();
        let mut t = std::mem::take(&mut st.words);
        n.heap
            .read_words(page as usize * n.page_size as usize, &mut t);
        std::hint::black_box(&t);
        st.words = t;
        Ok(())
    }

    /// Diff `page` against a twin that differs from it in its first `words`
    /// words and send the diff to the page's home (the Table II "diff"
    /// operation: remote writes, or a message and its acknowledgement). The words written equal the working copy's, which this
    /// node must not have modified. Returns the bytes sent.
    pub fn bench_diff(&self, page: u32, words: usize) -> Result<usize, CsmError> {
        let n = &self.node;
        let mut st = n.lock_state();
        let home = n.bench_home(&mut st, page)?;
        let nw = n.page_size as usize / 4;
        let mut cur = vec![0u32; nw];
        n.heap
            .read_words(page as usize * n.page_size as usize, &mut cur);
        let mut twin = cur.clone();
        for w in twin.iter_mut().take(words) {
            *w = !*w;
        }
        let mut runs = Vec::new();
        twin::diff(&cur, &mut twin, &mut runs);
        let bytes = n.data.write_diff(home, page, &cur, &runs)?;
        if n.data.diffs_are_messages() {
            // A diff message is done when the home acknowledges it.
            n.diff_message_acked(&mut st, home, page)?;
        }
        Ok(bytes)
    }

    /// Final barrier, then stop the protocol thread. Call once, from one
    /// thread per node, after every thread's last access to shared data.
    pub fn finish(&self) -> Result<Stats, CsmError> {
        let episode = {
            let mut st = self.node.lock_state();
            self.node.release(&mut st)?;
            st.barrier_episode += 1;
            st.barrier_episode
        };
        self.node
            .sync
            .barrier(episode, &mut || self.node.serve_if_waiting())?;
        self.node.stop.store(true, Ordering::Release);
        self.node.wake_protocol_thread();
        if let Some(h) = self.server.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
        self.check_failed()?;
        Ok(self.stats())
    }
}
