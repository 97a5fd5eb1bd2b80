//! Error counts (seed 004, "Error Management"): imc_rderrcnt (one load of
//! the cluster error count) and imc_ckerrcnt (every adapter checked
//! through this node's ACK page, which is ordered after every store this
//! process made, plain stores included), so the seed's "save the count,
//! write, check" works as written. Also the calls beyond Table 1 that
//! concern the whole library: imc_api_init, imc_perror, imc_write,
//! imc_node_id, imc_nodes, imc_mb.

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::abi::*;
use crate::library::library;
use crate::{api_failure, failure, last_failure, plain};

/// The error count as the C API's `int`: its low 31 bits, so it never
/// reads as a negative return code. Callers compare it with an earlier
/// one, and a count moves by one per error, so a change still shows.
fn count_int(count: u64) -> c_int {
    c_int::try_from(count & 0x7fff_ffff).expect("31 bits fit an int")
}

/// The cluster error count (not guaranteed current for other nodes'
/// errors), or -IMC_NOTINIT.
#[no_mangle]
pub extern "C" fn imc_rderrcnt() -> c_int {
    match library() {
        Ok(l) => count_int(l.mc.error_count()),
        Err(c) => -c,
    }
}

/// Check every adapter through the ACK page. IMC_SUCCESS if the count is
/// still `*errors`; else IMC_ERRORS and `*errors` updated, so the seed's
/// loop `do { write; mb(); } while (imc_ckerrcnt(&errors) || ...)` writes
/// again after an error.
///
/// # Safety
/// `errors` must be NULL or point to a readable and writable int.
#[no_mangle]
pub unsafe extern "C" fn imc_ckerrcnt(errors: *mut c_int) -> c_int {
    if errors.is_null() {
        return failure(IMC_BADPARM, "imc_ckerrcnt: errors is NULL");
    }
    let lib = match library() {
        Ok(l) => l,
        Err(c) => return c,
    };
    let check = match lib.mc.check_errors() {
        Ok(c) => c,
        Err(e) => return api_failure(&e),
    };
    if let Some((n, why)) = plain::lost_stores() {
        return failure(
            IMC_MCERROR,
            format!("{n} plain stores could not be posted: {why}"),
        );
    }
    let now = count_int(check.count);
    // SAFETY: checked non-NULL; the caller promises it is readable/writable.
    let saved = unsafe { *errors };
    if now == saved {
        return IMC_SUCCESS;
    }
    // SAFETY: `errors` was checked non-NULL above, and the caller promises
    // (# Safety) that it points to a writable int.
    unsafe { *errors = now };
    failure(
        IMC_ERRORS,
        format!("the cluster error count went from {saved} to {now}"),
    )
}

/// Open the adapter now (every call does it on first use).
#[no_mangle]
pub extern "C" fn imc_api_init() -> c_int {
    match library() {
        Ok(_) => IMC_SUCCESS,
        Err(c) => c,
    }
}

/// Print `s: <meaning of code>[: <detail>]` on stderr.
///
/// # Safety
/// `s` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn imc_perror(s: *const c_char, code: c_int) {
    let prefix = if s.is_null() {
        String::new()
    } else {
        // SAFETY: `s` is not NULL (checked above) and the caller promises a
        // NUL-terminated string (# Safety), which CStr only reads.
        format!("{}: ", unsafe { CStr::from_ptr(s) }.to_string_lossy())
    };
    let detail = last_failure();
    if code == IMC_SUCCESS || detail.is_empty() {
        eprintln!("{prefix}{}", describe(code));
    } else {
        eprintln!("{prefix}{}: {detail}", describe(code));
    }
}

/// Copy `len` bytes from `src` to the transmit address `dst` as one
/// posted write.
///
/// # Safety
/// `src` must point to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn imc_write(
    dst: *mut c_void,
    src: *const c_void,
    len: libc::size_t,
) -> c_int {
    if dst.is_null() || (src.is_null() && len > 0) {
        return failure(IMC_BADPARM, "imc_write: NULL address");
    }
    if len == 0 {
        return IMC_SUCCESS;
    }
    if let Err(c) = library() {
        return c;
    }
    // SAFETY: the caller promises `len` readable bytes at `src`.
    let data = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), len) };
    plain::write(dst as usize, data)
}

/// This node's number, or -IMC_NOTINIT.
#[no_mangle]
pub extern "C" fn imc_node_id() -> c_int {
    match library() {
        Ok(l) => c_int::from(l.mc.node_id().0),
        Err(c) => -c,
    }
}

/// The number of nodes the cluster was configured with, or -IMC_NOTINIT.
#[no_mangle]
pub extern "C" fn imc_nodes() -> c_int {
    match library() {
        Ok(l) => c_int::try_from(l.mc.nodes()).expect("at most 64 nodes"),
        Err(c) => -c,
    }
}

/// The API's `mb`: a CPU fence (stores already reach the network in
/// program order through the adapter's FIFO).
#[no_mangle]
pub extern "C" fn imc_mb() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}
