//! pvm_initsend, pvm_mkbuf, pvm_freebuf, pvm_get/setsbuf, pvm_get/setrbuf,
//! pvm_bufinfo, and every pvm_pk* / pvm_upk* of pvm3.h.

use std::ffi::{c_char, c_double, c_float, c_int, c_long, c_short, c_uint, c_ulong, c_ushort};

use crate::codes::*;
use crate::task::with;

#[no_mangle]
pub extern "C" fn pvm_initsend(encoding: c_int) -> c_int {
    with("pvm_initsend", |p| p.bufs.init_send(encoding))
}

#[no_mangle]
pub extern "C" fn pvm_mkbuf(encoding: c_int) -> c_int {
    with("pvm_mkbuf", |p| {
        if !(DATA_DEFAULT..=DATA_IN_PLACE).contains(&encoding) {
            return PVM_BAD_PARAM;
        }
        p.bufs.make(crate::buffers::Buf::new(encoding))
    })
}

#[no_mangle]
pub extern "C" fn pvm_freebuf(id: c_int) -> c_int {
    with("pvm_freebuf", |p| p.bufs.free(id))
}

#[no_mangle]
pub extern "C" fn pvm_getsbuf() -> c_int {
    with("pvm_getsbuf", |p| p.bufs.sbuf)
}

#[no_mangle]
pub extern "C" fn pvm_getrbuf() -> c_int {
    with("pvm_getrbuf", |p| p.bufs.rbuf)
}

#[no_mangle]
pub extern "C" fn pvm_setsbuf(id: c_int) -> c_int {
    with("pvm_setsbuf", |p| p.bufs.set_active(id, true))
}

#[no_mangle]
pub extern "C" fn pvm_setrbuf(id: c_int) -> c_int {
    with("pvm_setrbuf", |p| p.bufs.set_active(id, false))
}

/// pvm_bufinfo: a buffer's length, tag and source.
///
/// # Safety
/// Each pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pvm_bufinfo(
    id: c_int,
    bytes: *mut c_int,
    tag: *mut c_int,
    tid: *mut c_int,
) -> c_int {
    with("pvm_bufinfo", |p| {
        if id <= 0 {
            return PVM_BAD_PARAM;
        }
        let Some(b) = p.bufs.get(id) else {
            return PVM_NO_SUCH_BUF;
        };
        let (len, t, s) = (count(b.data.len()), b.tag, b.src);
        // SAFETY: the caller's contract: NULL or writable.
        unsafe {
            if let Some(x) = bytes.as_mut() {
                *x = len;
            }
            if let Some(x) = tag.as_mut() {
                *x = t;
            }
            if let Some(x) = tid.as_mut() {
                *x = s;
            }
        }
        PVM_OK
    })
}

fn counts(n: c_int, stride: c_int) -> Option<(usize, usize)> {
    Some((
        usize::try_from(n).ok()?,
        usize::try_from(stride).ok().filter(|s| *s > 0)?,
    ))
}

/// Pack `n` elements of `T` at stride from `ptr` into the send buffer.
///
/// # Safety
/// `ptr` holds `(n - 1) * stride + 1` elements of `T`.
unsafe fn pk<T>(ptr: *const T, n: c_int, stride: c_int) -> c_int {
    let Some((n, s)) = counts(n, stride) else {
        return PVM_BAD_PARAM;
    };
    if ptr.is_null() && n > 0 {
        return PVM_BAD_PARAM;
    }
    with("pvm_pk", |p| match p.bufs.active(true) {
        Ok(b) => {
            // SAFETY: the caller's contract.
            unsafe { b.pack(ptr.cast(), n, s, std::mem::size_of::<T>()) };
            PVM_OK
        }
        Err(c) => c,
    })
}

/// Unpack `n` elements of `T` at stride from the receive buffer to `ptr`.
///
/// # Safety
/// `ptr` has room for `(n - 1) * stride + 1` elements of `T`.
unsafe fn upk<T>(ptr: *mut T, n: c_int, stride: c_int) -> c_int {
    let Some((n, s)) = counts(n, stride) else {
        return PVM_BAD_PARAM;
    };
    if ptr.is_null() && n > 0 {
        return PVM_BAD_PARAM;
    }
    with("pvm_upk", |p| match p.bufs.active(false) {
        // SAFETY: the caller's contract.
        Ok(b) => unsafe { b.unpack(ptr.cast(), n, s, std::mem::size_of::<T>()) },
        Err(c) => c,
    })
}

macro_rules! pack_pair {
    ($pk:ident, $upk:ident, $t:ty) => {
        /// Packs `n` values (every `stride`-th) into the active send buffer.
        ///
        /// # Safety
        /// `ptr` holds `(n - 1) * stride + 1` values.
        #[no_mangle]
        pub unsafe extern "C" fn $pk(ptr: *const $t, n: c_int, stride: c_int) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { pk(ptr, n, stride) }
        }

        /// Unpacks `n` values (to every `stride`-th) from the active receive buffer.
        ///
        /// # Safety
        /// `ptr` has room for `(n - 1) * stride + 1` values.
        #[no_mangle]
        pub unsafe extern "C" fn $upk(ptr: *mut $t, n: c_int, stride: c_int) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { upk(ptr, n, stride) }
        }
    };
}

pack_pair!(pvm_pkbyte, pvm_upkbyte, c_char);
pack_pair!(pvm_pkshort, pvm_upkshort, c_short);
pack_pair!(pvm_pkushort, pvm_upkushort, c_ushort);
pack_pair!(pvm_pkint, pvm_upkint, c_int);
pack_pair!(pvm_pkuint, pvm_upkuint, c_uint);
pack_pair!(pvm_pklong, pvm_upklong, c_long);
pack_pair!(pvm_pkulong, pvm_upkulong, c_ulong);
pack_pair!(pvm_pkfloat, pvm_upkfloat, c_float);
pack_pair!(pvm_pkdouble, pvm_upkdouble, c_double);

/// pvm_pkcplx: `n` complex numbers (pairs of floats); a stride counts
/// complex numbers, so each is packed whole.
///
/// # Safety
/// `ptr` holds `(n - 1) * stride + 1` pairs.
#[no_mangle]
pub unsafe extern "C" fn pvm_pkcplx(ptr: *const c_float, n: c_int, stride: c_int) -> c_int {
    // SAFETY: the caller's contract, as pairs of two floats.
    unsafe { pk(ptr.cast::<[c_float; 2]>(), n, stride) }
}

/// pvm_upkcplx.
///
/// # Safety
/// `ptr` has room for `(n - 1) * stride + 1` pairs.
#[no_mangle]
pub unsafe extern "C" fn pvm_upkcplx(ptr: *mut c_float, n: c_int, stride: c_int) -> c_int {
    // SAFETY: the caller's contract, as pairs of two floats.
    unsafe { upk(ptr.cast::<[c_float; 2]>(), n, stride) }
}

/// pvm_pkdcplx.
///
/// # Safety
/// `ptr` holds `(n - 1) * stride + 1` pairs.
#[no_mangle]
pub unsafe extern "C" fn pvm_pkdcplx(ptr: *const c_double, n: c_int, stride: c_int) -> c_int {
    // SAFETY: the caller's contract, as pairs of two doubles.
    unsafe { pk(ptr.cast::<[c_double; 2]>(), n, stride) }
}

/// pvm_upkdcplx.
///
/// # Safety
/// `ptr` has room for `(n - 1) * stride + 1` pairs.
#[no_mangle]
pub unsafe extern "C" fn pvm_upkdcplx(ptr: *mut c_double, n: c_int, stride: c_int) -> c_int {
    // SAFETY: the caller's contract, as pairs of two doubles.
    unsafe { upk(ptr.cast::<[c_double; 2]>(), n, stride) }
}

/// pvm_pkstr: the string's length (with its NUL) and its bytes.
///
/// # Safety
/// `s` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn pvm_pkstr(s: *const c_char) -> c_int {
    if s.is_null() {
        return PVM_BAD_PARAM;
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { std::ffi::CStr::from_ptr(s) }.to_bytes_with_nul();
    // Its length is packed as an int first.
    let Ok(len) = c_int::try_from(bytes.len()) else {
        return PVM_NO_MEM;
    };
    with("pvm_pkstr", |p| match p.bufs.active(true) {
        Ok(b) => {
            // SAFETY: one int, then the string's bytes, both alive now; a
            // string is copied even into an in-place buffer (PVM does too).
            unsafe {
                let enc = b.encoding;
                b.encoding = DATA_RAW;
                b.pack((&len as *const c_int).cast(), 1, 1, 4);
                b.pack(bytes.as_ptr(), bytes.len(), 1, 1);
                b.encoding = enc;
            }
            PVM_OK
        }
        Err(c) => c,
    })
}

/// pvm_upkstr: the next string, with its NUL, into `s`.
///
/// # Safety
/// `s` has room for the string.
#[no_mangle]
pub unsafe extern "C" fn pvm_upkstr(s: *mut c_char) -> c_int {
    if s.is_null() {
        return PVM_BAD_PARAM;
    }
    with("pvm_upkstr", |p| {
        let b = match p.bufs.active(false) {
            Ok(b) => b,
            Err(c) => return c,
        };
        let mut len: c_int = 0;
        let at = b.pos;
        // SAFETY: one int into a local.
        let r = unsafe { b.unpack((&mut len as *mut c_int).cast(), 1, 1, 4) };
        if r != PVM_OK {
            return r;
        }
        let Ok(n) = usize::try_from(len) else {
            b.pos = at;
            return PVM_BAD_MSG;
        };
        // SAFETY: the caller's contract: room for the string.
        let r = unsafe { b.unpack(s.cast(), n, 1, 1) };
        if r != PVM_OK {
            b.pos = at;
        }
        r
    })
}
