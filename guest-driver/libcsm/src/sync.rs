//! The ANL macros' synchronisation on Cashmere's (seed 000 s.2.1: locks,
//! barriers and flags are where a release-consistent program's writes move).
//!
//! - **Locks**: `LOCKINIT` gives the lock an id from the cluster's counter
//!   (so a lock in shared memory or a global set before CREATE names the
//!   same lock everywhere); the id maps onto Cashmere lock `1 + id mod
//!   (CSM_LOCKS - 1)` (lock 0 is the runtime's). Ids sharing a Cashmere lock
//!   exclude each other too, which is safe; a thread that takes a second id
//!   of a Cashmere lock it holds counts it instead of deadlocking on itself.
//! - **Barriers**: Cashmere's barrier of every process (2L: the node's
//!   threads meet first); a barrier of another count is refused.
//! - **Pauses, condition variables, GETSUB**: a word in shared memory under
//!   the object's own lock; waiting looks again under the lock (the acquire
//!   brings the writer's change) with a growing sleep between looks,
//!   answering other nodes' requests meanwhile.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use crate::runtime::{self, RunError, Runtime, RUNTIME_LOCK};

/// `csm_lock_t`: the id and a mark that LOCKINIT ran.
#[repr(C)]
pub struct Lock {
    pub id: u32,
    pub magic: u32,
}

/// `csm_pause_t`, `csm_condvar_t`, `csm_gs_t`: a lock and a word.
#[repr(C)]
pub struct Guarded {
    pub lock: Lock,
    pub word: i64,
}

const LOCK_MAGIC: u32 = 0x4c4b_4353; // "CSKL"

thread_local! {
    /// Cashmere locks this thread holds: how many program locks it holds
    /// through each, and whether it took it in the cluster.
    static HELD: RefCell<HashMap<u32, (u32, bool)>> = RefCell::new(HashMap::new());
}

fn cashmere_lock(rt: &Runtime, id: u32) -> u32 {
    let program_locks = rt.settings.locks - 1;
    RUNTIME_LOCK + 1 + id % program_locks
}

/// LOCKINIT / ALOCKINIT: `n` locks at `l`.
///
/// # Safety
/// `l` points at `n` writable `csm_lock_t`.
pub unsafe fn lock_init(l: *mut Lock, n: usize) -> Result<(), RunError> {
    let rt = runtime::get("LOCKINIT")?;
    if n == 0 {
        return Ok(());
    }
    let first = rt.lock_ids(u32::try_from(n).unwrap_or(u32::MAX))?;
    for i in 0..n {
        // SAFETY: per the contract.
        unsafe {
            let p = l.add(i);
            std::ptr::write_volatile(
                &mut (*p).id,
                first.wrapping_add(u32::try_from(i).unwrap_or(u32::MAX)),
            );
            std::ptr::write_volatile(&mut (*p).magic, LOCK_MAGIC);
        }
    }
    Ok(())
}

/// The id of an initialised lock.
///
/// # Safety
/// `l` points at a `csm_lock_t`.
unsafe fn lock_id(l: *const Lock, what: &'static str) -> Result<u32, RunError> {
    // SAFETY: per the contract.
    let (id, magic) = unsafe {
        (
            std::ptr::read_volatile(&(*l).id),
            std::ptr::read_volatile(&(*l).magic),
        )
    };
    if magic != LOCK_MAGIC {
        return Err(RunError::Uninitialised {
            what,
            init: "LOCKINIT",
            addr: l as usize,
        });
    }
    Ok(id)
}

/// LOCK.
///
/// # Safety
/// `l` points at a `csm_lock_t`.
pub unsafe fn lock(l: *const Lock) -> Result<(), RunError> {
    let rt = runtime::get("LOCK")?;
    // SAFETY: per the contract.
    let id = unsafe { lock_id(l, "LOCK")? };
    acquire(rt, cashmere_lock(rt, id))
}

/// UNLOCK.
///
/// # Safety
/// `l` points at a `csm_lock_t`.
pub unsafe fn unlock(l: *const Lock) -> Result<(), RunError> {
    let rt = runtime::get("UNLOCK")?;
    // SAFETY: per the contract.
    let id = unsafe { lock_id(l, "UNLOCK")? };
    release(rt, cashmere_lock(rt, id), id)
}

fn acquire(rt: &Runtime, cl: u32) -> Result<(), RunError> {
    let again = HELD.with(|h| match h.borrow_mut().get_mut(&cl) {
        Some((n, _)) => {
            *n += 1;
            true
        }
        None => false,
    });
    if !again {
        // Before the processes start, main is alone on node 0: nothing to
        // exclude, and nobody to give the lock back to.
        let in_cluster = rt.started();
        if in_cluster {
            rt.csm.lock_acquire(cl)?;
        }
        HELD.with(|h| h.borrow_mut().insert(cl, (1, in_cluster)));
    }
    Ok(())
}

fn release(rt: &Runtime, cl: u32, id: u32) -> Result<(), RunError> {
    let last = HELD.with(|h| {
        let mut h = h.borrow_mut();
        match h.get_mut(&cl) {
            None => None,
            Some((n, _)) if *n > 1 => {
                *n -= 1;
                Some(false)
            }
            Some(&mut (_, in_cluster)) => {
                h.remove(&cl);
                Some(in_cluster)
            }
        }
    });
    match last {
        None => Err(RunError::NotHeld { id }),
        Some(false) => Ok(()),
        Some(true) => Ok(rt.csm.lock_release(cl)?),
    }
}

/// BARRIER(b, n), ABARRIER.
pub fn barrier(what: &'static str, n: i64) -> Result<(), RunError> {
    let rt = runtime::get(what)?;
    if n != i64::from(rt.procs) {
        return Err(rt.barrier_count(what, n));
    }
    rt.need_all(what)?;
    rt.csm.barrier()?;
    Ok(())
}

/// The state word of a pause, condition variable or GETSUB counter must be
/// where every node sees it.
fn check_shared(rt: &Runtime, g: *const Guarded, what: &'static str) -> Result<(), RunError> {
    if rt.nodes > 1 && !rt.is_shared(g as usize) {
        return Err(RunError::NotShared {
            what,
            addr: g as usize,
        });
    }
    Ok(())
}

/// PAUSEINIT, CONDVARINIT, GSINIT: a fresh lock and the word's value.
///
/// # Safety
/// `g` points at a writable `Guarded`.
pub unsafe fn guarded_init(g: *mut Guarded, what: &'static str, v: i64) -> Result<(), RunError> {
    let rt = runtime::get(what)?;
    check_shared(rt, g, what)?;
    // SAFETY: per the contract.
    unsafe {
        lock_init(&mut (*g).lock, 1)?;
        std::ptr::write_volatile(&mut (*g).word, v);
    }
    Ok(())
}

/// Run `f` on the word under its lock.
///
/// # Safety
/// `g` points at a `Guarded`.
pub unsafe fn with_word<T>(
    g: *mut Guarded,
    what: &'static str,
    f: impl FnOnce(&mut i64) -> T,
) -> Result<T, RunError> {
    let rt = runtime::get(what)?;
    check_shared(rt, g, what)?;
    // SAFETY: per the contract.
    let l = unsafe { &raw const (*g).lock };
    // SAFETY: as above.
    let id = unsafe { lock_id(l, what)? };
    let cl = cashmere_lock(rt, id);
    acquire(rt, cl)?;
    // SAFETY: the word is read and written only under its lock.
    let mut v = unsafe { std::ptr::read_volatile(&(*g).word) };
    let r = f(&mut v);
    // SAFETY: as above.
    unsafe { std::ptr::write_volatile(&mut (*g).word, v) };
    release(rt, cl, id)?;
    Ok(r)
}

/// Wait until `done(word)` holds, looking under the word's lock.
///
/// # Safety
/// `g` points at a `Guarded`.
pub unsafe fn wait_until(
    g: *mut Guarded,
    what: &'static str,
    mut done: impl FnMut(&mut i64) -> bool,
) -> Result<(), RunError> {
    let rt = runtime::get(what)?;
    let mut nap = Duration::from_micros(20);
    loop {
        // SAFETY: per the contract.
        if unsafe { with_word(g, what, &mut done)? } {
            return Ok(());
        }
        rt.csm.poll()?;
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(2));
    }
}

/// CONDVARWAIT(cv, l): note the signal count, give `l` up, wait for the
/// count to move, take `l` again. A signal made after the waiter noted the
/// count (it holds `l`, under which the condition changes) is never lost;
/// a signal wakes every waiter (pthreads allows spurious wake-ups).
///
/// # Safety
/// `cv` points at a `csm_condvar_t`, `l` at a lock this thread holds.
pub unsafe fn condvar_wait(cv: *mut Guarded, l: *const Lock) -> Result<(), RunError> {
    // SAFETY: per the contract.
    unsafe {
        let seen = with_word(cv, "CONDVARWAIT", |w| *w)?;
        unlock(l)?;
        wait_until(cv, "CONDVARWAIT", |w| *w != seen)?;
        lock(l)
    }
}
