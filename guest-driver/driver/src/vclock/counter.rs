//! The work counter: a per-thread count of the edges (Rust, LLVM) and
//! basic blocks (C, GCC) the thread's instrumented code passed through
//! (issue 39; docs/virtual-time.md s.9).
//!
//! An instrumented build (`scripts/build-counted.sh` for `mc-guest`,
//! `scripts/mc-cc --counted` for a C program's own code) has the compiler call
//! a SanitizerCoverage callback on every edge or block:
//! - rustc (LLVM) with `-C passes=sancov-module -C
//!   llvm-args=-sanitizer-coverage-level=3 -C
//!   llvm-args=-sanitizer-coverage-trace-pc-guard` calls
//!   [`__sanitizer_cov_trace_pc_guard`] on every edge, and each module's
//!   constructor calls [`__sanitizer_cov_trace_pc_guard_init`] once before
//!   `main`;
//! - gcc with `-fsanitize-coverage=trace-pc` calls
//!   [`__sanitizer_cov_trace_pc`] on every basic block.
//!
//! Those three are defined here, once, and exported with their C names: an
//! instrumented Rust crate linked with `mc-driver` (`mc-guest`) and a C
//! program linked with `libcsm.a` (which holds `mc-driver`) both reach them.
//! Each adds one to the calling thread's count, a thread-local cell (no
//! lock, no allocation: async-signal-safe, so the SIGSEGV handler's own
//! edges count too). The count is deterministic: the same code on the same
//! data passes the same edges, whatever the host, its load or its
//! scheduler; what it is not is a count of instructions (an edge is a few
//! instructions; the rate model turns counts into time, `meter.rs`).
//!
//! Not counted, because not instrumented: the precompiled Rust standard
//! library and libc (`memcpy`, `memset`), and the kernel (traps, system
//! calls). What of that the protocol does is charged by a stated model
//! ([`super::unseen`]).
//!
//! The callbacks must not be instrumented themselves (they would call
//! themselves): LLVM's pass leaves every function whose name begins with
//! `__sanitizer_` alone, and the thread-local's access is inlined into them
//! in a release build. `scripts/build-counted.sh` builds release only.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

thread_local! {
    /// This thread's count of instrumented edges and blocks.
    static EDGES: Cell<u64> = const { Cell::new(0) };
    /// Edges passed inside [`Uncounted`] regions, left out of [`edges`].
    static SKIPPED: Cell<u64> = const { Cell::new(0) };
    /// The raw count when the outermost open [`Uncounted`] region began,
    /// and how many are open.
    static ENTRY: Cell<u64> = const { Cell::new(0) };
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Some instrumented Rust module registered its guards (its constructor
/// ran): the process was built with counters.
static GUARDS_REGISTERED: AtomicBool = AtomicBool::new(false);

/// SanitizerCoverage's per-module constructor callback (rustc's
/// `trace-pc-guard`): called once per instrumented module before `main`
/// with the module's guard array. The guards are not used (every edge
/// counts the same); the call says the build is instrumented.
#[no_mangle]
pub extern "C" fn __sanitizer_cov_trace_pc_guard_init(start: *mut u32, stop: *mut u32) {
    if start != stop {
        GUARDS_REGISTERED.store(true, Ordering::Relaxed);
    }
}

/// SanitizerCoverage's edge callback (rustc's `trace-pc-guard`): one edge
/// passed on this thread. The guard is not read.
#[no_mangle]
pub extern "C" fn __sanitizer_cov_trace_pc_guard(_guard: *mut u32) {
    bump();
}

/// GCC's block callback (`-fsanitize-coverage=trace-pc`, C programs built
/// by `scripts/mc-cc --counted`): one basic block entered on this thread.
#[no_mangle]
pub extern "C" fn __sanitizer_cov_trace_pc() {
    bump();
}

#[inline(always)]
fn bump() {
    // A thread being torn down (its thread-locals gone) counts nothing.
    let _ = EDGES.try_with(|c| c.set(c.get().wrapping_add(1)));
}

#[inline(always)]
fn raw() -> u64 {
    EDGES.try_with(Cell::get).unwrap_or(0)
}

/// The calling thread's count so far, less the edges of the clock's own
/// machinery ([`Uncounted`]); inside such a region, the count as it was
/// when the region began. It wraps at 2^64 (the callbacks must stay one
/// add): a reading below an earlier one is a wrapped or tampered count,
/// which the clock refuses (`vclock::WorkFault`).
#[inline]
pub fn edges() -> u64 {
    let now = if DEPTH.try_with(Cell::get).unwrap_or(0) > 0 {
        ENTRY.try_with(Cell::get).unwrap_or(0)
    } else {
        raw()
    };
    now.wrapping_sub(SKIPPED.try_with(Cell::get).unwrap_or(0))
}

/// A region of code whose edges are not the thread's work: the clock's own
/// machinery (a sync, the quantum's gate, a wait's bookkeeping) and what
/// runs on the host's timing (whether a throttled sync is due). Counting
/// them would make the count follow the host: a sync that is due after 50
/// us of host time runs a varying number of times. Open while the guard
/// lives; regions nest (the outermost one counts).
#[must_use = "the region ends when the guard drops"]
pub struct Uncounted(());

impl Uncounted {
    /// Open a region on the calling thread.
    #[inline(always)]
    pub fn enter() -> Uncounted {
        let _ = DEPTH.try_with(|d| {
            if d.get() == 0 {
                let _ = ENTRY.try_with(|e| e.set(raw()));
            }
            d.set(d.get() + 1);
        });
        Uncounted(())
    }
}

impl Drop for Uncounted {
    #[inline(always)]
    fn drop(&mut self) {
        let _ = DEPTH.try_with(|d| {
            let depth = d.get().saturating_sub(1);
            d.set(depth);
            if depth == 0 {
                let spent = raw().wrapping_sub(ENTRY.try_with(Cell::get).unwrap_or(0));
                let _ = SKIPPED.try_with(|s| s.set(s.get().wrapping_add(spent)));
            }
        });
    }
}

/// Counting again inside an [`Uncounted`] region, until the guard drops:
/// for real work that the host's timing makes happen or not (a request
/// that a poll finds, a page fault that another thread's fetch did or did
/// not make unnecessary). The region around it leaves out the edges that
/// lead to the work and back, which differ with whether it happened; the
/// work itself counts (as protocol work: `cashmere::times::enter` resumes
/// counting for every protocol activity, after switching the clock's
/// class, and pauses it before switching back). Outside a region it does
/// nothing. Regions opened inside it must be closed before it drops.
#[must_use = "counting pauses again when the guard drops"]
pub struct Counted {
    /// The depth of the regions it interrupted (0: none).
    depth: u32,
}

impl Counted {
    /// Resume counting on the calling thread.
    #[inline(always)]
    pub fn resume() -> Counted {
        let depth = DEPTH.try_with(|d| d.replace(0)).unwrap_or(0);
        if depth > 0 {
            let spent = raw().wrapping_sub(ENTRY.try_with(Cell::get).unwrap_or(0));
            let _ = SKIPPED.try_with(|s| s.set(s.get().wrapping_add(spent)));
        }
        Counted { depth }
    }
}

impl Drop for Counted {
    #[inline(always)]
    fn drop(&mut self) {
        if self.depth > 0 {
            let _ = ENTRY.try_with(|e| e.set(raw()));
            let _ = DEPTH.try_with(|d| d.set(self.depth));
        }
    }
}

/// A signal handler taking `SA_SIGINFO`'s three arguments.
pub type SigAction = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// The handler [`__sanitizer_mc_uncounted_signal`] runs.
static UNCOUNTED_SIGNAL: OnceLock<SigAction> = OnceLock::new();

/// `handler` wrapped in an [`Uncounted`] region that opens before any of
/// its edges: the function to install with `sigaction`. For a handler
/// that runs as often as the host's timing has it (Cashmere's SIGSEGV
/// handler: whether a thread faults on a page depends on whether another
/// thread of its node fetched it first); what real work it does counts
/// through [`Counted`]. An ordinary handler's own entry edges would count
/// before it could open a region. One handler per process: a second call
/// keeps the first handler (and says so by returning `None`).
pub fn uncounted_signal_handler(handler: SigAction) -> Option<SigAction> {
    UNCOUNTED_SIGNAL.set(handler).ok()?;
    Some(__sanitizer_mc_uncounted_signal)
}

/// The trampoline of [`uncounted_signal_handler`]. Its name begins with
/// `__sanitizer_` so that SanitizerCoverage leaves it uninstrumented, as it
/// leaves its own callbacks (the region's set-up is inlined into it).
#[no_mangle]
pub extern "C" fn __sanitizer_mc_uncounted_signal(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    let region = Uncounted::enter();
    if let Some(handler) = UNCOUNTED_SIGNAL.get() {
        handler(sig, info, ctx);
    }
    drop(region);
}

/// Whether this process carries counters: an instrumented Rust module
/// registered its guards, or the calling thread has counted (a C program
/// whose own code is instrumented, linked with a plain `libcsm`).
pub fn instrumented() -> bool {
    GUARDS_REGISTERED.load(Ordering::Relaxed) || edges() > 0
}

/// Add `n` to the calling thread's count, as `n` callbacks would: for
/// tests of the clock that need counted work in a build without counters
/// (the test binaries of the workspace are not instrumented).
#[doc(hidden)]
pub fn add_for_test(n: u64) {
    let _ = EDGES.try_with(|c| c.set(c.get().wrapping_add(n)));
}
