//! Cluster spinlocks (seed 004, Table 1): imc_lkalloc, imc_lkacquire,
//! imc_lkrelease, imc_lkdealloc, over the API's lock sets. A lock is held
//! by the process (any of its threads may release it); a thread that
//! acquires a lock it holds gets IMC_HELD rather than a deadlock.

use std::ffi::c_int;
use std::sync::Arc;

use mc_api::McError;

use crate::abi::*;
use crate::library::library;
use crate::words::{int_of, word_of};
use crate::{api_failure, failure};

/// Allocate (or find) the set of `*nlocks` spinlocks under `key`. With
/// IMC_CREATOR the set must not exist (else IMC_EXISTS) and the call
/// returns holding lock 0, so the creator can set things up before anyone
/// else gets in (the race-free start of Figure 6). On success `*nlocks` is
/// the set's real size.
///
/// # Safety
/// `nlocks` and `lock_id` must be NULL or point to writable ints.
#[no_mangle]
pub unsafe extern "C" fn imc_lkalloc(
    key: c_int,
    nlocks: *mut c_int,
    perm: c_int,
    flag: c_int,
    lock_id: *mut c_int,
) -> c_int {
    if nlocks.is_null() || lock_id.is_null() || flag & !IMC_CREATOR != 0 || perm & !PERM_ALL != 0 {
        return failure(
            IMC_BADPARM,
            "imc_lkalloc: a NULL pointer, or an unknown flag or permission bit",
        );
    }
    // SAFETY: checked non-NULL; the caller promises it is readable.
    let wanted = unsafe { *nlocks };
    if wanted <= 0 || wanted > IMC_MAXNUMLOCKS {
        return failure(
            IMC_BADPARM,
            format!("imc_lkalloc: {wanted} locks (1 to {IMC_MAXNUMLOCKS})"),
        );
    }
    let lib = match library() {
        Ok(l) => l,
        Err(c) => return c,
    };
    let creator = flag & IMC_CREATOR != 0;
    let mut count = u32::try_from(wanted).expect("checked positive above");
    let set = loop {
        match lib.mc.lock_alloc(word_of(key), count, creator, creator) {
            Ok(s) => break s,
            // An existing set of another size: join it, as it is.
            Err(McError::LockSetSize { count: real, .. }) if !creator && real != count => {
                count = real
            }
            Err(e) => return api_failure(&e),
        }
    };
    let id = set.id();
    // SAFETY: `nlocks` and `lock_id` were both checked non-NULL at the top,
    // and the caller promises they point to writable ints (# Safety).
    unsafe {
        *nlocks = c_int::try_from(set.count()).expect("at most IMC_MAXNUMLOCKS");
        *lock_id = int_of(id);
    }
    // A second allocation of the same set by this process shares the first.
    lib.locks().entry(id).or_insert_with(|| Arc::new(set));
    IMC_SUCCESS
}

fn with_set<R>(lock_id: c_int, f: impl FnOnce(&Arc<mc_api::LockSet>) -> R) -> Result<R, c_int> {
    let lib = library()?;
    let sets = lib.locks();
    match sets.get(&word_of(lock_id)) {
        Some(s) => Ok(f(s)),
        None => Err(failure(
            IMC_BADLOCK,
            format!("no lock set {lock_id} in this process (imc_lkalloc it first)"),
        )),
    }
}

fn lock_index(index: c_int) -> Result<u32, c_int> {
    u32::try_from(index).map_err(|_| failure(IMC_BADLOCK, format!("lock index {index}")))
}

/// Acquire lock `index` of set `lock_id`: spin until it is free
/// (IMC_LOCKWAIT) or return IMC_LOCKBUSY (IMC_LOCKNOWAIT). `flag` is
/// reserved and must be 0.
#[no_mangle]
pub extern "C" fn imc_lkacquire(lock_id: c_int, index: c_int, flag: c_int, wait: c_int) -> c_int {
    if flag != 0 || !matches!(wait, IMC_LOCKWAIT | IMC_LOCKNOWAIT) {
        return failure(
            IMC_BADPARM,
            "imc_lkacquire: flag must be 0, the last argument IMC_LOCKWAIT or IMC_LOCKNOWAIT",
        );
    }
    let i = match lock_index(index) {
        Ok(i) => i,
        Err(c) => return c,
    };
    // The set is cloned out of the table: acquiring may spin for long, and
    // other threads must reach the table meanwhile.
    let set = match with_set(lock_id, |s| s.clone()) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let r = if wait == IMC_LOCKWAIT {
        set.acquire(i).map(|()| true)
    } else {
        set.try_acquire(i)
    };
    match r {
        Ok(true) => IMC_SUCCESS,
        Ok(false) => failure(
            IMC_LOCKBUSY,
            format!("lock {index} of set {lock_id} is held"),
        ),
        Err(e) => api_failure(&e),
    }
}

/// Release lock `index` of set `lock_id`.
#[no_mangle]
pub extern "C" fn imc_lkrelease(lock_id: c_int, index: c_int) -> c_int {
    let i = match lock_index(index) {
        Ok(i) => i,
        Err(c) => return c,
    };
    match with_set(lock_id, |s| s.release(i)) {
        Ok(Ok(())) => IMC_SUCCESS,
        Ok(Err(e)) => api_failure(&e),
        Err(c) => c,
    }
}

/// Deallocate set `lock_id` for this process; refused while this process
/// holds one of its locks. The set goes when its last user deallocates it.
#[no_mangle]
pub extern "C" fn imc_lkdealloc(lock_id: c_int) -> c_int {
    let lib = match library() {
        Ok(l) => l,
        Err(c) => return c,
    };
    let mut sets = lib.locks();
    let Some(set) = sets.get(&word_of(lock_id)) else {
        return failure(
            IMC_BADLOCK,
            format!("no lock set {lock_id} in this process"),
        );
    };
    if let Some(i) = (0..set.count()).find(|&i| set.holds(i)) {
        return failure(
            IMC_LOCKACTIVE,
            format!("lock {i} of set {lock_id} is held by this process"),
        );
    }
    let set = sets.remove(&word_of(lock_id)).expect("looked up above");
    let set = match Arc::try_unwrap(set) {
        Ok(s) => s,
        Err(shared) => {
            // Another thread is in imc_lkacquire on this set.
            sets.insert(word_of(lock_id), shared);
            return failure(
                IMC_LOCKACTIVE,
                format!("a thread of this process is acquiring a lock of set {lock_id}"),
            );
        }
    };
    drop(sets);
    match set.dealloc() {
        Ok(()) => IMC_SUCCESS,
        Err(e) => api_failure(&e),
    }
}
