//! Dynamic groups. Membership (join, leave, instance numbers, freezing)
//! is the relay's table, as public PVM's group server's; the collective
//! operations (pvm_barrier, pvm_bcast, pvm_reduce, pvm_scatter,
//! pvm_gather) are messages between the members over UMP's channels, of
//! kinds the program's pvm_recv never matches (seed 004: group functions
//! on UMP). A frozen group's members are asked once and kept.

use std::ffi::{c_char, c_int, c_void, CStr};

use pvm_relay::{Reply, Request};

use crate::codes::*;
use crate::task::{with, Pvm};
use crate::wire::{self, Msg, BARRIER, GATHER, REDUCE, RELEASE, SCATTER};

/// A reduction function of pvm_reduce.
pub type ReduceFn =
    Option<unsafe extern "C" fn(*mut c_int, *mut c_void, *mut c_void, *mut c_int, *mut c_int)>;

fn group_name(g: *const c_char) -> Result<String, c_int> {
    if g.is_null() {
        return Err(PVM_NULL_GROUP);
    }
    // SAFETY: PVM's contract: a NUL-terminated group name.
    let s = unsafe { CStr::from_ptr(g) }.to_string_lossy().into_owned();
    if s.is_empty() {
        return Err(PVM_NULL_GROUP);
    }
    Ok(s)
}

/// The group's members by instance (-1: a free instance).
fn members(p: &mut Pvm, g: &str) -> Result<Vec<i32>, c_int> {
    if let Some(m) = p.frozen.get(g) {
        return Ok(m.clone());
    }
    match p.relay.ask(&Request::Members { group: g.into() }) {
        Ok(Reply::Members { tids, frozen }) => {
            if frozen {
                p.frozen.insert(g.into(), tids.clone());
            }
            Ok(tids)
        }
        Ok(Reply::Error(c)) => Err(c),
        _ => Err(PVM_SYS_ERR),
    }
}

fn ask_value(p: &mut Pvm, r: Request) -> c_int {
    match p.relay.ask(&r) {
        Ok(Reply::Value(v)) => v,
        Ok(Reply::Error(c)) => c,
        _ => PVM_SYS_ERR,
    }
}

macro_rules! try_code {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(c) => return c,
        }
    };
}

/// pvm_joingroup: this task's instance number in the group.
///
/// # Safety
/// `g` is a string.
#[no_mangle]
pub unsafe extern "C" fn pvm_joingroup(g: *const c_char) -> c_int {
    with("pvm_joingroup", |p| {
        let g = try_code!(group_name(g));
        ask_value(p, Request::Join { group: g })
    })
}

/// pvm_lvgroup.
///
/// # Safety
/// `g` is a string.
#[no_mangle]
pub unsafe extern "C" fn pvm_lvgroup(g: *const c_char) -> c_int {
    with("pvm_lvgroup", |p| {
        let g = try_code!(group_name(g));
        p.frozen.remove(&g);
        ask_value(p, Request::Leave { group: g })
    })
}

/// pvm_gsize.
///
/// # Safety
/// `g` is a string.
#[no_mangle]
pub unsafe extern "C" fn pvm_gsize(g: *const c_char) -> c_int {
    with("pvm_gsize", |p| {
        let g = try_code!(group_name(g));
        count(try_code!(members(p, &g)).iter().filter(|t| **t > 0).count())
    })
}

/// pvm_getinst: the instance of `tid` in the group.
///
/// # Safety
/// `g` is a string.
#[no_mangle]
pub unsafe extern "C" fn pvm_getinst(g: *const c_char, tid: c_int) -> c_int {
    with("pvm_getinst", |p| {
        let g = try_code!(group_name(g));
        let m = try_code!(members(p, &g));
        m.iter()
            .position(|t| *t == tid)
            .map_or(PVM_NOT_IN_GROUP, count)
    })
}

/// pvm_gettid: the task of instance `inst` of the group.
///
/// # Safety
/// `g` is a string.
#[no_mangle]
pub unsafe extern "C" fn pvm_gettid(g: *const c_char, inst: c_int) -> c_int {
    with("pvm_gettid", |p| {
        let g = try_code!(group_name(g));
        let m = try_code!(members(p, &g));
        usize::try_from(inst)
            .ok()
            .and_then(|i| m.get(i))
            .copied()
            .filter(|t| *t > 0)
            .unwrap_or(PVM_NO_INST)
    })
}

/// pvm_freezegroup: returns once `count` members have joined (-1: those
/// there now); the group then keeps its members.
///
/// # Safety
/// `g` is a string.
#[no_mangle]
pub unsafe extern "C" fn pvm_freezegroup(g: *const c_char, count: c_int) -> c_int {
    with("pvm_freezegroup", |p| {
        let g = try_code!(group_name(g));
        ask_value(p, Request::Freeze { group: g, count })
    })
}

/// A group function's message of `kind` and `tag` for group `g`, from
/// `src` (-1: any member).
fn group_msg(kind: u32, tag: c_int, g: &str, src: c_int) -> impl Fn(&Msg) -> bool + '_ {
    move |m: &Msg| {
        m.kind == kind
            && m.tag == tag
            && (src == -1 || m.src == src)
            && wire::group_of(&m.data).is_some_and(|(name, _)| name == g.as_bytes())
    }
}

fn take_group(p: &mut Pvm, kind: u32, tag: c_int, g: &str, src: c_int) -> Vec<u8> {
    let m = p
        .take(&group_msg(kind, tag, g, src), None)
        .expect("a wait without a deadline returns a message");
    let (_, body) = wire::group_of(&m.data).expect("matched on its group");
    body.to_vec()
}

fn me_in(p: &Pvm, m: &[i32]) -> Result<usize, c_int> {
    m.iter().position(|t| *t == p.tid).ok_or(PVM_NOT_IN_GROUP)
}

/// pvm_barrier: returns once `count` members (-1: all) have called it.
/// The member of the lowest instance gathers the arrivals and releases
/// them.
///
/// # Safety
/// `g` is a string.
#[no_mangle]
pub unsafe extern "C" fn pvm_barrier(g: *const c_char, count: c_int) -> c_int {
    with("pvm_barrier", |p| {
        let g = try_code!(group_name(g));
        let m = try_code!(members(p, &g));
        try_code!(me_in(p, &m));
        let real: Vec<i32> = m.iter().copied().filter(|t| *t > 0).collect();
        let count = if count == -1 {
            crate::codes::count(real.len())
        } else {
            count
        };
        if count < 1 {
            return PVM_BAD_PARAM;
        }
        let coord = real[0];
        let body = wire::with_group(&g, &[]);
        if coord == p.tid {
            let mut arrived = Vec::new();
            for _ in 1..count {
                let msg = p
                    .take(&group_msg(BARRIER, 0, &g, -1), None)
                    .expect("no deadline");
                arrived.push(msg.src);
            }
            for t in arrived {
                p.send_to(t, RELEASE, 0, DATA_RAW, &body);
            }
        } else {
            p.send_to(coord, BARRIER, 0, DATA_RAW, &body);
            take_group(p, RELEASE, 0, &g, coord);
        }
        PVM_OK
    })
}

/// pvm_bcast: the active send buffer to every other member of the group.
///
/// # Safety
/// `g` is a string.
#[no_mangle]
pub unsafe extern "C" fn pvm_bcast(g: *const c_char, tag: c_int) -> c_int {
    with("pvm_bcast", |p| {
        let g = try_code!(group_name(g));
        if tag < 0 {
            return PVM_BAD_PARAM;
        }
        let m = try_code!(members(p, &g));
        let (bytes, enc) = match p.bufs.active(true) {
            Ok(b) => (b.bytes().to_vec(), b.encoding),
            Err(c) => return c,
        };
        let me = p.tid;
        for t in m.into_iter().filter(|t| *t > 0 && *t != me) {
            p.send_to(t, wire::USER, tag, enc, &bytes);
        }
        PVM_OK
    })
}

/// The bytes of `count` elements of `datatype`, checked.
fn extent(count: c_int, datatype: c_int) -> Result<usize, c_int> {
    let size = type_size(datatype).ok_or(PVM_BAD_PARAM)?;
    let n = usize::try_from(count).map_err(|_| PVM_BAD_PARAM)?;
    Ok(n * size)
}

/// The root's tid and the members, for a rooted group operation.
fn rooted(p: &mut Pvm, g: &str, root: c_int) -> Result<(i32, Vec<i32>), c_int> {
    let m = members(p, g)?;
    me_in(p, &m)?;
    let r = usize::try_from(root)
        .ok()
        .and_then(|i| m.get(i))
        .copied()
        .filter(|t| *t > 0)
        .ok_or(PVM_NO_INST)?;
    Ok((r, m))
}

/// pvm_reduce: `func` over every member's `data`; the result in the root's.
///
/// # Safety
/// `g` is a string; `data` holds `count` elements of `datatype`; `func`
/// is a reduction function.
#[no_mangle]
pub unsafe extern "C" fn pvm_reduce(
    func: ReduceFn,
    data: *mut c_void,
    count: c_int,
    datatype: c_int,
    tag: c_int,
    g: *const c_char,
    root: c_int,
) -> c_int {
    with("pvm_reduce", |p| {
        let g = try_code!(group_name(g));
        let len = try_code!(extent(count, datatype));
        let Some(func) = func else {
            return PVM_BAD_PARAM;
        };
        if data.is_null() && len > 0 {
            return PVM_BAD_PARAM;
        }
        let (root_tid, m) = try_code!(rooted(p, &g, root));
        // SAFETY: the caller's contract: count elements at data.
        let mine = unsafe { std::slice::from_raw_parts_mut(data.cast::<u8>(), len) };
        if root_tid != p.tid {
            p.send_to(root_tid, REDUCE, tag, DATA_RAW, &wire::with_group(&g, mine));
            return PVM_OK;
        }
        // The others' contributions, combined in instance order.
        let others: Vec<i32> = m
            .iter()
            .copied()
            .filter(|t| *t > 0 && *t != p.tid)
            .collect();
        let mut got: Vec<(usize, Vec<u8>)> = Vec::new();
        for _ in &others {
            let msg = p
                .take(&group_msg(REDUCE, tag, &g, -1), None)
                .expect("no deadline");
            let inst = m.iter().position(|t| *t == msg.src).unwrap_or(usize::MAX);
            let (_, body) = wire::group_of(&msg.data).expect("matched on its group");
            if body.len() != len {
                return PVM_MISMATCH;
            }
            got.push((inst, body.to_vec()));
        }
        got.sort_by_key(|(i, _)| *i);
        let (mut dt, mut n, mut info) = (datatype, count, PVM_OK);
        for (_, mut y) in got {
            // SAFETY: func is a reduction function over count elements of
            // datatype, x and y each hold that many.
            unsafe { func(&mut dt, data, y.as_mut_ptr().cast(), &mut n, &mut info) };
            if info < 0 {
                return info;
            }
        }
        PVM_OK
    })
}

/// pvm_gather: each member's `data` into the root's `result`, by instance.
///
/// # Safety
/// `g` is a string; `data` holds `count` elements; at the root `result`
/// has room for `count` times the group's size.
#[no_mangle]
pub unsafe extern "C" fn pvm_gather(
    result: *mut c_void,
    data: *const c_void,
    count: c_int,
    datatype: c_int,
    tag: c_int,
    g: *const c_char,
    root: c_int,
) -> c_int {
    with("pvm_gather", |p| {
        let g = try_code!(group_name(g));
        let len = try_code!(extent(count, datatype));
        if data.is_null() && len > 0 {
            return PVM_BAD_PARAM;
        }
        let (root_tid, m) = try_code!(rooted(p, &g, root));
        // SAFETY: the caller's contract: count elements at data.
        let mine = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
        if root_tid != p.tid {
            p.send_to(root_tid, GATHER, tag, DATA_RAW, &wire::with_group(&g, mine));
            return PVM_OK;
        }
        if result.is_null() && len > 0 {
            return PVM_BAD_PARAM;
        }
        let out = result.cast::<u8>();
        for (inst, &t) in m.iter().enumerate().filter(|(_, t)| **t > 0) {
            let body = if t == p.tid {
                mine.to_vec()
            } else {
                take_group(p, GATHER, tag, &g, t)
            };
            if body.len() != len {
                return PVM_MISMATCH;
            }
            // SAFETY: the caller's contract: room for count elements per
            // instance at result.
            unsafe { std::ptr::copy_nonoverlapping(body.as_ptr(), out.add(inst * len), len) };
        }
        PVM_OK
    })
}

/// pvm_scatter: the root's `data`, `count` elements per instance, to each
/// member's `result`.
///
/// # Safety
/// `g` is a string; `result` has room for `count` elements; at the root
/// `data` holds `count` times the group's size.
#[no_mangle]
pub unsafe extern "C" fn pvm_scatter(
    result: *mut c_void,
    data: *const c_void,
    count: c_int,
    datatype: c_int,
    tag: c_int,
    g: *const c_char,
    root: c_int,
) -> c_int {
    with("pvm_scatter", |p| {
        let g = try_code!(group_name(g));
        let len = try_code!(extent(count, datatype));
        if result.is_null() && len > 0 {
            return PVM_BAD_PARAM;
        }
        let (root_tid, m) = try_code!(rooted(p, &g, root));
        let mine = if root_tid == p.tid {
            if data.is_null() && len > 0 {
                return PVM_BAD_PARAM;
            }
            let src = data.cast::<u8>();
            let mut own = Vec::new();
            for (inst, &t) in m.iter().enumerate().filter(|(_, t)| **t > 0) {
                // SAFETY: the caller's contract: count elements per
                // instance at data.
                let part = unsafe { std::slice::from_raw_parts(src.add(inst * len), len) };
                if t == p.tid {
                    own = part.to_vec();
                } else {
                    p.send_to(t, SCATTER, tag, DATA_RAW, &wire::with_group(&g, part));
                }
            }
            own
        } else {
            take_group(p, SCATTER, tag, &g, root_tid)
        };
        if mine.len() != len {
            return PVM_MISMATCH;
        }
        // SAFETY: the caller's contract: room for count elements.
        unsafe { std::ptr::copy_nonoverlapping(mine.as_ptr(), result.cast::<u8>(), len) };
        PVM_OK
    })
}
