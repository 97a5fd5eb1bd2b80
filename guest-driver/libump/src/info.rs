//! `ump_info`: the configuration and state of a task, as C reads it.

use std::ffi::c_int;

use crate::errors::*;
use crate::handles::*;

/// A count for a C `int` field; saturated, though every count here (nodes,
/// tasks, channels) is far below `INT_MAX`.
fn c_count<T: TryInto<c_int>>(n: T) -> c_int {
    n.try_into().unwrap_or(c_int::MAX)
}

/// `ump_info_t`.
#[repr(C)]
pub struct UmpInfo {
    node: c_int,
    nodes: c_int,
    task: c_int,
    channels: c_int,
    ring_bytes: usize,
    shm_ring_bytes: usize,
    fragment_bytes: usize,
    region_bytes: u64,
    region_used: u64,
    error_count: u64,
    checksum: c_int,
    receiver_check: c_int,
    writer_check: c_int,
}

/// `ump_info`.
///
/// # Safety
/// `t` a live task; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn ump_info(t: *mut UmpTask, out: *mut UmpInfo) -> c_int {
    // SAFETY: the caller's contract.
    let t = try_code!(unsafe { task(t) });
    if out.is_null() {
        return fail(UMP_EBADPARM, "NULL info pointer");
    }
    let i = t.ump.info();
    let c = &i.config;
    // SAFETY: checked non-NULL; the caller's contract.
    unsafe {
        *out = UmpInfo {
            node: c_int::from(i.node),
            nodes: c_count(i.nodes),
            task: c_count(i.task),
            channels: c_count(i.channels.len()),
            ring_bytes: c.ring_bytes,
            shm_ring_bytes: c.shm_ring_bytes,
            fragment_bytes: c.fragment_bytes,
            region_bytes: i.region_bytes,
            region_used: i.region_used,
            error_count: i.error_count,
            checksum: c_int::from(c.checksum),
            receiver_check: c_int::from(c.receiver_check),
            writer_check: c_int::from(c.writer_check),
        }
    };
    UMP_SUCCESS
}
