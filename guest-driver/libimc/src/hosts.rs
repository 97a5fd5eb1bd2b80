//! imc_kill and imc_gethosts (seed 004, Table 1): the C calls that name
//! cluster members by host, over the command relay (`relay`).

use std::ffi::{c_char, c_int, CStr};

use crate::abi::*;
use crate::failure;
use crate::library::library;

/// Send signal `sig` to process `pid` on the member named `host`.
///
/// # Safety
/// `host` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn imc_kill(host: *const c_char, pid: libc::pid_t, sig: c_int) -> c_int {
    if host.is_null() || pid <= 0 {
        return failure(
            IMC_BADPARM,
            "imc_kill: host NULL or pid not positive (one process only)",
        );
    }
    if !(0..=64).contains(&sig) {
        return failure(
            IMC_EINVAL,
            format!("imc_kill: {sig} is not a signal number"),
        );
    }
    // SAFETY: `host` is not NULL (checked above) and the caller promises a
    // NUL-terminated string (# Safety), which CStr only reads.
    let host = unsafe { CStr::from_ptr(host) }
        .to_string_lossy()
        .into_owned();
    let lib = match library() {
        Ok(l) => l,
        Err(c) => return c,
    };
    let members = lib.members();
    let by_number = host
        .strip_prefix("node")
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|n| members.contains(n));
    let dest = by_number.or_else(|| {
        lib.relay
            .names(&members)
            .into_iter()
            .find(|(_, name)| *name == host)
            .map(|(n, _)| n)
    });
    match dest {
        Some(n) => lib.relay.kill(n, pid, sig),
        None => failure(IMC_BADHOST, format!("no cluster member is named {host:?}")),
    }
}

/// The members now in the cluster and their host names, in node order.
///
/// # Safety
/// `nhosts` must be NULL or point to a writable int; `names` NULL or point
/// to `IMC_MAXHOSTS` writable names.
#[no_mangle]
pub unsafe extern "C" fn imc_gethosts(
    nhosts: *mut c_int,
    names: *mut [c_char; IMC_HOSTNAMELEN],
) -> c_int {
    if nhosts.is_null() {
        return failure(IMC_BADPARM, "imc_gethosts: nhosts is NULL");
    }
    let lib = match library() {
        Ok(l) => l,
        Err(c) => return c,
    };
    let members = lib.members();
    // SAFETY: checked non-NULL; the caller promises it is writable.
    unsafe { *nhosts = c_int::try_from(members.len()).expect("at most 64 members") };
    if names.is_null() {
        return IMC_SUCCESS;
    }
    for (i, (_, name)) in lib
        .relay
        .names(&members)
        .into_iter()
        .enumerate()
        .take(IMC_MAXHOSTS)
    {
        let mut out = [0 as c_char; IMC_HOSTNAMELEN];
        for (o, b) in out.iter_mut().zip(name.bytes().take(IMC_HOSTNAMELEN - 1)) {
            *o = c_char::from_ne_bytes([b]);
        }
        // SAFETY: `names` is not NULL (checked above), `i` is below
        // IMC_MAXHOSTS (`take`), and the caller provides that many writable
        // names (# Safety).
        unsafe { *names.add(i) = out };
    }
    IMC_SUCCESS
}
