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
    #[inline]
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
    #[inline]
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
