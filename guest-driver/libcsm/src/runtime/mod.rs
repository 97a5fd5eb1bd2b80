//! A C program's run on Cashmere: one guest process per node, the program's
//! processes (SPLASH's `CREATE`) as that process's threads, Cashmere-2L
//! underneath (seed 000 s.2: the threads of a node share its frames).
//!
//! Process `p` of `P = nodes x threads` runs on node `p / threads` as its
//! thread `p % threads`; process 0 is `main` on node 0. Node 0 runs `main`;
//! every other node stops in `MAIN_INITENV` (after Cashmere has started
//! everywhere), waits for node 0's start flag, runs its processes, and
//! leaves when node 0 ends the run (`MAIN_END` or `exit`).
//!
//! The heap: the runtime's control block (allocation pointer, lock-id
//! counter, the processes' functions, node 0's layout) at offset 0, then
//! the program's `G_MALLOC` space, then the program's globals, which end
//! the heap at their link-time address (`globals`). Node 0 writes the
//! control block, then sets the start flag (a Cashmere release); the others
//! wait for the flag (an acquire) and read it.
//!
//! The parts: `error` (why a run cannot go on), `control` (the control
//! block's words), `heap` (the largest heap the run's variant and cluster
//! allow, and why), `start` (`MAIN_INITENV`: the heap's layout and
//! Cashmere's start), `processes` (CREATE, the start flag, the end) and
//! `exit` (what happens when the program exits or forks).

mod control;
mod error;
mod exit;
mod heap;
mod processes;
mod start;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use dsm_core::{Dsm, TimeBreakdown};
use mc_api::MemoryChannel;

use crate::globals::Globals;
use crate::settings::Settings;
use control::{W_NEXT_ALLOC, W_NEXT_LOCK};

pub use error::RunError;
pub use start::main_initenv;

/// Cashmere lock 0 guards the runtime's counters; program locks use the rest.
pub const RUNTIME_LOCK: u32 = 0;

/// Node 0's bookkeeping of CREATE.
#[derive(Default)]
struct Creation {
    funcs: Vec<usize>,
    created: u32,
    started: bool,
    /// The end barrier is done (WAIT_FOR_END).
    ended: bool,
    local: Vec<JoinHandle<()>>,
}

/// The node's run.
pub struct Runtime {
    pub mc: MemoryChannel,
    pub csm: Dsm,
    pub settings: Settings,
    pub me: u32,
    pub nodes: u32,
    pub threads: u32,
    pub procs: u32,
    pub heap_len: usize,
    globals: Globals,
    control: *mut u64,
    /// Where the heap starts (it ends where the globals end).
    base: usize,
    user_start: usize,
    user_end: usize,
    /// The largest heap this run could have, and why.
    limit: heap::HeapLimit,
    creation: Mutex<Creation>,
    finished: AtomicBool,
    pub breakdowns: Mutex<Vec<TimeBreakdown>>,
    pub roi: Mutex<(Option<Instant>, Option<Instant>)>,
    pub program: String,
    pub started_at: Instant,
}

// SAFETY: the raw pointers point into the shared heap, which lives as long
// as the process; who touches which word when is the runtime's protocol
// (node 0 before the start flag; under the runtime lock after it).
unsafe impl Send for Runtime {}
// SAFETY: as above.
unsafe impl Sync for Runtime {}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
/// Set once the node has failed or ended: the exit handler does nothing.
static DONE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread's process number, if it is one of the program's.
    static PROC: Cell<Option<u32>> = const { Cell::new(None) };
}

/// The program's globals and whether mc-cc built it, as the macro file's
/// constructor registers them before `main`.
static REGISTERED: OnceLock<(Globals, bool)> = OnceLock::new();

/// Called from the constructor (`csm_register_globals`).
pub fn register(globals: Globals, built: bool) {
    let _ = REGISTERED.set((globals, built));
}

/// The running node. A macro used before `MAIN_INITENV` starts the cluster
/// right there, with the same heap (SPLASH-3's Barnes `G_MALLOC`s its
/// bodies before it calls `MAIN_INITENV`: harmless with `malloc`); without
/// the constructor's registration it is the error naming what came early.
pub fn get(what: &'static str) -> Result<&'static Runtime, RunError> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    match REGISTERED.get() {
        Some(&(globals, built)) => main_initenv(globals, built),
        None => Err(RunError::NotStarted { what }),
    }
}

/// Print `e`, tell the other nodes, stop this node.
pub fn fatal(e: RunError) -> ! {
    let node = RUNTIME
        .get()
        .map(|r| r.me.to_string())
        .or_else(|| std::env::var("MC_NODE").ok())
        .unwrap_or_else(|| "?".into());
    eprintln!("csm: node {node}: {}", mc_api::ErrorChain(&e));
    DONE.store(true, Ordering::SeqCst);
    if let Some(r) = RUNTIME.get() {
        r.csm.abort();
    }
    // SAFETY: _exit ends the process without running exit handlers, which
    // could wait for the nodes this one just told it failed.
    unsafe { libc::_exit(1) }
}

pub fn ok<T>(r: Result<T, RunError>) -> T {
    r.unwrap_or_else(|e| fatal(e))
}

/// The calling thread's process number (0 for any thread of node 0 that
/// is not one of the created processes: main).
pub fn process_id() -> u32 {
    PROC.with(|p| p.get()).unwrap_or(0)
}

impl Runtime {
    /// Whether `addr` is in the shared heap.
    pub fn is_shared(&self, addr: usize) -> bool {
        (self.base..self.base + self.heap_len).contains(&addr)
    }

    /// Whether the processes are running (node 0 has started them; always
    /// on the other nodes, whose code runs only after the start).
    pub fn started(&self) -> bool {
        self.me != 0
            || self
                .creation
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .started
    }

    /// Run `f` under the runtime's cluster lock once the processes run
    /// (before, node 0 is alone and needs none).
    pub fn with_runtime_lock<T>(&self, f: impl FnOnce() -> T) -> Result<T, RunError> {
        if !self.started() {
            return Ok(f());
        }
        self.csm.lock_acquire(RUNTIME_LOCK)?;
        let v = f();
        self.csm.lock_release(RUNTIME_LOCK)?;
        Ok(v)
    }

    /// G_MALLOC: `bytes` of the shared heap, the same address on every node
    /// (one allocation pointer for the cluster, in the control block).
    pub fn g_malloc(&self, bytes: usize) -> Result<*mut u8, RunError> {
        let page = self.settings.page_size as usize;
        // Large arrays start on a page of their own (less false sharing).
        let align = if bytes >= page { page } else { 16 };
        let r = self.with_runtime_lock(|| {
            let next = usize::try_from(self.read(W_NEXT_ALLOC)).expect("an offset in the heap");
            let at = next.div_ceil(align) * align;
            let end = at.saturating_add(bytes.max(1));
            if end > self.user_end {
                return Err(RunError::HeapFull {
                    wanted: bytes,
                    total: end.saturating_sub(self.user_start),
                    size: self.user_end - self.user_start,
                    set: self.settings.heap_mib,
                    limit: self.limit,
                });
            }
            self.write(W_NEXT_ALLOC, (at + bytes.max(1)) as u64);
            Ok(at)
        })??;
        Ok((self.base + r) as *mut u8)
    }

    /// `n` new lock ids (LOCKINIT, ALOCKINIT), from the cluster's counter.
    pub fn lock_ids(&self, n: u32) -> Result<u32, RunError> {
        self.with_runtime_lock(|| {
            let first = self.read(W_NEXT_LOCK);
            self.write(W_NEXT_LOCK, first + u64::from(n));
            u32::try_from(first).expect("lock ids are counted in u32s")
        })
    }

    pub fn barrier_count(&self, what: &'static str, n: i64) -> RunError {
        RunError::BarrierCount {
            what,
            n,
            nodes: self.nodes,
            threads: self.threads,
            procs: self.procs,
        }
    }

    fn shape_error(&self, asked: u64) -> RunError {
        RunError::Shape {
            asked,
            nodes: self.nodes,
            threads: self.threads,
            procs: self.procs,
        }
    }

    fn not_all_created(&self, what: &'static str, created: u32) -> RunError {
        RunError::NotAllCreated {
            what,
            created,
            wanted: self.procs - 1,
            nodes: self.nodes,
            threads: self.threads,
            procs: self.procs,
        }
    }

    fn main_only(&self, what: &'static str) -> Result<(), RunError> {
        if self.me != 0 {
            return Err(RunError::NotMain {
                what,
                node: self.me,
            });
        }
        Ok(())
    }
}
