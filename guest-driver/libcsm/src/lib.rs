//! libcsm: Cashmere for C programs written with the SPLASH-2/SPLASH-3 (ANL,
//! PARMACS) m4 macros (seed 000's applications were such programs; its
//! Cashmere ran them by supplying those macros). `csm.h` declares these
//! functions; `m4/c.m4.cashmere` maps every macro onto them; `mc-cc` builds
//! a program in one step. See docs/c-programs.md.
//!
//! Files: `settings` (the run's options, from the environment), `connect`
//! (opening the adapter), `runtime` (start-up across nodes, CREATE, the
//! end), `globals` (where the program's globals are: the top of the heap), `early`
//! (one address space layout on every node), `sync` (locks, barriers,
//! pauses, condition variables, GETSUB), `report` (statistics, the JSON
//! record). This file is the C face: thin wrappers that turn an error
//! into a message and the end of the node.

// `c_long` and `c_ulong` are `i64`/`u64` on this target only: the casts
// say what the C side passes.
#![allow(clippy::unnecessary_cast)]

mod connect;
mod early;
pub mod globals;
mod report;
mod runtime;
mod settings;
mod sync;

use std::ffi::{c_char, c_int, c_long, c_ulong, c_void};
use std::time::Instant;

use runtime::ok;
use sync::{Guarded, Lock};

pub use globals::GLOBALS_AT;

/// Microseconds for `CLOCK`: the host's monotonic clock. The one place a
/// virtual clock would plug in (CLOCK calls nothing else).
pub fn clock_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    // The monotonic clock is never negative.
    ts.tv_sec.unsigned_abs() * 1_000_000 + ts.tv_nsec.unsigned_abs() / 1000
}

/// Re-execute without address randomisation (the macro file's constructor).
///
/// # Safety
/// The arguments glibc passes to a constructor.
#[no_mangle]
pub unsafe extern "C" fn csm_early_init(
    _argc: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) {
    // SAFETY: forwarded from the loader.
    unsafe { early::early(argv, envp) }
}

/// The program's globals (the bounds mc-cc's linker script defines) and
/// whether mc-cc built it: registered by `MAIN_ENV`'s constructor, so that
/// a macro used before `MAIN_INITENV` can start the cluster.
#[no_mangle]
pub extern "C" fn csm_register_globals(start: *const u8, end: *const u8, built_by_mc_cc: c_int) {
    runtime::register(globals::Globals::new(start, end), built_by_mc_cc != 0);
}

/// MAIN_INITENV: start the cluster; only node 0 returns. The size SPLASH's
/// MAIN_INITENV names is not the heap's: the heap is the largest the run's
/// variant and cluster allow (or `CSM_HEAP_MIB`), docs/c-programs.md.
#[no_mangle]
pub extern "C" fn csm_main_initenv(
    _heap_bytes: c_ulong,
    start: *const u8,
    end: *const u8,
    built_by_mc_cc: c_int,
) {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .try_init();
    let g = globals::Globals::new(start, end);
    ok(runtime::main_initenv(g, built_by_mc_cc != 0));
}

/// G_MALLOC: shared memory, at the same address on every node.
#[no_mangle]
pub extern "C" fn csm_g_malloc(bytes: usize) -> *mut c_void {
    ok(runtime::get("G_MALLOC").and_then(|rt| rt.g_malloc(bytes))).cast::<c_void>()
}

/// G_FREE: the shared heap never frees (as Cashmere's allocator).
#[no_mangle]
pub extern "C" fn csm_g_free(_p: *mut c_void) {}

/// CREATE(f): one process more.
#[no_mangle]
pub extern "C" fn csm_create(f: Option<extern "C" fn()>) {
    let f = f.map_or(0, |f| f as usize);
    ok(runtime::get("CREATE").and_then(|rt| rt.create(f)));
}

/// CREATE(f, n): n - 1 processes (the caller runs `f` as process 0).
#[no_mangle]
pub extern "C" fn csm_create_n(f: Option<extern "C" fn()>, n: c_long) {
    let f = f.map_or(0, |f| f as usize);
    ok(runtime::get("CREATE").and_then(|rt| rt.create_n(f, n as i64)));
}

/// WAIT_FOR_END(n).
#[no_mangle]
pub extern "C" fn csm_wait_for_end(n: c_long) {
    ok(runtime::get("WAIT_FOR_END").and_then(|rt| rt.wait_for_end(n as i64)));
}

/// MAIN_END: end the run on every node (the macro then exits).
#[no_mangle]
pub extern "C" fn csm_main_end() {
    ok(runtime::get("MAIN_END").and_then(|rt| rt.main_end()));
}

/// CLOCK: microseconds, of the calling thread's virtual time in a
/// predicted-time run (`mc-host run --clock virtual`), otherwise of the
/// host's monotonic clock.
#[no_mangle]
pub extern "C" fn csm_clock() -> c_ulong {
    if mc_api::vclock::enabled() {
        // A tick, not a sync: the program may hold a lock here.
        (mc_api::vclock::tick() / 1000) as c_ulong
    } else {
        clock_us() as c_ulong
    }
}

/// LOCKINIT.
///
/// # Safety
/// `l` points at a writable `csm_lock_t`.
#[no_mangle]
pub unsafe extern "C" fn csm_lock_init(l: *mut Lock) {
    // SAFETY: per the contract.
    ok(unsafe { sync::lock_init(l, 1) });
}

/// ALOCKINIT: `n` locks.
///
/// # Safety
/// `l` points at `n` writable `csm_lock_t`.
#[no_mangle]
pub unsafe extern "C" fn csm_alock_init(l: *mut Lock, n: c_long) {
    // SAFETY: per the contract.
    ok(unsafe { sync::lock_init(l, usize::try_from(n.max(0)).unwrap_or(usize::MAX)) });
}

/// LOCK.
///
/// # Safety
/// `l` points at a `csm_lock_t`.
#[no_mangle]
pub unsafe extern "C" fn csm_lock(l: *const Lock) {
    // SAFETY: per the contract.
    ok(unsafe { sync::lock(l) });
}

/// UNLOCK.
///
/// # Safety
/// `l` points at a `csm_lock_t`.
#[no_mangle]
pub unsafe extern "C" fn csm_unlock(l: *const Lock) {
    // SAFETY: per the contract.
    ok(unsafe { sync::unlock(l) });
}

/// BARRIER(b, n): every process; `n` must be their number.
#[no_mangle]
pub extern "C" fn csm_barrier(n: c_long) {
    ok(sync::barrier("BARRIER", n as i64));
}

/// BARINIT(b, n): checks `n` (the barrier object itself holds nothing).
#[no_mangle]
pub extern "C" fn csm_barrier_init(n: c_long) {
    ok(runtime::get("BARINIT").and_then(|rt| {
        if n as i64 != i64::from(rt.procs) {
            return Err(rt.barrier_count("BARINIT", n as i64));
        }
        Ok(())
    }));
}

/// PAUSEINIT, CONDVARINIT, GSINIT.
///
/// # Safety
/// `g` points at a writable `csm_pause_t`/`csm_condvar_t`/`csm_gs_t`.
#[no_mangle]
pub unsafe extern "C" fn csm_guarded_init(g: *mut Guarded, what: c_int) {
    let what = match what {
        0 => "PAUSEINIT",
        1 => "CONDVARINIT",
        _ => "GSINIT",
    };
    // SAFETY: per the contract.
    ok(unsafe { sync::guarded_init(g, what, 0) });
}

/// SETPAUSE.
///
/// # Safety
/// `p` points at a `csm_pause_t`.
#[no_mangle]
pub unsafe extern "C" fn csm_pause_set(p: *mut Guarded) {
    // SAFETY: per the contract.
    ok(unsafe { sync::with_word(p, "SETPAUSE", |w| *w = 1) });
}

/// CLEARPAUSE.
///
/// # Safety
/// `p` points at a `csm_pause_t`.
#[no_mangle]
pub unsafe extern "C" fn csm_pause_clear(p: *mut Guarded) {
    // SAFETY: per the contract.
    ok(unsafe { sync::with_word(p, "CLEARPAUSE", |w| *w = 0) });
}

/// WAITPAUSE: wait until the pause is set (it stays set).
///
/// # Safety
/// `p` points at a `csm_pause_t`.
#[no_mangle]
pub unsafe extern "C" fn csm_pause_wait(p: *mut Guarded) {
    // SAFETY: per the contract.
    ok(unsafe { sync::wait_until(p, "WAITPAUSE", |w| *w != 0) });
}

/// PAUSE: wait until the pause is set, and clear it (one waiter takes it).
///
/// # Safety
/// `p` points at a `csm_pause_t`.
#[no_mangle]
pub unsafe extern "C" fn csm_pause_take(p: *mut Guarded) {
    // SAFETY: per the contract.
    ok(unsafe {
        sync::wait_until(p, "PAUSE", |w| {
            let set = *w != 0;
            *w = 0;
            set
        })
    });
}

/// CONDVARWAIT(cv, l).
///
/// # Safety
/// `cv` points at a `csm_condvar_t`, `l` at a lock the caller holds.
#[no_mangle]
pub unsafe extern "C" fn csm_condvar_wait(cv: *mut Guarded, l: *const Lock) {
    // SAFETY: per the contract.
    ok(unsafe { sync::condvar_wait(cv, l) });
}

/// CONDVARSIGNAL and CONDVARBCAST (both wake every waiter; pthreads allows
/// a signal to wake more than one).
///
/// # Safety
/// `cv` points at a `csm_condvar_t`.
#[no_mangle]
pub unsafe extern "C" fn csm_condvar_signal(cv: *mut Guarded) {
    // SAFETY: per the contract.
    ok(unsafe { sync::with_word(cv, "CONDVARSIGNAL", |w| *w = w.wrapping_add(1)) });
}

/// GETSUB(gs, sub, limit, nprocs): the next subscript up to `limit`, or -1
/// (and the counter back to 0) when they are all taken.
///
/// # Safety
/// `gs` points at a `csm_gs_t`.
#[no_mangle]
pub unsafe extern "C" fn csm_getsub(gs: *mut Guarded, limit: c_long) -> c_long {
    // SAFETY: per the contract.
    ok(unsafe {
        sync::with_word(gs, "GETSUB", |w| {
            if *w <= limit as i64 {
                let sub = *w;
                *w += 1;
                sub as c_long
            } else {
                *w = 0;
                -1
            }
        })
    })
}

/// RELEASE_FENCE, ACQUIRE_FENCE, FULL_FENCE: a fence among this node's
/// threads. Other nodes see writes at Cashmere's synchronisation (LOCK,
/// UNLOCK, BARRIER, pauses), not at fences.
#[no_mangle]
pub extern "C" fn csm_fence() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// The region-of-interest markers (SPLASH-3's ROI_BEGIN/ROI_END): the
/// record's compute time is the node's first begin to its last end.
#[no_mangle]
pub extern "C" fn csm_roi(end: c_int) {
    let rt = ok(runtime::get("the region-of-interest marker"));
    let mut r = rt.roi.lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    if end == 0 {
        r.0 = Some(r.0.map_or(now, |t| t.min(now)));
    } else {
        r.1 = Some(r.1.map_or(now, |t| t.max(now)));
    }
}

/// The calling process's number (0 = main), for GET_PID.
#[no_mangle]
pub extern "C" fn csm_process_id() -> c_long {
    runtime::process_id() as c_long
}

/// The number of processes (nodes x threads).
#[no_mangle]
pub extern "C" fn csm_processes() -> c_long {
    ok(runtime::get("csm_processes")).procs as c_long
}

/// This node, and the cluster's size.
#[no_mangle]
pub extern "C" fn csm_node_id() -> c_long {
    ok(runtime::get("csm_node_id")).me as c_long
}

#[no_mangle]
pub extern "C" fn csm_nodes() -> c_long {
    ok(runtime::get("csm_nodes")).nodes as c_long
}
