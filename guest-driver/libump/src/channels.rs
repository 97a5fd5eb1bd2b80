//! Channels (seed 004, Table 3: "Three functions establish the channel
//! connection"): `ump_open`, `ump_close`, `ump_listen`, `ump_wait`.

use std::ffi::{c_int, c_long};
use std::time::Duration;

use ump_rs::Event;

use crate::errors::*;
use crate::handles::*;

/// `ump_open`.
///
/// # Safety
/// `t` as for [`ump_exit`] (not freed); `ch` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ump_open(
    t: *mut UmpTask,
    local: u64,
    remote: u64,
    tr: c_int,
    ch: *mut ump_channel_t,
) -> c_int {
    // SAFETY: the caller's contract.
    let t = try_code!(unsafe { task(t) });
    let tr = try_code!(transport(tr));
    if ch.is_null() {
        return fail(UMP_EBADPARM, "NULL channel pointer");
    }
    match t.ump.open(local, remote, tr) {
        Ok(c) => {
            // SAFETY: checked non-NULL; the caller's contract.
            unsafe { *ch = c_channel(c) };
            UMP_SUCCESS
        }
        Err(e) => err(e),
    }
}

/// `ump_close`.
///
/// # Safety
/// `t` a live task.
#[no_mangle]
pub unsafe extern "C" fn ump_close(t: *mut UmpTask, ch: ump_channel_t) -> c_int {
    // SAFETY: the caller's contract.
    let t = try_code!(unsafe { task(t) });
    let ch = try_code!(channel(ch));
    t.ump.close(ch).map_or_else(err, |_| UMP_SUCCESS)
}

/// `ump_listen`.
///
/// # Safety
/// `t` a live task.
#[no_mangle]
pub unsafe extern "C" fn ump_listen(t: *mut UmpTask, local: u64, tr: c_int) -> c_int {
    // SAFETY: the caller's contract.
    let t = try_code!(unsafe { task(t) });
    let tr = try_code!(transport(tr));
    t.ump.listen(local, tr).map_or_else(err, |_| UMP_SUCCESS)
}

/// `ump_wait`: `UMP_ETIMEOUT` when nothing happened within `timeout_us`
/// (`UMP_FOREVER`: the configured timeout).
///
/// # Safety
/// `t` a live task; `ev` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ump_wait(
    t: *mut UmpTask,
    ch: ump_channel_t,
    timeout_us: c_long,
    ev: *mut UmpEvent,
) -> c_int {
    // SAFETY: the caller's contract.
    let t = try_code!(unsafe { task(t) });
    if ev.is_null() {
        return fail(UMP_EBADPARM, "NULL event pointer");
    }
    let on = if ch == UMP_ANY {
        None
    } else {
        Some(try_code!(channel(ch)))
    };
    // A negative timeout (UMP_FOREVER) is the configured one.
    let timeout =
        u64::try_from(timeout_us).map_or(t.ump.node().config().timeout, Duration::from_micros);
    match t.ump.wait(on, timeout) {
        Ok(Some(e)) => {
            let (ty, c) = match e {
                Event::Opened(c) => (1, c),
                Event::Message(c) => (2, c),
                Event::Closed(c) => (3, c),
            };
            // SAFETY: checked non-NULL; the caller's contract.
            unsafe {
                *ev = UmpEvent {
                    kind: ty,
                    channel: c_channel(c),
                }
            };
            UMP_SUCCESS
        }
        Ok(None) => fail(UMP_ETIMEOUT, "no event in time"),
        Err(e) => err(e),
    }
}

/// `ump_event_t`.
#[repr(C)]
pub struct UmpEvent {
    kind: c_int,
    channel: c_int,
}
