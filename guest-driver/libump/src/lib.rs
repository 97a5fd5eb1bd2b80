//! libump: UMP (seed 004, Table 3) for C programs, the calls of
//! `include/ump.h` over the `ump` crate. It links libimc in, so the
//! TruCluster calls and UMP share the process's one adapter (opened by
//! libimc from the environment on first use).
//!
//! A task is a heap object the C program holds by pointer; a started
//! non-blocking write is another. Every call checks its pointers, records
//! why it failed (for `ump_perror`) and returns a code of the header.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_long, CStr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ump_rs::{ChannelId, Config, Event, Node, PendingWrite, Transport, Ump, UmpError};

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

const UMP_ANY: c_int = -1;

thread_local! {
    static LAST: RefCell<String> = const { RefCell::new(String::new()) };
}

fn fail(code: c_int, why: impl Into<String>) -> c_int {
    let why = why.into();
    log::debug!("libump: {}: {why}", describe(code));
    LAST.with(|l| *l.borrow_mut() = why);
    code
}

fn code_of(e: &UmpError) -> c_int {
    match e {
        UmpError::Mc(_) | UmpError::Thread(_) | UmpError::Directory(_) => UMP_EMC,
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

fn err(e: UmpError) -> c_int {
    fail(code_of(&e), e.to_string())
}

fn describe(code: c_int) -> &'static str {
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

/// The node's UMP, brought up by the first `ump_init`.
fn node() -> Result<&'static Arc<Node>, c_int> {
    static NODE: OnceLock<Result<Arc<Node>, String>> = OnceLock::new();
    let r = NODE.get_or_init(|| {
        let mc = imc::memory_channel()?;
        Node::open(&mc, Config::from_env()).map_err(|e| format!("bringing UMP up: {e}"))
    });
    match r {
        Ok(n) => Ok(n),
        Err(why) => Err(fail(UMP_ENOINIT, why.clone())),
    }
}

/// A task, as C holds it.
pub struct UmpTask {
    ump: Ump,
}

/// A started non-blocking write, as C holds it.
pub struct UmpRequest {
    pending: PendingWrite,
}

fn transport(t: c_int) -> Result<Transport, c_int> {
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

fn channel(c: ump_channel_t) -> Result<ChannelId, c_int> {
    u32::try_from(c)
        .map(ChannelId)
        .map_err(|_| fail(UMP_ENOCHANNEL, format!("channel {c}")))
}

#[allow(non_camel_case_types)]
type ump_channel_t = c_int;

/// Turn a `Result` of codes into the code.
macro_rules! try_code {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(c) => return c,
        }
    };
}

/// The task behind a C pointer.
///
/// # Safety
/// `t` is NULL or a pointer `ump_init` returned and `ump_exit` has not
/// freed.
unsafe fn task<'a>(t: *mut UmpTask) -> Result<&'a UmpTask, c_int> {
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
            unsafe { *ch = c.0 as c_int };
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
    let timeout = if timeout_us < 0 {
        t.ump.node().config().timeout
    } else {
        Duration::from_micros(timeout_us as u64)
    };
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
                    channel: c.0 as c_int,
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

/// A C buffer as a byte slice: empty for length 0 (any pointer), else
/// NULL is refused.
///
/// # Safety
/// `p` is valid for `len` bytes.
unsafe fn bytes<'a>(p: *const u8, len: usize) -> Result<&'a [u8], c_int> {
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
unsafe fn bytes_mut<'a>(p: *mut u8, len: usize) -> Result<&'a mut [u8], c_int> {
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
                    *remaining = p.remaining as usize;
                }
            }
            UMP_SUCCESS
        }
        Ok(None) => fail(UMP_EAGAIN, "no message yet"),
        Err(e) => err(e),
    }
}

/// The C caller's buffer of a non-blocking write.
struct CBuffer {
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
            nodes: i.nodes as c_int,
            task: i.task as c_int,
            channels: i.channels.len() as c_int,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// ump.h is kept by hand: every code there has the value the library
    /// returns.
    #[test]
    fn the_headers_codes_are_the_librarys() {
        let h = include_str!("../include/ump.h");
        let value = |name: &str| -> c_int {
            let line = h
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} is not in ump.h"));
            line.split_whitespace()
                .nth(2)
                .unwrap()
                .trim_matches(['(', ')'])
                .parse()
                .unwrap()
        };
        for (name, v) in [
            ("UMP_SUCCESS", UMP_SUCCESS),
            ("UMP_EBADPARM", UMP_EBADPARM),
            ("UMP_ENOINIT", UMP_ENOINIT),
            ("UMP_ENOCHANNEL", UMP_ENOCHANNEL),
            ("UMP_EEXISTS", UMP_EEXISTS),
            ("UMP_ECLOSED", UMP_ECLOSED),
            ("UMP_ETOOSMALL", UMP_ETOOSMALL),
            ("UMP_EDAMAGED", UMP_EDAMAGED),
            ("UMP_ETIMEOUT", UMP_ETIMEOUT),
            ("UMP_ENOSPACE", UMP_ENOSPACE),
            ("UMP_EUNREACHABLE", UMP_EUNREACHABLE),
            ("UMP_EMC", UMP_EMC),
            ("UMP_EAGAIN", UMP_EAGAIN),
            ("UMP_ANY", UMP_ANY),
            ("UMP_AUTO", 0),
            ("UMP_SHM", 1),
            ("UMP_MC", 2),
            ("UMP_EV_OPENED", 1),
            ("UMP_EV_MESSAGE", 2),
            ("UMP_EV_CLOSED", 3),
        ] {
            assert_eq!(value(name), v, "{name}");
            if name.starts_with("UMP_E") || name == "UMP_SUCCESS" {
                assert_ne!(describe(v), "unknown UMP code", "{name}");
            }
        }
        for t in 0..3 {
            assert!(transport(t).is_ok());
        }
        assert_eq!(transport(3).unwrap_err(), UMP_EBADPARM);
    }
}
