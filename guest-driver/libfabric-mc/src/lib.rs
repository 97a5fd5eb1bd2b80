//! libfabric-mc: a libfabric provider named `mc` for the emulated Memory
//! Channel, on UMP's channels (seed 004, "Universal Message Passing" and
//! "Digital MPI": MPI's device put on UMP). Open MPI's `ofi` MTL and any
//! other libfabric program take it unchanged: reliable datagram endpoints
//! (FI_EP_RDM) with FI_TAGGED and FI_MSG, completion queues, address
//! vectors, manual progress. docs/mpi.md is the guide.
//!
//! The shape: `fi_mc.c` holds libfabric's fid objects and their operation
//! tables (plain C structures of function pointers, as libfabric's
//! provider interface is written), and calls the `mcfi_*` functions here
//! for everything else. The matching, the progress and the errors live in
//! Rust on the `ump` crate.
//!
//! Files, one job each: `domain` (the process's node), `av` (address
//! vectors), `cq` (completion queues), `ep` (endpoints: matching and
//! progress), `wire` (a message's bytes on a channel), and this file, the
//! C surface `fi_mc.c` calls.

mod av;
mod cq;
mod domain;
mod ep;
mod wire;

use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex};

pub use av::Av;
pub use cq::{Cq, McComp};
pub use domain::{domain, node_of, Domain};
pub use ep::{Ep, RecvSpec, SendSpec, FI_ADDR_UNSPEC};
pub use wire::INLINE;

pub const FI_EOPBADSTATE: i64 = 258;
pub const FI_EAVAIL: i64 = 259;
pub const FI_ENOCQ: i64 = 263;
pub const FI_ETRUNC: i64 = 265;

static LAST: Mutex<String> = Mutex::new(String::new());

fn remember(why: &str) {
    *LAST.lock().unwrap_or_else(|p| p.into_inner()) = why.to_string();
}

/// Copy `s` into C's buffer, NUL-terminated and cut to fit.
///
/// # Safety
/// `buf` is NULL or has `len` writable bytes.
unsafe fn to_c(s: &str, buf: *mut c_char, len: usize) {
    if buf.is_null() || len == 0 {
        return;
    }
    let n = s.len().min(len - 1);
    // SAFETY: `buf` has `len` > n bytes (the caller's contract).
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
}

/// A provider return code (0, a count, or a negated errno or FI_* code)
/// as the C side's `ssize_t`, which on the 64-bit targets here holds any.
fn ret(code: i64) -> isize {
    isize::try_from(code).expect("an i64 fits a 64-bit isize")
}

/// A handle C holds: an `Arc` turned into a pointer.
///
/// # Safety
/// `p` came from `Arc::into_raw` of a `T` and was not released.
unsafe fn borrow<'a, T>(p: *const T) -> Option<&'a T> {
    // SAFETY: the caller's contract.
    unsafe { p.as_ref() }
}

/// Take back a handle.
///
/// # Safety
/// As [`borrow`]; the handle is not used again.
unsafe fn release<T>(p: *const T) {
    if !p.is_null() {
        // SAFETY: the caller's contract: one Arc reference given to C.
        drop(unsafe { Arc::from_raw(p) });
    }
}

/// Open this process's node (once; later calls share it). NULL on failure,
/// with the reason in `why`, printed on stderr too.
///
/// # Safety
/// `why` is NULL or has `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn mcfi_domain_open(why: *mut c_char, len: usize) -> *const Domain {
    match domain() {
        Ok(d) => Arc::into_raw(d),
        Err(e) => {
            eprintln!("libfabric-mc: {e}");
            remember(&e);
            // SAFETY: the caller's contract.
            unsafe { to_c(&e, why, len) };
            std::ptr::null()
        }
    }
}

/// # Safety
/// `d` is a handle from `mcfi_domain_open`, not used again.
#[no_mangle]
pub unsafe extern "C" fn mcfi_domain_close(d: *const Domain) {
    // SAFETY: the caller's contract.
    unsafe { release(d) }
}

#[no_mangle]
pub extern "C" fn mcfi_av_open() -> *const Av {
    Arc::into_raw(Arc::new(Av::default()))
}

/// # Safety
/// `av` is a handle from `mcfi_av_open`, not used again.
#[no_mangle]
pub unsafe extern "C" fn mcfi_av_close(av: *const Av) {
    // SAFETY: the caller's contract.
    unsafe { release(av) }
}

/// Insert `count` addresses; `out` (if not NULL) gets each one's fi_addr,
/// FI_ADDR_NOTAVAIL for one that is not an address of this provider.
/// Returns how many were inserted.
///
/// # Safety
/// `av` a live handle; `addrs` has `count` readable u64s; `out` is NULL or
/// has `count` writable u64s.
#[no_mangle]
pub unsafe extern "C" fn mcfi_av_insert(
    av: *const Av,
    addrs: *const u64,
    count: usize,
    out: *mut u64,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(av) = (unsafe { borrow(av) }) else {
        return -(libc::EINVAL);
    };
    if addrs.is_null() && count > 0 {
        return -(libc::EINVAL);
    }
    // SAFETY: `count` readable u64s at `addrs` (the caller's contract);
    // read unaligned, as an address buffer need not be aligned.
    let a: Vec<u64> = (0..count)
        .map(|i| unsafe { addrs.add(i).read_unaligned() })
        .collect();
    let mut got = vec![None; count];
    let n = av.insert(&a, &mut got);
    if !out.is_null() {
        for (i, g) in got.iter().enumerate() {
            // SAFETY: `count` writable u64s at `out`.
            unsafe { out.add(i).write_unaligned(g.unwrap_or(FI_ADDR_UNSPEC)) };
        }
    }
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

/// # Safety
/// `av` a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcfi_av_remove(av: *const Av, fi: u64) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { borrow(av) } {
        Some(av) if av.remove(fi) => 0,
        _ => -(libc::EINVAL),
    }
}

/// # Safety
/// `av` a live handle; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn mcfi_av_lookup(av: *const Av, fi: u64, out: *mut u64) -> c_int {
    // SAFETY: the caller's contract.
    match (unsafe { borrow(av) }).and_then(|av| av.lookup(fi)) {
        Some(a) if !out.is_null() => {
            // SAFETY: `out` writable (the caller's contract).
            unsafe { out.write_unaligned(a) };
            0
        }
        _ => -(libc::ENOENT),
    }
}

#[no_mangle]
pub extern "C" fn mcfi_cq_open() -> *const Cq {
    Arc::into_raw(Arc::new(Cq::default()))
}

/// # Safety
/// `cq` a handle from `mcfi_cq_open`, not used again.
#[no_mangle]
pub unsafe extern "C" fn mcfi_cq_close(cq: *const Cq) {
    // SAFETY: the caller's contract.
    unsafe { release(cq) }
}

/// Up to `count` completions into `out`: how many, or -FI_EAGAIN,
/// or -FI_EAVAIL.
///
/// # Safety
/// `cq` a live handle; `out` has `count` writable entries.
#[no_mangle]
pub unsafe extern "C" fn mcfi_cq_read(cq: *const Cq, out: *mut McComp, count: usize) -> isize {
    // SAFETY: the caller's contract.
    let Some(cq) = (unsafe { borrow(cq) }) else {
        return -(libc::EINVAL as isize);
    };
    if out.is_null() || count == 0 {
        return -(libc::EINVAL as isize);
    }
    // SAFETY: `count` writable entries at `out`.
    let out = unsafe { std::slice::from_raw_parts_mut(out, count) };
    match cq.read(out) {
        Ok(n) => isize::try_from(n).expect("at most `count` entries, a slice's length"),
        Err(e) => -ret(e),
    }
}

/// One error completion into `out`: 1, or -FI_EAGAIN.
///
/// # Safety
/// `cq` a live handle; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn mcfi_cq_readerr(cq: *const Cq, out: *mut McComp) -> isize {
    // SAFETY: the caller's contract.
    let Some(cq) = (unsafe { borrow(cq) }) else {
        return -(libc::EINVAL as isize);
    };
    match cq.read_err() {
        Some(c) if !out.is_null() => {
            // SAFETY: `out` writable.
            unsafe { out.write(c) };
            1
        }
        _ => -(libc::EAGAIN as isize),
    }
}

/// A second `Arc` of a handle C holds.
///
/// # Safety
/// As [`borrow`], and `p` is not NULL.
unsafe fn share<T>(p: *const T) -> Arc<T> {
    // SAFETY: `p` came from Arc::into_raw and is live (the caller's
    // contract): one more reference, then taken as an Arc.
    unsafe {
        Arc::increment_strong_count(p);
        Arc::from_raw(p)
    }
}

/// A new endpoint of the domain.
///
/// # Safety
/// `d` a live domain handle.
#[no_mangle]
pub unsafe extern "C" fn mcfi_ep_open(d: *const Domain) -> *const Ep {
    if d.is_null() {
        return std::ptr::null();
    }
    // SAFETY: the caller's contract.
    Arc::into_raw(Ep::open(unsafe { share(d) }))
}

/// # Safety
/// `ep` a handle from `mcfi_ep_open`, not used again.
#[no_mangle]
pub unsafe extern "C" fn mcfi_ep_close(ep: *const Ep) {
    // SAFETY: the caller's contract.
    if let Some(e) = unsafe { borrow(ep) } {
        e.close();
    }
    // SAFETY: the caller's contract.
    unsafe { release(ep) }
}

/// # Safety
/// `ep` and `cq` live handles.
#[no_mangle]
pub unsafe extern "C" fn mcfi_ep_bind_cq(
    ep: *const Ep,
    cq: *const Cq,
    transmit: c_int,
    recv: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    let (Some(e), false) = (unsafe { borrow(ep) }, cq.is_null()) else {
        return -(libc::EINVAL);
    };
    // SAFETY: the caller's contract.
    e.bind_cq(&unsafe { share(cq) }, transmit != 0, recv != 0);
    0
}

/// # Safety
/// `ep` and `av` live handles.
#[no_mangle]
pub unsafe extern "C" fn mcfi_ep_bind_av(ep: *const Ep, av: *const Av) -> c_int {
    // SAFETY: the caller's contract.
    let (Some(e), false) = (unsafe { borrow(ep) }, av.is_null()) else {
        return -(libc::EINVAL);
    };
    // SAFETY: the caller's contract.
    e.bind_av(&unsafe { share(av) });
    0
}

/// # Safety
/// `ep` a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcfi_ep_enable(ep: *const Ep) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { borrow(ep) } {
        Some(e) => e
            .enable()
            .map_or_else(|e| -c_int::try_from(e).expect("an FI_* code"), |_| 0),
        None => -(libc::EINVAL),
    }
}

/// The endpoint's address (8 bytes).
///
/// # Safety
/// `ep` a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcfi_ep_addr(ep: *const Ep) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { borrow(ep) }.map_or(0, |e| e.addr)
}

/// A send as C describes it (every field 64 bits: no padding to agree on).
#[repr(C)]
pub struct McSend {
    pub ctx: u64,
    pub buf: u64,
    pub len: u64,
    pub dest: u64,
    pub tag: u64,
    pub data: u64,
    pub tagged: u64,
    pub has_data: u64,
    pub completion: u64,
    pub inject: u64,
}

/// A receive as C describes it.
#[repr(C)]
pub struct McRecv {
    pub ctx: u64,
    pub buf: u64,
    pub cap: u64,
    pub src: u64,
    pub tag: u64,
    pub ignore: u64,
    pub tagged: u64,
    pub completion: u64,
    pub peek: u64,
    pub claim: u64,
    pub discard: u64,
}

/// # Safety
/// `ep` a live handle; `s` readable; its buffer as fi_send requires.
#[no_mangle]
pub unsafe extern "C" fn mcfi_ep_send(ep: *const Ep, s: *const McSend) -> isize {
    // SAFETY: the caller's contract.
    let (Some(e), Some(s)) = (unsafe { borrow(ep) }, unsafe { s.as_ref() }) else {
        return -(libc::EINVAL as isize);
    };
    if s.buf == 0 && s.len > 0 {
        return -(libc::EINVAL as isize);
    }
    ret(e.send(SendSpec {
        ctx: s.ctx,
        buf: s.buf,
        len: s.len,
        dest: s.dest,
        tagged: s.tagged != 0,
        tag: s.tag,
        data: (s.has_data != 0).then_some(s.data),
        completion: s.completion != 0,
        inject: s.inject != 0,
    }))
}

/// # Safety
/// `ep` a live handle; `r` readable; its buffer as fi_recv requires.
#[no_mangle]
pub unsafe extern "C" fn mcfi_ep_recv(ep: *const Ep, r: *const McRecv) -> isize {
    // SAFETY: the caller's contract.
    let (Some(e), Some(r)) = (unsafe { borrow(ep) }, unsafe { r.as_ref() }) else {
        return -(libc::EINVAL as isize);
    };
    if r.buf == 0 && r.cap > 0 {
        return -(libc::EINVAL as isize);
    }
    ret(e.recv(
        RecvSpec {
            ctx: r.ctx,
            buf: r.buf,
            cap: r.cap,
            src: r.src,
            tagged: r.tagged != 0,
            tag: r.tag,
            ignore: r.ignore,
            completion: r.completion != 0,
        },
        r.peek != 0,
        r.claim != 0,
        r.discard != 0,
    ))
}

/// # Safety
/// `ep` a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcfi_ep_cancel(ep: *const Ep, ctx: u64) -> isize {
    // SAFETY: the caller's contract.
    unsafe { borrow(ep) }.map_or(-(libc::EINVAL as isize), |e| ret(e.cancel(ctx)))
}

/// The last failure this provider reported, for fi_cq_strerror.
///
/// # Safety
/// `buf` is NULL or has `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn mcfi_last_error(buf: *mut c_char, len: usize) {
    let s = LAST.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // SAFETY: the caller's contract.
    unsafe { to_c(&s, buf, len) }
}

#[cfg(mc_fi_c)]
extern "C" {
    fn mc_fi_prov_ini() -> *mut std::ffi::c_void;
}

/// libfabric's entry point of an external provider (`FI_EXT_INI`): the
/// provider's description, from fi_mc.c.
#[cfg(mc_fi_c)]
#[no_mangle]
pub extern "C" fn fi_prov_ini() -> *mut std::ffi::c_void {
    // SAFETY: returns the address of a static; no arguments, no state.
    unsafe { mc_fi_prov_ini() }
}

pub(crate) fn record_failure(why: &str) {
    remember(why);
}
