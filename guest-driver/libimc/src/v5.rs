//! The TruCluster V5 spellings of the API, which public code written for
//! Tru64 V5 calls (Ingres's cluster layer, for one): a rail argument on
//! the error counts and on imc_asalloc, and an argument to imc_api_init.
//! `<sys/imc.h>` declares them when `IMC_TRUCLUSTER_V5` is defined, and
//! maps the two names that clash with seed 004's Table 1 (`imc_api_init`,
//! `imc_asalloc`) to the distinct symbols here, so both ABIs link into one
//! library and neither is called through the other's prototype.
//!
//! This adapter is rail 0, the only one: another rail is `IMC_BADPARM`,
//! saying so.

use std::ffi::{c_int, c_ulong};

use crate::abi::*;
use crate::errcount::{imc_api_init, imc_ckerrcnt, imc_rderrcnt};
use crate::failure;
use crate::regions::imc_asalloc;

/// Rails this library drives: rail 0 only.
const RAILS: c_ulong = 1;

fn rail_ok(call: &str, rail: c_int) -> Result<(), c_int> {
    if rail == 0 {
        Ok(())
    } else {
        Err(failure(
            IMC_BADPARM,
            format!("{call}: rail {rail}: this cluster has one Memory Channel rail, rail 0"),
        ))
    }
}

/// V5 `imc_api_init(unsigned long *)`: open the adapter; if the pointer
/// is not NULL, store the set of rails present (bit 0: rail 0).
///
/// # Safety
/// `rails` must be NULL or point to a writable `unsigned long`.
#[no_mangle]
pub unsafe extern "C" fn imc_api_init_v5(rails: *mut c_ulong) -> c_int {
    let r = imc_api_init();
    if r == IMC_SUCCESS && !rails.is_null() {
        // SAFETY: checked non-NULL; the caller promises it is writable.
        unsafe { *rails = RAILS };
    }
    r
}

/// V5 `imc_rderrcnt_mr(int rail)`: the error count of `rail`, or
/// -(an IMC_* code).
#[no_mangle]
pub extern "C" fn imc_rderrcnt_mr(rail: c_int) -> c_int {
    match rail_ok("imc_rderrcnt_mr", rail) {
        Ok(()) => imc_rderrcnt(),
        Err(c) => -c,
    }
}

/// V5 `imc_ckerrcnt_mr(int *count, int rail)`: imc_ckerrcnt on `rail`.
///
/// # Safety
/// As imc_ckerrcnt: `count` NULL or readable and writable.
#[no_mangle]
pub unsafe extern "C" fn imc_ckerrcnt_mr(count: *mut c_int, rail: c_int) -> c_int {
    if let Err(c) = rail_ok("imc_ckerrcnt_mr", rail) {
        return c;
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { imc_ckerrcnt(count) }
}

/// V5 `imc_asalloc(key, size, perm, flag, id, rail)`: seed 004's
/// imc_asalloc on `rail`.
///
/// # Safety
/// As imc_asalloc: `id` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn imc_asalloc_v5(
    key: c_int,
    size: libc::size_t,
    perm: c_int,
    flag: c_int,
    id: *mut c_int,
    rail: c_int,
) -> c_int {
    if let Err(c) = rail_ok("imc_asalloc", rail) {
        return c;
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { imc_asalloc(key, size, perm, flag, id) }
}
