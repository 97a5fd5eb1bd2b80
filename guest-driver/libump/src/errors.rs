//! The codes of `ump.h`, why the last call failed (per thread), and
//! `ump_strerror`/`ump_perror`.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr};

use ump_rs::UmpError;

pub const UMP_SUCCESS: c_int = 0;
pub const UMP_EBADPARM: c_int = 1;
pub const UMP_ENOINIT: c_int = 2;
pub const UMP_ENOCHANNEL: c_int = 3;
pub const UMP_EEXISTS: c_int = 4;
pub const UMP_ECLOSED: c_int = 5;
pub const UMP_ETOOSMALL: c_int = 6;
pub const UMP_EDAMAGED: c_int = 7;
pub const UMP_ETIMEOUT: c_int = 8;
pub const UMP_ENOSPACE: c_int = 9;
pub const UMP_EUNREACHABLE: c_int = 10;
pub const UMP_EMC: c_int = 11;
pub const UMP_EAGAIN: c_int = 12;

pub(crate) const UMP_ANY: c_int = -1;

thread_local! {
    pub(crate) static LAST: RefCell<String> = const { RefCell::new(String::new()) };
}

pub(crate) fn fail(code: c_int, why: impl Into<String>) -> c_int {
    let why = why.into();
    log::debug!("libump: {}: {why}", describe(code));
    LAST.with(|l| *l.borrow_mut() = why);
    code
}

pub(crate) fn code_of(e: &UmpError) -> c_int {
    match e {
        UmpError::Mc(_)
        | UmpError::Thread(_)
        | UmpError::Directory(_)
        | UmpError::LostPacket { .. }
        | UmpError::OwnChangeLost { .. }
        | UmpError::ShmFile(_) => UMP_EMC,
        UmpError::Config(_) | UmpError::SameEndpoint(_) => UMP_EBADPARM,
        UmpError::NoSuchChannel(_) => UMP_ENOCHANNEL,
        UmpError::ChannelExists { .. } | UmpError::AlreadyListening(_) => UMP_EEXISTS,
        UmpError::Unreachable { .. } => UMP_EUNREACHABLE,
        UmpError::Closed(_) => UMP_ECLOSED,
        UmpError::BufferTooSmall { .. } => UMP_ETOOSMALL,
        UmpError::Damaged { .. } => UMP_EDAMAGED,
        UmpError::Timeout { .. } => UMP_ETIMEOUT,
        UmpError::NoSpace(_) => UMP_ENOSPACE,
    }
}

pub(crate) fn err(e: UmpError) -> c_int {
    fail(code_of(&e), mc_api::ErrorChain(&e).to_string())
}

pub(crate) fn describe(code: c_int) -> &'static str {
    match code {
        UMP_SUCCESS => "success",
        UMP_EBADPARM => "bad parameter",
        UMP_ENOINIT => "UMP could not be brought up",
        UMP_ENOCHANNEL => "no such channel",
        UMP_EEXISTS => "exists already",
        UMP_ECLOSED => "the peer closed the channel",
        UMP_ETOOSMALL => "the buffer is smaller than the message",
        UMP_EDAMAGED => "a message was damaged or lost on the network",
        UMP_ETIMEOUT => "timed out",
        UMP_ENOSPACE => "no room",
        UMP_EUNREACHABLE => "the transport cannot reach the peer",
        UMP_EMC => "Memory Channel failure",
        UMP_EAGAIN => "not yet",
        _ => "unknown UMP code",
    }
}

/// `ump_strerror`: a static string.
#[no_mangle]
pub extern "C" fn ump_strerror(code: c_int) -> *const c_char {
    let s: &'static CStr = match code {
        UMP_SUCCESS => c"success",
        UMP_EBADPARM => c"bad parameter",
        UMP_ENOINIT => c"UMP could not be brought up",
        UMP_ENOCHANNEL => c"no such channel",
        UMP_EEXISTS => c"exists already",
        UMP_ECLOSED => c"the peer closed the channel",
        UMP_ETOOSMALL => c"the buffer is smaller than the message",
        UMP_EDAMAGED => c"a message was damaged or lost on the network",
        UMP_ETIMEOUT => c"timed out",
        UMP_ENOSPACE => c"no room",
        UMP_EUNREACHABLE => c"the transport cannot reach the peer",
        UMP_EMC => c"Memory Channel failure",
        UMP_EAGAIN => c"not yet",
        _ => c"unknown UMP code",
    };
    s.as_ptr()
}

/// `ump_perror`: `prefix: meaning (reason)` on stderr.
///
/// # Safety
/// `prefix` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ump_perror(prefix: *const c_char, code: c_int) {
    let p = if prefix.is_null() {
        String::new()
    } else {
        // SAFETY: NUL-terminated (the caller's contract).
        format!("{}: ", unsafe { CStr::from_ptr(prefix) }.to_string_lossy())
    };
    let why = LAST.with(|l| l.borrow().clone());
    if why.is_empty() || code == UMP_SUCCESS {
        eprintln!("{p}{}", describe(code));
    } else {
        eprintln!("{p}{} ({why})", describe(code));
    }
}
