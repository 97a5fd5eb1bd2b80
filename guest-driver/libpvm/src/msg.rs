//! Sending and receiving: pvm_send, pvm_psend, pvm_mcast, pvm_recv,
//! pvm_nrecv, pvm_trecv, pvm_precv, pvm_probe. Source and tag -1 match any.

use std::ffi::{c_int, c_void};
use std::time::{Duration, Instant};

use crate::buffers::Buf;
use crate::codes::*;
use crate::task::{with, Pvm};
use crate::wire::{Msg, USER};

/// The program's messages from `src` with `tag` (-1: any).
fn user(src: c_int, tag: c_int) -> impl Fn(&Msg) -> bool {
    move |m: &Msg| m.kind == USER && (src == -1 || m.src == src) && (tag == -1 || m.tag == tag)
}

fn bad_tid(p: &Pvm, tid: c_int) -> bool {
    tid != p.tid && pvm_relay::host_of(tid).is_none()
}

/// The active send buffer's bytes (in-place data taken now) and encoding.
fn outgoing(p: &mut Pvm) -> Result<(Vec<u8>, c_int), c_int> {
    let b = p.bufs.active(true)?;
    let enc = b.encoding;
    Ok((b.bytes().to_vec(), enc))
}

#[no_mangle]
pub extern "C" fn pvm_send(tid: c_int, tag: c_int) -> c_int {
    with("pvm_send", |p| {
        if tag < 0 || bad_tid(p, tid) {
            return PVM_BAD_PARAM;
        }
        match outgoing(p) {
            Ok((bytes, enc)) => {
                p.send_to(tid, USER, tag, enc, &bytes);
                PVM_OK
            }
            Err(c) => c,
        }
    })
}

/// pvm_mcast: the active send buffer to each task of the list.
///
/// # Safety
/// `tids` holds `count` ints.
#[no_mangle]
pub unsafe extern "C" fn pvm_mcast(tids: *const c_int, count: c_int, tag: c_int) -> c_int {
    let Ok(n) = usize::try_from(count) else {
        return PVM_BAD_PARAM;
    };
    if tag < 0 || (tids.is_null() && n > 0) {
        return PVM_BAD_PARAM;
    }
    let list = if n == 0 {
        &[][..]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(tids, n) }
    };
    with("pvm_mcast", |p| {
        if list.iter().any(|t| bad_tid(p, *t)) {
            return PVM_BAD_PARAM;
        }
        match outgoing(p) {
            Ok((bytes, enc)) => {
                // PVM 3.4 does not send a multicast to the sender itself.
                let me = p.tid;
                for &t in list.iter().filter(|t| **t != me) {
                    p.send_to(t, USER, tag, enc, &bytes);
                }
                PVM_OK
            }
            Err(c) => c,
        }
    })
}

/// pvm_psend: `count` elements of `datatype` from `buf`, packed and sent.
///
/// # Safety
/// `buf` holds `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn pvm_psend(
    tid: c_int,
    tag: c_int,
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
) -> c_int {
    let (Some(size), Ok(n)) = (type_size(datatype), usize::try_from(count)) else {
        return PVM_BAD_PARAM;
    };
    if tag < 0 || (buf.is_null() && n > 0) {
        return PVM_BAD_PARAM;
    }
    let bytes = if n == 0 {
        &[][..]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n * size) }
    };
    with("pvm_psend", |p| {
        if bad_tid(p, tid) {
            return PVM_BAD_PARAM;
        }
        p.send_to(tid, USER, tag, DATA_RAW, bytes);
        PVM_OK
    })
}

/// A received message becomes the active receive buffer.
fn deliver(p: &mut Pvm, m: Msg) -> c_int {
    p.bufs
        .set_received(Buf::received(m.src, m.tag, m.encoding, m.data))
}

fn receive(src: c_int, tag: c_int, deadline: Option<Instant>) -> c_int {
    with("pvm_recv", |p| match p.take(&user(src, tag), deadline) {
        Some(m) => deliver(p, m),
        None => 0,
    })
}

#[no_mangle]
pub extern "C" fn pvm_recv(tid: c_int, tag: c_int) -> c_int {
    receive(tid, tag, None)
}

#[no_mangle]
pub extern "C" fn pvm_nrecv(tid: c_int, tag: c_int) -> c_int {
    receive(tid, tag, Some(Instant::now()))
}

/// pvm_trecv: wait at most `tmout` (NULL: for ever).
///
/// # Safety
/// `tmout` is NULL or a valid timeval.
#[no_mangle]
pub unsafe extern "C" fn pvm_trecv(tid: c_int, tag: c_int, tmout: *const libc::timeval) -> c_int {
    // SAFETY: the caller's contract.
    let deadline = match unsafe { tmout.as_ref() } {
        None => None,
        Some(t) if t.tv_sec < 0 || t.tv_usec < 0 => return PVM_BAD_PARAM,
        Some(t) => Some(
            Instant::now()
                + Duration::from_secs(t.tv_sec.unsigned_abs())
                + Duration::from_micros(t.tv_usec.unsigned_abs()),
        ),
    };
    receive(tid, tag, deadline)
}

/// pvm_probe: the id of a buffer describing a matching message that has
/// arrived (for pvm_bufinfo), leaving the message to be received; 0 if
/// none has.
#[no_mangle]
pub extern "C" fn pvm_probe(tid: c_int, tag: c_int) -> c_int {
    with("pvm_probe", |p| {
        p.drain();
        let want = user(tid, tag);
        let Some(m) = p.queue.iter().find(|m| want(m)).cloned() else {
            return 0;
        };
        let id = p.bufs.make(Buf::received(m.src, m.tag, m.encoding, m.data));
        if let Some(old) = p.probe_buf.replace(id) {
            if old != p.bufs.rbuf && old != p.bufs.sbuf {
                p.bufs.free(old);
            }
        }
        id
    })
}

/// pvm_precv: receive straight into `buf` (at most `count` elements);
/// the message's source, tag and length in elements come back.
///
/// # Safety
/// `buf` has room for `count` elements; the out pointers are NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn pvm_precv(
    tid: c_int,
    tag: c_int,
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    rtid: *mut c_int,
    rtag: *mut c_int,
    rcount: *mut c_int,
) -> c_int {
    let (Some(size), Ok(n)) = (type_size(datatype), usize::try_from(count)) else {
        return PVM_BAD_PARAM;
    };
    if buf.is_null() && n > 0 {
        return PVM_BAD_PARAM;
    }
    with("pvm_precv", |p| {
        let Some(m) = p.take(&user(tid, tag), None) else {
            return PVM_SYS_ERR;
        };
        let len = m.data.len().min(n * size);
        // SAFETY: the caller's contract: room for count elements; the out
        // pointers NULL or writable.
        unsafe {
            std::ptr::copy_nonoverlapping(m.data.as_ptr(), buf.cast::<u8>(), len);
            if let Some(x) = rtid.as_mut() {
                *x = m.src;
            }
            if let Some(x) = rtag.as_mut() {
                *x = m.tag;
            }
            if let Some(x) = rcount.as_mut() {
                *x = crate::codes::count(m.data.len() / size);
            }
        }
        if m.data.len() > n * size {
            PVM_NO_MEM
        } else {
            PVM_OK
        }
    })
}
