//! A node of the naive protocol: its copies of pages, faults, release and
//! acquire. The node's state is one mutex: a fault, a release and an
//! acquire each hold it from start to end, so they never overlap on a node.
//! Protection changes come before the protocol reads a page it flushes or
//! drops (the `mprotect` is the shoot-down): a thread of this node writing
//! it meanwhile faults and waits for the state instead of writing behind
//! the diff.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use dsm_core::node_barrier::NodeBarrier;
use dsm_core::sigsegv::{self, FaultError, FaultHandler};
use dsm_core::times::{self, Activity};
use dsm_core::twin::{Diff, TwinSpace};
use dsm_core::vm::{HeapMemory, Prot};
use dsm_core::{Allocator, Stats, TimedWindow};
use mc_api::{vclock, Barrier, MemoryChannel, RxRegion};

use crate::space::{Layout, Regions, KEY_BARRIER};
use crate::{NaiveConfig, NaiveError};

/// How long a node waits for node 0's reply or a flag before giving up.
const GIVE_UP: Duration = Duration::from_secs(120);

/// A node's copy of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Page {
    /// No copy: the next access fetches it from node 0.
    Invalid,
    /// A copy as node 0 had it, read-only.
    Read,
    /// A copy being written, with its twin.
    Write,
}

struct State {
    pages: Vec<Page>,
    /// Pages in `Write`, in the order they were twinned.
    dirty: Vec<u32>,
    /// This node's last request's sequence number.
    seq: u32,
    diff: Diff,
    runs: Vec<Range<usize>>,
    words: Vec<u32>,
    bytes: Vec<u8>,
    stats: Stats,
}

pub(crate) struct NaiveNode {
    pub(crate) me: u32,
    pub(crate) nodes: u32,
    pub(crate) threads: u32,
    pub(crate) page_size: u32,
    pub(crate) at: Layout,
    pub(crate) heap: HeapMemory,
    twins: TwinSpace,
    /// Each page's protection in the application view (a `Prot`), as the
    /// fault handler reads it before it takes the state.
    prot: Box<[AtomicU8]>,
    pub(crate) regions: Regions,
    state: Mutex<State>,
    pub(crate) alloc: Allocator,
    pub(crate) window: TimedWindow,
    pub(crate) local: NodeBarrier<NaiveError>,
    pub(crate) barrier: Mutex<Barrier>,
    /// Node 0's server stops when this is set.
    pub(crate) stop: AtomicBool,
    /// Requests node 0's server answered: its own count, as it must not
    /// wait for the state (a fault holds it while it waits for the server).
    pub(crate) served: AtomicU64,
    /// Index in the fault handler's table, once registered.
    registration: AtomicUsize,
}

impl NaiveNode {
    pub(crate) fn new(mc: &MemoryChannel, cfg: &NaiveConfig) -> Result<NaiveNode, NaiveError> {
        if !cfg.page_size_supported() {
            return Err(NaiveError::PageSize(cfg.page_size));
        }
        if !(1..=dsm_core::MAX_THREADS).contains(&cfg.threads) {
            return Err(NaiveError::Threads {
                threads: cfg.threads,
                max: dsm_core::MAX_THREADS,
            });
        }
        times::init();
        let ps = cfg.page_bytes();
        let heap_bytes = cfg.heap_in_pages();
        let pages = heap_bytes / ps;
        let at = Layout {
            page_size: ps,
            flags: cfg.flags.max(1),
        };
        let regions = Regions::attach(mc, at, heap_bytes, cfg.locks)?;
        let me = u32::try_from(mc.node_id().index()).expect("a node number fits u32");
        // A reply slot may hold an earlier run's last reply: go on from its
        // sequence number, so no old reply is taken for a new one.
        let last = regions.reply_rx.load_u64(at.reply_header(me))?;
        Ok(NaiveNode {
            me,
            nodes: mc.nodes(),
            threads: cfg.threads,
            page_size: cfg.page_size,
            at,
            heap: HeapMemory::new(heap_bytes, cfg.heap_base).map_err(NaiveError::Heap)?,
            twins: TwinSpace::new(pages, ps / 4).map_err(NaiveError::Heap)?,
            prot: (0..pages)
                .map(|_| AtomicU8::new(Prot::None as u8))
                .collect(),
            regions,
            state: Mutex::new(State {
                pages: vec![Page::Invalid; pages],
                dirty: Vec::new(),
                seq: u32::try_from(last >> 32).expect("the high half of a u64 fits u32"),
                diff: Diff::new(ps / 4),
                runs: Vec::new(),
                words: vec![0; ps / 4],
                bytes: vec![0; ps],
                stats: Stats::default(),
            }),
            alloc: Allocator::default(),
            window: TimedWindow::new(),
            local: NodeBarrier::default(),
            barrier: Mutex::new(Barrier::new(mc, KEY_BARRIER)?),
            stop: AtomicBool::new(false),
            served: AtomicU64::new(0),
            registration: AtomicUsize::new(usize::MAX),
        })
    }

    /// Route the heap's faults to this node (once it has its final place).
    pub(crate) fn register(&self) -> Result<(), NaiveError> {
        let r = sigsegv::register(self).ok_or(NaiveError::TooManyHeaps(sigsegv::MAX_HEAPS))?;
        self.registration.store(r, Ordering::Release);
        Ok(())
    }

    fn ps(&self) -> usize {
        self.at.page_size
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn stats(&self) -> Stats {
        let mut s = self.state().stats;
        s.message_bytes = s.diff_bytes;
        s.messages_served = self.served.load(Ordering::Relaxed);
        s
    }

    fn set_prot(&self, p: usize, prot: Prot) -> Result<(), NaiveError> {
        let ps = self.ps();
        self.heap
            .protect(p * ps, ps, prot)
            .map_err(NaiveError::Heap)?;
        self.prot[p].store(prot as u8, Ordering::Release);
        Ok(())
    }

    /// Fail if a node has said it failed.
    pub(crate) fn check_failed(&self) -> Result<(), NaiveError> {
        match self.regions.sync_rx.load_u64(self.at.abort())? {
            0 => Ok(()),
            n => Err(NaiveError::NodeFailed {
                node: u32::try_from(n - 1).unwrap_or(u32::MAX),
            }),
        }
    }

    /// Resolve a fault at byte `offset` of the heap: no copy, fetch one
    /// (read-only); a read-only copy, twin it and let the thread write.
    fn resolve(&self, offset: usize) -> Result<(), NaiveError> {
        let p = offset / self.ps();
        let at_fault = self.prot[p].load(Ordering::Acquire);
        let _fault = times::enter(Activity::Fault);
        let mut st = self.state();
        if self.prot[p].load(Ordering::Acquire) != at_fault {
            // Another thread of this node changed the page meanwhile: try
            // the access again.
            return Ok(());
        }
        match st.pages[p] {
            Page::Invalid => {
                self.fetch(&mut st, p)?;
                st.pages[p] = Page::Read;
                st.stats.read_faults += 1;
                self.set_prot(p, Prot::Read)
            }
            Page::Read => {
                // SAFETY: the state is held, which serialises every use of
                // the page's twin.
                let twin = unsafe { self.twins.twin(p) };
                self.heap.read_words(p * self.ps(), twin);
                st.pages[p] = Page::Write;
                st.dirty
                    .push(u32::try_from(p).expect("a page number fits u32"));
                st.stats.write_faults += 1;
                st.stats.twins += 1;
                self.set_prot(p, Prot::ReadWrite)
            }
            Page::Write => Ok(()),
        }
    }

    /// Ask node 0 for page `p` and copy its answer into the heap.
    fn fetch(&self, st: &mut State, p: usize) -> Result<(), NaiveError> {
        let _fetch = times::enter(Activity::Fetch);
        st.seq = st.seq.wrapping_add(1).max(1);
        let page = u32::try_from(p).expect("a page number fits u32");
        let word = u64::from(st.seq) << 32 | u64::from(page);
        self.regions
            .request_tx
            .write_u64(Layout::request(self.me), word)?;
        let header = self.at.reply_header(self.me);
        let rx = &self.regions.reply_rx;
        await_word(rx, header, GIVE_UP, |w| w == word, || self.check_failed()).map_err(
            |e| match e {
                Waited::TimedOut(after) => NaiveError::NoReply { page, after },
                Waited::Failed(e) => e,
            },
        )?;
        rx.read(self.at.reply(self.me), &mut st.bytes)?;
        self.heap.write_bytes(p * self.ps(), &st.bytes);
        st.stats.page_transfers += 1;
        st.stats.messages_sent += 1;
        Ok(())
    }

    /// Release: every written page's diff to node 0's master copy, one
    /// remote write per run of changed bytes; the pages become read-only
    /// copies.
    pub(crate) fn release(&self) -> Result<(), NaiveError> {
        let _diff = times::enter(Activity::Diff);
        let mut st = self.state();
        self.flush(&mut st)?;
        st.stats.releases += 1;
        Ok(())
    }

    fn flush(&self, st: &mut State) -> Result<(), NaiveError> {
        let ps = self.ps();
        let dirty = std::mem::take(&mut st.dirty);
        for &p in &dirty {
            let p = usize::try_from(p).expect("a page number fits usize");
            // Shoot-down first: later writes fault until the diff is out.
            self.set_prot(p, Prot::Read)?;
            let State {
                diff,
                runs,
                words,
                bytes,
                stats,
                pages,
                ..
            } = st;
            self.heap.read_words(p * ps, words);
            // SAFETY: the state is held (see `resolve`).
            let twin = unsafe { self.twins.twin(p) };
            let changed = diff.compute(words, twin);
            pages[p] = Page::Read;
            if diff.is_empty() {
                continue;
            }
            for (w, b) in words.iter().zip(bytes.chunks_exact_mut(4)) {
                b.copy_from_slice(&w.to_ne_bytes());
            }
            runs.clear();
            diff.byte_runs(runs);
            let writes: Vec<(usize, &[u8])> = runs
                .iter()
                .map(|r| (p * ps + r.start, &bytes[r.clone()]))
                .collect();
            self.regions.master_tx.write_many(&writes)?;
            stats.diffs += 1;
            stats.diff_bytes += u64::try_from(changed).expect("a page's bytes fit u64");
            if self.me == 0 {
                stats.home_diffs += 1;
            }
        }
        Ok(())
    }

    /// Acquire: flush what this node wrote, then drop every copy.
    pub(crate) fn acquire(&self) -> Result<(), NaiveError> {
        let _acquire = times::enter(Activity::Acquire);
        let mut st = self.state();
        self.flush(&mut st)?;
        for p in 0..st.pages.len() {
            if st.pages[p] != Page::Invalid {
                self.set_prot(p, Prot::None)?;
                st.pages[p] = Page::Invalid;
                st.stats.invalidations += 1;
            }
        }
        st.stats.acquires += 1;
        Ok(())
    }

    pub(crate) fn count(&self, f: impl FnOnce(&mut Stats)) {
        f(&mut self.state().stats);
    }
}

impl Drop for NaiveNode {
    fn drop(&mut self) {
        let r = self.registration.load(Ordering::Acquire);
        if r != usize::MAX {
            sigsegv::unregister(r);
        }
    }
}

impl FaultHandler for NaiveNode {
    fn heap_view(&self) -> (usize, usize) {
        (self.heap.app_base() as usize, self.heap.len())
    }
    fn resolve_fault(&self, offset: usize) -> Result<(), FaultError> {
        self.resolve(offset).map_err(Into::into)
    }
    fn abandon(&self) {
        let _ = self
            .regions
            .sync_tx
            .write_u64(self.at.abort(), u64::from(self.me) + 1);
    }
    fn node_id(&self) -> u32 {
        self.me
    }
}

/// How a wait for a word ended, if not as hoped.
pub(crate) enum Waited {
    TimedOut(Duration),
    Failed(NaiveError),
}

impl From<mc_api::McError> for Waited {
    fn from(e: mc_api::McError) -> Waited {
        Waited::Failed(e.into())
    }
}

/// Wait until the word at `offset` of `rx` satisfies `done`: spin a little,
/// then yield, then nap (other nodes' processes share the cores). On the
/// virtual clock the thread waits from now until the word's arrival.
pub(crate) fn await_word(
    rx: &RxRegion,
    offset: usize,
    give_up: Duration,
    done: impl Fn(u64) -> bool,
    failed: impl Fn() -> Result<(), NaiveError>,
) -> Result<u64, Waited> {
    let start = Instant::now();
    vclock::wait_begin();
    let r = (|| {
        let mut i = 0u32;
        loop {
            let w = rx.load_u64(offset)?;
            if done(w) {
                return Ok(w);
            }
            if i % 64 == 63 {
                failed().map_err(Waited::Failed)?;
                if start.elapsed() > give_up {
                    return Err(Waited::TimedOut(give_up));
                }
            }
            match i {
                0..256 => std::hint::spin_loop(),
                256..1024 => std::thread::yield_now(),
                _ => std::thread::sleep(Duration::from_micros(20)),
            }
            i = i.saturating_add(1);
        }
    })();
    vclock::wait_end(rx.arrival_range(offset, 8));
    r
}
