//! The message calls ("three functions perform all message
//! communications"): `ump_read`, `ump_write`, `ump_nbread`, `ump_nbwrite`,
//! `ump_test`, `ump_complete`, `ump_mcast`, and the C buffers they take.

use std::ffi::c_int;
use std::sync::Arc;
use std::time::Duration;

use crate::errors::*;
use crate::handles::*;

/// A C buffer as a byte slice: empty for length 0 (any pointer), else
/// NULL is refused.
///
/// # Safety
/// `p` is valid for `len` bytes.
pub(crate) unsafe fn bytes<'a>(p: *const u8, len: usize) -> Result<&'a [u8], c_int> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(fail(UMP_EBADPARM, "NULL buffer"));
    }
    // SAFETY: non-NULL, valid for len bytes (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// # Safety
/// As [`bytes`], writable.
pub(crate) unsafe fn bytes_mut<'a>(p: *mut u8, len: usize) -> Result<&'a mut [u8], c_int> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(fail(UMP_EBADPARM, "NULL buffer"));
    }
    // SAFETY: non-NULL, valid and writable for len bytes (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// `ump_read`.
///
/// # Safety
/// `t` a live task; `buf` valid for `size` bytes; `len` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ump_read(
    t: *mut UmpTask,
    ch: ump_channel_t,
    buf: *mut u8,
    size: usize,
    len: *mut usize,
) -> c_int {
    // SAFETY: the caller's contract.
    let t = try_code!(unsafe { task(t) });
    let ch = try_code!(channel(ch));
    // SAFETY: the caller's contract.
    let buf = try_code!(unsafe { bytes_mut(buf, size) });
    match t.ump.read(ch, buf) {
        Ok(n) => {
            if !len.is_null() {
                // SAFETY: checked non-NULL; the caller's contract.
                unsafe { *len = n };
            }
            UMP_SUCCESS
        }
        Err(e) => err(e),
    }
}

/// `ump_write`.
///
/// # Safety
/// `t` a live task; `buf` valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ump_write(
    t: *mut UmpTask,
    ch: ump_channel_t,
    buf: *const u8,
    len: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    let t = try_code!(unsafe { task(t) });
    let ch = try_code!(channel(ch));
    // SAFETY: the caller's contract.
    let data = try_code!(unsafe { bytes(buf, len) });
    t.ump.write(ch, data).map_or_else(err, |_| UMP_SUCCESS)
}

/// `ump_nbread`.
///
/// # Safety
/// `t` a live task; `buf` valid for `size` bytes; `copied`, `remaining`
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ump_nbread(
    t: *mut UmpTask,
    ch: ump_channel_t,
    buf: *mut u8,
    size: usize,
    min: usize,
    copied: *mut usize,
    remaining: *mut usize,
) -> c_int {
    // SAFETY: the caller's contract.
    let t = try_code!(unsafe { task(t) });
    let ch = try_code!(channel(ch));
    // SAFETY: the caller's contract.
    let buf = try_code!(unsafe { bytes_mut(buf, size) });
    match t.ump.nbread(ch, buf, min) {
        Ok(Some(p)) => {
            // SAFETY: each checked non-NULL; the caller's contract.
            unsafe {
                if !copied.is_null() {
                    *copied = p.copied;
                }
                if !remaining.is_null() {
                    // At most the message's length, which is in memory.
                    *remaining = usize::try_from(p.remaining).unwrap_or(usize::MAX);
                }
            }
            UMP_SUCCESS
        }
        Ok(None) => fail(UMP_EAGAIN, "no message yet"),
        Err(e) => err(e),
    }
}

/// The C caller's buffer of a non-blocking write.
pub(crate) struct CBuffer {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the header's contract: the buffer stays valid and unchanged
// until the write is complete, and only the background writer reads it.
unsafe impl Send for CBuffer {}
// SAFETY: as for Send: read-only while shared.
unsafe impl Sync for CBuffer {}

impl AsRef<[u8]> for CBuffer {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: non-NULL (checked at ump_nbwrite) and valid for len bytes
        // until the write completes (the header's contract).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// `ump_nbwrite`.
///
/// # Safety
/// `t` a live task; `buf` valid and unchanged for `len` bytes until the
/// request is done; `req` writable.
#[no_mangle]
pub unsafe extern "C" fn ump_nbwrite(
    t: *mut UmpTask,
    ch: ump_channel_t,
    buf: *const u8,
    len: usize,
    req: *mut *mut UmpRequest,
) -> c_int {
    // SAFETY: the caller's contract.
    let t = try_code!(unsafe { task(t) });
    let ch = try_code!(channel(ch));
    if req.is_null() || (buf.is_null() && len > 0) {
        return fail(UMP_EBADPARM, "NULL buffer or request pointer");
    }
    match t.ump.nbwrite(ch, Arc::new(CBuffer { ptr: buf, len })) {
        Ok(pending) => {
            // SAFETY: checked non-NULL; the caller's contract.
            unsafe { *req = Box::into_raw(Box::new(UmpRequest { pending })) };
            UMP_SUCCESS
        }
        Err(e) => err(e),
    }
}

/// `ump_test`: whether a started write is done (it is not freed).
///
/// # Safety
/// `r` a live request.
#[no_mangle]
pub unsafe extern "C" fn ump_test(r: *mut UmpRequest) -> c_int {
    // SAFETY: the caller's contract.
    let Some(r) = (unsafe { r.as_ref() }) else {
        return fail(UMP_EBADPARM, "NULL request");
    };
    if !r.pending.is_done() {
        return UMP_EAGAIN;
    }
    match r.pending.wait(Duration::ZERO) {
        Ok(_) => UMP_SUCCESS,
        Err(e) => err(e),
    }
}

/// `ump_complete`: wait for a started write, free the request.
///
/// # Safety
/// `r` a live request; freed (not to be used again).
#[no_mangle]
pub unsafe extern "C" fn ump_complete(r: *mut UmpRequest) -> c_int {
    if r.is_null() {
        return fail(UMP_EBADPARM, "NULL request");
    }
    // SAFETY: a live request (the caller's contract), freed once.
    let r = unsafe { Box::from_raw(r) };
    loop {
        match r.pending.wait(Duration::from_secs(1)) {
            Ok(true) => return UMP_SUCCESS,
            Ok(false) => {}
            Err(e) => return err(e),
        }
    }
}

/// `ump_mcast`.
///
/// # Safety
/// `t` a live task; `chs` valid for `count` channels; `buf` for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn ump_mcast(
    t: *mut UmpTask,
    chs: *const ump_channel_t,
    count: c_int,
    buf: *const u8,
    len: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    let t = try_code!(unsafe { task(t) });
    let Ok(n) = usize::try_from(count) else {
        return fail(UMP_EBADPARM, format!("{count} channels"));
    };
    if n > 0 && chs.is_null() {
        return fail(UMP_EBADPARM, "NULL channel list");
    }
    let list = if n == 0 {
        &[][..]
    } else {
        // SAFETY: non-NULL, valid for count channels (the caller's contract).
        unsafe { std::slice::from_raw_parts(chs, n) }
    };
    let mut ids = Vec::with_capacity(n);
    for &c in list {
        ids.push(try_code!(channel(c)));
    }
    // SAFETY: the caller's contract.
    let data = try_code!(unsafe { bytes(buf, len) });
    t.ump.mcast(&ids, data).map_or_else(err, |_| UMP_SUCCESS)
}
