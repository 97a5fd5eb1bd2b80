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

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use cashmere::{Config, Csm, CsmError, Levels, TimeBreakdown};
use mc_api::MemoryChannel;

use crate::connect::{self, ConnectError};
use crate::globals::{self, Globals, GLOBALS_AT};
use crate::settings::{Settings, SettingsError};

/// The heap when neither `MAIN_INITENV` nor `CSM_HEAP_MIB` gives one.
pub const DEFAULT_HEAP: usize = 64 << 20;
/// A process thread's stack (SPLASH processes keep big arrays on theirs).
const STACK: usize = 16 << 20;
/// Cashmere flag 0: node 0 has created the processes.
const START_FLAG: u32 = 0;
/// Cashmere lock 0 guards the runtime's counters; program locks use the rest.
pub const RUNTIME_LOCK: u32 = 0;
const MAGIC: u64 = 0x4353_4d43_0001; // "CSMC", layout 1

// Control block words (u64), then the functions, then the chunk map.
const W_MAGIC: usize = 0;
const W_NEXT_ALLOC: usize = 1;
const W_NEXT_LOCK: usize = 2;
const W_BIAS: usize = 3;
const W_LAYOUT: usize = 4;
const W_GLOBALS: usize = 5;
const W_PROCS: usize = 6;
const W_FUNCS: usize = 8;

/// Why the run cannot go on; printed once, then the node stops (and tells
/// the others).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    // Printed in the message, so not also returned as the source.
    #[error("cannot open the Memory Channel: {0}")]
    Connect(ConnectError),
    #[error(transparent)]
    Csm(#[from] CsmError),
    #[error(
        "{what} before MAIN_INITENV in a program whose main file has no MAIN_ENV: the shared \
         heap and the cluster start at MAIN_INITENV (or at the first macro after MAIN_ENV's \
         set-up)"
    )]
    NotStarted { what: &'static str },
    #[error(
        "this program was not built with mc-cc, so the globals main sets before CREATE \
         cannot reach the other nodes: build it with scripts/mc-cc"
    )]
    NotBuilt,
    #[error(
        "the shared heap ({heap_mib} MiB) is every node's home region, so {nodes} nodes need \
         {nodes} x {heap_mib} MiB of Memory Channel space: give mc-host run a larger \
         --address-space (at most 1G), or a smaller heap with CSM_HEAP_MIB ({why})"
    )]
    NoSpace {
        heap_mib: usize,
        nodes: u32,
        why: mc_api::McError,
    },
    #[error(
        "a heap of {user} bytes for G_MALLOC would start at {base:#x}, below the end of the \
         executable ({floor:#x}): the heap lies below the program's globals at {globals:#x}; \
         set a smaller CSM_HEAP_MIB"
    )]
    HeapBelow {
        user: usize,
        base: usize,
        floor: usize,
        globals: usize,
    },
    #[error(
        "MC_NODES says {hint} nodes but the cluster has {nodes}: the heap's layout is sized \
         from it (mc-host run and the QEMU image set it)"
    )]
    NodesHint { hint: u32, nodes: u32 },
    #[error(
        "the shared heap would be {bytes} bytes ({user} for G_MALLOC, {globals} for the \
         program's globals): at most {max}; give a smaller MAIN_INITENV size or CSM_HEAP_MIB"
    )]
    HeapTooLarge {
        bytes: usize,
        user: usize,
        globals: usize,
        max: usize,
    },
    #[error(
        "G_MALLOC({wanted}): the shared heap is full ({used} of {size} bytes used); set \
         CSM_HEAP_MIB (without it the heap is MAIN_INITENV's size or 64 MiB, at most half \
         the Memory Channel address space over the nodes)"
    )]
    HeapFull {
        wanted: usize,
        used: usize,
        size: usize,
    },
    #[error(
        "the program asks for {asked} processes but the cluster runs {nodes} nodes x {threads} \
         threads = {procs}: give the program -p {procs}, or run it with --nodes/--threads \
         that multiply to {asked}"
    )]
    Shape {
        asked: u64,
        nodes: u32,
        threads: u32,
        procs: u32,
    },
    #[error(
        "{what} before every process was created ({created} of {wanted} CREATEs): the cluster \
         runs {nodes} nodes x {threads} threads = {procs} processes, main included"
    )]
    NotAllCreated {
        what: &'static str,
        created: u32,
        wanted: u32,
        nodes: u32,
        threads: u32,
        procs: u32,
    },
    #[error(
        "CREATE after the processes ended or started: one round of CREATEs per run is supported"
    )]
    SecondRound,
    #[error("{what} on node {node}: only main (process 0, on node 0) may do that")]
    NotMain { what: &'static str, node: u32 },
    #[error(
        "node 0's start record is not this program's (magic {got:#x}): every node must run \
         the same program"
    )]
    ForeignStart { got: u64 },
    #[error(
        "node 0 runs {theirs} processes and this node expected {ours}: every node must get \
         the same MC_THREADS"
    )]
    StartProcs { theirs: u64, ours: u32 },
    #[error(
        "the program's globals are {theirs} bytes on node 0 and {ours} here: every node must \
         run the same executable"
    )]
    GlobalsSize { theirs: u64, ours: usize },
    #[error(
        "the program's code is at {theirs:#x} on node 0 and {ours:#x} here (a PIE executable \
         with address randomisation on): pointers in globals would be wrong; build it with \
         mc-cc, which links it without PIE"
    )]
    CodeMoved { theirs: u64, ours: usize },
    #[error(
        "{what} at {addr:#x}: its state is outside the shared heap, so processes on other \
         nodes cannot see it; declare it in G_MALLOC'd memory"
    )]
    NotShared { what: &'static str, addr: usize },
    #[error(
        "{what} at {addr:#x} was never initialised on this node ({init} not run, or run \
         after CREATE on a global, which only its own node sees)"
    )]
    Uninitialised {
        what: &'static str,
        init: &'static str,
        addr: usize,
    },
    #[error(
        "{what}({n}): Cashmere's barriers take every process, and the cluster runs {nodes} \
         nodes x {threads} threads = {procs}: give the program -p {procs}, or run it with \
         --nodes/--threads that multiply to {n}"
    )]
    BarrierCount {
        what: &'static str,
        n: i64,
        nodes: u32,
        threads: u32,
        procs: u32,
    },
    #[error("UNLOCK of a lock this process does not hold (lock {id})")]
    NotHeld { id: u32 },
    #[error("cannot start a process thread: {0}")]
    Spawn(std::io::Error),
    #[error("a process thread panicked")]
    Panicked,
    #[error("cannot record the run: {0}")]
    Record(String),
}

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
    pub csm: Csm,
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
/// right there, with the default heap (SPLASH-3's Barnes `G_MALLOC`s its
/// bodies before it calls `MAIN_INITENV`: harmless with `malloc`); without
/// the constructor's registration it is the error naming what came early.
pub fn get(what: &'static str) -> Result<&'static Runtime, RunError> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    match REGISTERED.get() {
        Some(&(globals, built)) => main_initenv(0, globals, built),
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
    eprintln!("csm: node {node}: {e}");
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

fn page_round(n: usize, page: usize) -> usize {
    n.div_ceil(page) * page
}

impl Runtime {
    fn word(&self, i: usize) -> *mut u64 {
        // SAFETY: the control block holds W_FUNCS + procs words.
        unsafe { self.control.add(i) }
    }
    fn read(&self, i: usize) -> u64 {
        // SAFETY: in the control block (shared heap); faults are Cashmere's.
        unsafe { std::ptr::read_volatile(self.word(i)) }
    }
    fn write(&self, i: usize, v: u64) {
        // SAFETY: as `read`.
        unsafe { std::ptr::write_volatile(self.word(i), v) }
    }

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
            let next = self.read(W_NEXT_ALLOC) as usize;
            let at = next.div_ceil(align) * align;
            if at + bytes.max(1) > self.user_end {
                return Err(RunError::HeapFull {
                    wanted: bytes,
                    used: next - self.user_start,
                    size: self.user_end - self.user_start,
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
            first as u32
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

    /// `CREATE(f)`: one more process; the last one starts them all.
    pub fn create(&'static self, f: usize) -> Result<(), RunError> {
        self.main_only("CREATE")?;
        let mut c = self.creation.lock().unwrap_or_else(|p| p.into_inner());
        if c.ended {
            return Err(RunError::SecondRound);
        }
        // One CREATE more than the cluster has processes for (after the
        // last one the processes have started): the program's -p is larger.
        if c.created + 1 >= self.procs {
            return Err(self.shape_error(u64::from(c.created) + 2));
        }
        c.created += 1;
        let slot = c.created as usize;
        c.funcs[slot] = f;
        if c.created + 1 == self.procs {
            self.start(&mut c)?;
        }
        Ok(())
    }

    /// `CREATE(f, n)`: `n - 1` processes running `f` (the caller runs it too).
    pub fn create_n(&'static self, f: usize, n: i64) -> Result<(), RunError> {
        self.main_only("CREATE")?;
        if n != i64::from(self.procs) {
            return Err(self.shape_error(n.max(0) as u64));
        }
        let mut c = self.creation.lock().unwrap_or_else(|p| p.into_inner());
        if c.started || c.created > 0 {
            return Err(RunError::SecondRound);
        }
        for slot in 1..self.procs as usize {
            c.funcs[slot] = f;
        }
        c.created = self.procs - 1;
        self.start(&mut c)
    }

    /// Make sure the processes run before an operation that needs them all
    /// (a barrier, the end): with one process, there is nothing to create.
    pub fn need_all(&'static self, what: &'static str) -> Result<(), RunError> {
        if self.me != 0 {
            return Ok(());
        }
        let mut c = self.creation.lock().unwrap_or_else(|p| p.into_inner());
        if c.started {
            return Ok(());
        }
        if c.created + 1 == self.procs {
            return self.start(&mut c);
        }
        Err(self.not_all_created(what, c.created))
    }

    /// Node 0: publish the processes and the globals, set the start flag,
    /// start this node's other processes.
    fn start(&'static self, c: &mut Creation) -> Result<(), RunError> {
        let bias = globals::load_bias();
        self.write(W_BIAS, bias as u64);
        self.write(W_LAYOUT, layout_fingerprint() as u64);
        self.write(W_GLOBALS, self.globals.len as u64);
        self.write(W_PROCS, u64::from(self.procs));
        for (slot, &f) in c.funcs.iter().enumerate().skip(1) {
            self.write(W_FUNCS + slot, f.wrapping_sub(bias) as u64);
        }
        self.write(W_MAGIC, MAGIC);
        c.started = true;
        // Main is process 0: its timed part starts here too.
        self.csm.mark_start();
        if self.nodes > 1 {
            self.csm.flag_set(START_FLAG, 1)?;
        }
        for t in 1..self.threads {
            let f = c.funcs[t as usize];
            c.local.push(self.spawn(t, f)?);
        }
        Ok(())
    }

    /// A thread running process `proc`: `f`, then the end barrier.
    fn spawn(&'static self, proc: u32, f: usize) -> Result<JoinHandle<()>, RunError> {
        std::thread::Builder::new()
            .name(format!("csm-p{proc}"))
            .stack_size(STACK)
            .spawn(move || {
                PROC.with(|p| p.set(Some(proc)));
                self.csm.mark_start();
                // SAFETY: `f` is the address of a `void f(void)` function of
                // this executable (CREATE's argument, relocated by the bias).
                let func: extern "C" fn() = unsafe { std::mem::transmute(f) };
                func();
                ok(self.end_of_process(proc));
            })
            .map_err(RunError::Spawn)
    }

    /// A process is done: its time, then the barrier every process ends with
    /// (after it, every node has every process's writes).
    fn end_of_process(&self, proc: u32) -> Result<(), RunError> {
        self.csm.mark_end();
        if self.settings.stats {
            let b = self.csm.thread_breakdown(&format!("p{proc}"));
            self.breakdowns
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(b);
        }
        self.csm.barrier()?;
        Ok(())
    }

    /// `WAIT_FOR_END(n)` in main: main ends as process 0, every process
    /// reaches the end barrier, node 0's threads are joined.
    pub fn wait_for_end(&'static self, n: i64) -> Result<(), RunError> {
        self.main_only("WAIT_FOR_END")?;
        let p = i64::from(self.procs);
        // SPLASH-2 passes P - 1 (the processes it created), SPLASH-3's
        // CREATE(f, P) programs often P.
        if n != p && n != p - 1 {
            return Err(self.shape_error((n + 1).max(0) as u64));
        }
        self.end_main()
    }

    fn end_main(&'static self) -> Result<(), RunError> {
        self.need_all("WAIT_FOR_END")?;
        let local = {
            let mut c = self.creation.lock().unwrap_or_else(|p| p.into_inner());
            if c.ended {
                return Ok(());
            }
            c.ended = true;
            std::mem::take(&mut c.local)
        };
        self.end_of_process(0)?;
        for h in local {
            h.join().map_err(|_| RunError::Panicked)?;
        }
        Ok(())
    }

    /// `MAIN_END`, or `exit(0)` in main: end the run on every node.
    pub fn main_end(&'static self) -> Result<(), RunError> {
        if self.finished.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.end_main()?;
        self.finish()
    }

    /// Cashmere's final barrier (the other nodes wait in theirs, answering
    /// node 0's requests until it gets here), then the report.
    fn finish(&self) -> Result<(), RunError> {
        let stats = self.csm.finish()?;
        DONE.store(true, Ordering::SeqCst);
        crate::report::report(self, &stats)
    }

    /// Nodes other than 0: wait for the start, take the globals, run this
    /// node's processes, end with node 0. Never returns.
    fn serve(&'static self) -> ! {
        ok(self.csm.flag_wait(START_FLAG).map_err(RunError::from));
        let magic = self.read(W_MAGIC);
        if magic != MAGIC {
            fatal(RunError::ForeignStart { got: magic });
        }
        let procs = self.read(W_PROCS);
        if procs != u64::from(self.procs) {
            fatal(RunError::StartProcs {
                theirs: procs,
                ours: self.procs,
            });
        }
        let len = self.read(W_GLOBALS);
        if len != self.globals.len as u64 {
            fatal(RunError::GlobalsSize {
                theirs: len,
                ours: self.globals.len,
            });
        }
        let bias = globals::load_bias();
        let theirs = self.read(W_BIAS);
        if theirs != bias as u64 && !self.globals.is_empty() {
            fatal(RunError::CodeMoved { theirs, ours: bias });
        }
        if self.read(W_LAYOUT) != layout_fingerprint() as u64 {
            log::warn!(
                "node {}: the address space layout differs from node 0's (randomisation could \
                 not be turned off): globals holding pointers to libc objects, argv or \
                 malloc'd memory are node 0's",
                self.me
            );
        }
        let first = self.me * self.threads;
        let handles: Vec<_> = (0..self.threads)
            .map(|t| {
                let proc = first + t;
                let f = (self.read(W_FUNCS + proc as usize) as usize).wrapping_add(bias);
                ok(self.spawn(proc, f))
            })
            .collect();
        for h in handles {
            if h.join().is_err() {
                fatal(RunError::Panicked);
            }
        }
        self.finished.store(true, Ordering::SeqCst);
        ok(self.finish());
        // SAFETY: flush C stdio before leaving without returning to main.
        unsafe { libc::fflush(std::ptr::null_mut()) };
        std::process::exit(0)
    }
}

/// Where the loader put this thread's errno: the same on every node only
/// when their address space layouts agree.
fn layout_fingerprint() -> usize {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__errno_location() as usize }
}

/// The heap the program asked for: `CSM_HEAP_MIB`, else `MAIN_INITENV`'s
/// size, else [`DEFAULT_HEAP`].
fn user_heap(settings: &Settings, asked: u64) -> usize {
    match settings.heap_mib {
        Some(m) => m << 20,
        None if asked > 0 => usize::try_from(asked).unwrap_or(usize::MAX),
        None => DEFAULT_HEAP,
    }
}

/// `MAIN_INITENV`: start Cashmere on this node. Returns on node 0; on every
/// other node it runs that node's processes and exits.
pub fn main_initenv(
    asked: u64,
    globals: Globals,
    built: bool,
) -> Result<&'static Runtime, RunError> {
    if let Some(rt) = RUNTIME.get() {
        // Started already, by a macro used before MAIN_INITENV, with the
        // default heap or CSM_HEAP_MIB (a G_MALLOC beyond it says so).
        return Ok(rt);
    }
    let settings = Settings::from_env()?;
    let page = settings.page_size as usize;
    let nodes_hint = settings.nodes_hint;
    let procs_hint = nodes_hint * settings.threads;
    // Globals not where mc-cc's linker script puts them are the process's
    // own, not shared (a program not built by mc-cc).
    let globals = if built && globals.start == GLOBALS_AT {
        globals
    } else {
        Globals { start: 0, len: 0 }
    };
    let globals_len = page_round(globals.len, page);
    let control_len = page_round(8 * (W_FUNCS + procs_hint.max(64) as usize), page);
    // The most the program may get; less if it is only asked for and does
    // not fit the cluster's Memory Channel space (below, once it is open).
    let mut user = page_round(user_heap(&settings, asked), page);
    let heap_len = |user: usize| control_len + user + globals_len;
    if heap_len(user) > cashmere::MAX_HEAP_BYTES {
        return Err(RunError::HeapTooLarge {
            bytes: heap_len(user),
            user,
            globals: globals.len,
            max: cashmere::MAX_HEAP_BYTES,
        });
    }
    let mut cfg = Config {
        heap_bytes: heap_len(user),
        page_size: settings.page_size,
        threads: settings.threads,
        levels: if settings.one_level {
            Levels::One
        } else {
            Levels::Two
        },
        locks: settings.locks,
        flags: 4,
        exclusive_mode: settings.exclusive_mode,
        home_direct: settings.home_direct,
        variant: settings.variant,
        detection: settings.detection.protocol(),
        ..Config::default()
    };
    let arena = (4 << 20) + 2 * cfg.space(nodes_hint.max(8)).arena_bytes(8192);
    let mc = connect::open(heap_len(user), arena).map_err(RunError::Connect)?;
    let nodes = mc.nodes();
    if nodes > nodes_hint {
        return Err(RunError::NodesHint {
            hint: nodes_hint,
            nodes,
        });
    }
    if !built && nodes > 1 {
        return Err(RunError::NotBuilt);
    }
    if settings.heap_mib.is_none() {
        // Every node's home region is the heap: a size SPLASH's MAIN_INITENV
        // names (sized for its allocator, often far more than it uses) or
        // the default shrinks to what N of them leave of the address space.
        let fit = (mc.registers().address_space as usize / 2 / nodes.max(1) as usize)
            .saturating_sub(control_len + globals_len);
        user = user.min(page_round(fit.max(1 << 20), page));
    }
    cfg.heap_bytes = heap_len(user);
    // The heap ends where the globals end.
    let base = GLOBALS_AT - control_len - user;
    let floor = globals::image_end();
    if base < floor {
        return Err(RunError::HeapBelow {
            user,
            base,
            floor,
            globals: GLOBALS_AT,
        });
    }
    cfg.heap_base = Some(base);
    // Node 0's globals as main left them; the pages go to Cashmere.
    let saved = globals.copy();
    if globals_len > 0 {
        // SAFETY: the range is the program's own data segment (mc-cc's
        // linker script puts nothing else there, and pads it to 64 KiB);
        // until the heap is mapped over it, only this thread runs and no
        // code touches the program's globals.
        if unsafe { libc::munmap(GLOBALS_AT as *mut libc::c_void, globals_len) } != 0 {
            return Err(RunError::Csm(CsmError::Io(std::io::Error::last_os_error())));
        }
    }
    let csm = Csm::start(&mc, &cfg).map_err(|e| match e {
        CsmError::Mc(source @ mc_api::McError::NoSpace(_)) => RunError::NoSpace {
            heap_mib: heap_len(user) >> 20,
            nodes,
            why: source,
        },
        e => e.into(),
    })?;
    let me = mc.node_id().0 as u32;
    if me == 0 && !saved.is_empty() {
        // SAFETY: the globals are heap pages now; node 0 writes them first
        // (their home) and publishes them with the start flag.
        unsafe {
            std::ptr::copy_nonoverlapping(saved.as_ptr(), GLOBALS_AT as *mut u8, saved.len())
        };
    }
    let control = csm.alloc::<u64>(control_len / 8, true)?;
    // SAFETY: a pointer to the start of the array; the slice is not read.
    let control = unsafe { control.as_mut_slice(0..0).as_mut_ptr() };
    let procs = nodes * settings.threads;
    let program = std::env::args()
        .next()
        .map(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(a)
        })
        .unwrap_or_else(|| "program".into());
    let rt = Runtime {
        me,
        nodes,
        threads: settings.threads,
        procs,
        heap_len: heap_len(user),
        globals,
        control,
        base,
        user_start: control_len,
        user_end: control_len + user,
        creation: Mutex::new(Creation {
            funcs: vec![0; procs as usize],
            ..Default::default()
        }),
        finished: AtomicBool::new(false),
        breakdowns: Mutex::new(Vec::new()),
        roi: Mutex::new((None, None)),
        program,
        started_at: Instant::now(),
        settings,
        mc,
        csm,
    };
    if me == 0 {
        rt.write(W_NEXT_ALLOC, control_len as u64);
        rt.write(W_NEXT_LOCK, 0);
    }
    let rt = RUNTIME.get_or_init(|| rt);
    register_exit_handler();
    // SAFETY: line-buffered stdout, so each node's lines reach `mc-host run`
    // as they are printed (it prefixes them by node), not at exit.
    unsafe { libc::setvbuf(stdout(), std::ptr::null_mut(), libc::_IOLBF, 0) };
    if me != 0 {
        rt.serve();
    }
    PROC.with(|p| p.set(Some(0)));
    Ok(rt)
}

fn stdout() -> *mut libc::FILE {
    extern "C" {
        static mut stdout: *mut libc::FILE;
    }
    // SAFETY: glibc's stdout, initialised before main.
    unsafe { stdout }
}

extern "C" fn at_exit(status: libc::c_int, _arg: *mut libc::c_void) {
    if DONE.load(Ordering::SeqCst) {
        return;
    }
    let Some(rt) = RUNTIME.get() else { return };
    if status == 0 && rt.me == 0 && PROC.with(|p| p.get()) == Some(0) {
        // main returned or called exit(0) without MAIN_END.
        ok(rt.main_end());
        return;
    }
    eprintln!(
        "csm: node {}: the program exited (status {status}) before the run ended: the other \
         nodes are told to stop",
        rt.me
    );
    DONE.store(true, Ordering::SeqCst);
    rt.csm.abort();
}

/// In a child of `fork`: it has no adapter and no part in the cluster, so
/// it must not go on as if it were a process of the program.
extern "C" fn forked_child() {
    const MSG: &[u8] = b"csm: fork is not supported: the program's processes are threads of the \
nodes' guest processes, and a forked child has no part in the cluster (docs/c-programs.md)\n";
    // SAFETY: write(2) and _exit(2) are async-signal-safe, as a child of a
    // multithreaded fork needs.
    unsafe {
        libc::write(2, MSG.as_ptr() as *const libc::c_void, MSG.len());
        libc::_exit(1);
    }
}

fn register_exit_handler() {
    // SAFETY: registers a plain function for fork's child.
    unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    extern "C" {
        fn on_exit(
            f: extern "C" fn(libc::c_int, *mut libc::c_void),
            arg: *mut libc::c_void,
        ) -> libc::c_int;
    }
    // SAFETY: registers a plain function with no argument.
    unsafe { on_exit(at_exit, std::ptr::null_mut()) };
}
