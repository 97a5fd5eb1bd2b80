//! The node's UMP, the task and request objects C holds by pointer, the
//! checks of the arguments that name them, `ump_init` and `ump_exit`.

use std::ffi::c_int;
use std::sync::{Arc, OnceLock};

use ump_rs::{ChannelId, Config, Node, PendingWrite, Transport, Ump};

use crate::errors::*;

/// The node's UMP, brought up by the first `ump_init`.
pub(crate) fn node() -> Result<&'static Arc<Node>, c_int> {
    static NODE: OnceLock<Result<Arc<Node>, String>> = OnceLock::new();
    let r = NODE.get_or_init(|| {
        let mc = imc::memory_channel()?;
        Node::open(&mc, Config::from_env())
            .map_err(|e| format!("bringing UMP up: {}", mc_api::ErrorChain(&e)))
    });
    match r {
        Ok(n) => Ok(n),
        Err(why) => Err(fail(UMP_ENOINIT, why.clone())),
    }
}

/// A task, as C holds it.
pub struct UmpTask {
    pub(crate) ump: Ump,
}

/// A started non-blocking write, as C holds it.
pub struct UmpRequest {
    pub(crate) pending: PendingWrite,
}

pub(crate) fn transport(t: c_int) -> Result<Transport, c_int> {
    match t {
        0 => Ok(Transport::Auto),
        1 => Ok(Transport::SharedMemory),
        2 => Ok(Transport::MemoryChannel),
        _ => Err(fail(
            UMP_EBADPARM,
            format!("transport {t}: not UMP_AUTO, UMP_SHM or UMP_MC"),
        )),
    }
}

pub(crate) fn channel(c: ump_channel_t) -> Result<ChannelId, c_int> {
    u32::try_from(c)
        .map(ChannelId)
        .map_err(|_| fail(UMP_ENOCHANNEL, format!("channel {c}")))
}

/// The C handle of channel `c`. UMP numbers a task's channels from 1 up,
/// so one past `c_int::MAX` would take 2^31 opens in one task.
pub(crate) fn c_channel(c: ChannelId) -> ump_channel_t {
    c_int::try_from(c.0).expect("fewer than 2^31 channels opened in one task")
}

#[allow(non_camel_case_types)]
pub(crate) type ump_channel_t = c_int;

/// The task behind a C pointer.
///
/// # Safety
/// `t` is NULL or a pointer `ump_init` returned and `ump_exit` has not
/// freed.
pub(crate) unsafe fn task<'a>(t: *mut UmpTask) -> Result<&'a UmpTask, c_int> {
    // SAFETY: the caller's contract (above).
    unsafe { t.as_ref() }.ok_or_else(|| fail(UMP_EBADPARM, "NULL task"))
}

/// `ump_init`: a new task of this process.
///
/// # Safety
/// `out` is NULL or points to writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn ump_init(out: *mut *mut UmpTask) -> c_int {
    if out.is_null() {
        return fail(UMP_EBADPARM, "NULL task pointer");
    }
    let node = try_code!(node());
    let t = Box::new(UmpTask {
        ump: Ump::init(node),
    });
    // SAFETY: checked non-NULL; the caller's contract.
    unsafe { *out = Box::into_raw(t) };
    UMP_SUCCESS
}

/// `ump_exit`: close the task's channels and free it.
///
/// # Safety
/// `t` is NULL or a live task; it is freed (not to be used again).
#[no_mangle]
pub unsafe extern "C" fn ump_exit(t: *mut UmpTask) -> c_int {
    if t.is_null() {
        return fail(UMP_EBADPARM, "NULL task");
    }
    // SAFETY: a live task from ump_init (the caller's contract), freed once.
    let b = unsafe { Box::from_raw(t) };
    let r = b.ump.exit();
    if let Ok(n) = node() {
        if let Err(e) = n.memory_channel().flush() {
            return fail(UMP_EMC, e.to_string());
        }
    }
    r.map_or_else(err, |_| UMP_SUCCESS)
}
