//! The task's identity and the calls the relay serves: pvm_mytid,
//! pvm_parent, pvm_exit, pvm_siblings, pvm_tidtohost, pvm_spawn,
//! pvm_config, pvm_tasks, pvm_notify, pvm_kill; options (pvm_setopt,
//! pvm_getopt) and error texts (pvm_perror, pvm_strerror, pvm_serror).

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::atomic::Ordering;

use pvm_relay::{Reply, Request};

use crate::codes::*;
use crate::task::{self, pvm_errno, with};

#[no_mangle]
pub extern "C" fn pvm_mytid() -> c_int {
    with("pvm_mytid", |p| p.tid)
}

#[no_mangle]
pub extern "C" fn pvm_parent() -> c_int {
    with("pvm_parent", |p| p.parent)
}

#[no_mangle]
pub extern "C" fn pvm_exit() -> c_int {
    task::exit()
}

/// pvm_siblings: the tasks started by the same pvm_spawn as this one.
///
/// # Safety
/// `tids` is NULL or writable; the list it receives is the library's.
#[no_mangle]
pub unsafe extern "C" fn pvm_siblings(tids: *mut *mut c_int) -> c_int {
    with("pvm_siblings", |p| {
        if p.siblings.is_empty() {
            p.siblings.push(p.tid);
        }
        // SAFETY: the caller's contract; the list lives as long as the task.
        if let Some(t) = unsafe { tids.as_mut() } {
            *t = p.siblings.as_mut_ptr();
        }
        count(p.siblings.len())
    })
}

#[no_mangle]
pub extern "C" fn pvm_tidtohost(tid: c_int) -> c_int {
    with("pvm_tidtohost", |_| match pvm_relay::host_of(tid) {
        Some(h) => pvm_relay::host_tid(h),
        None => PVM_BAD_PARAM,
    })
}

fn cstr(s: *const c_char) -> Option<String> {
    // SAFETY: callers pass NULL or a NUL-terminated string (PVM's contract).
    (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
}

/// pvm_spawn: `count` copies of `program`, round-robin over the hosts,
/// or on the host `place` names (PvmTaskHost). The tids go to `tids`,
/// an error code in place of each task not started.
///
/// # Safety
/// `program` is a string; `argv` NULL or a NULL-terminated list of
/// strings; `place` NULL or a string; `tids` NULL or room for `count`.
#[no_mangle]
pub unsafe extern "C" fn pvm_spawn(
    program: *const c_char,
    argv: *const *const c_char,
    flag: c_int,
    place: *const c_char,
    count: c_int,
    tids: *mut c_int,
) -> c_int {
    with("pvm_spawn", |p| {
        let Some(program) = cstr(program) else {
            return PVM_BAD_PARAM;
        };
        if count < 1 {
            return PVM_BAD_PARAM;
        }
        if flag & (TASK_DEBUG | TASK_TRACE) != 0 {
            crate::codes::not_supported("pvm_spawn with PvmTaskDebug or PvmTaskTrace");
        }
        let mut args = Vec::new();
        if !argv.is_null() {
            for i in 0.. {
                // SAFETY: the caller's contract: a NULL-terminated list.
                let a = unsafe { *argv.add(i) };
                if a.is_null() {
                    break;
                }
                args.push(cstr(a).unwrap_or_default());
            }
        }
        let place = cstr(place).unwrap_or_default();
        let place = if flag & TASK_HOST != 0 {
            place
        } else {
            String::new()
        };
        let r = p.relay.ask(&Request::Spawn {
            program,
            args,
            flag,
            place,
            count,
        });
        match r {
            Ok(Reply::Spawned(mut got)) => {
                // PVM's order: the tasks started first, the error codes of
                // those not started in the last places (programs kill
                // tids[0 .. numt] when some failed).
                got.sort_by_key(|t| *t < 0);
                if !tids.is_null() {
                    for (i, t) in got
                        .iter()
                        .take(usize::try_from(count).unwrap_or(0))
                        .enumerate()
                    {
                        // SAFETY: the caller's contract: room for count.
                        unsafe { *tids.add(i) = *t };
                    }
                }
                let ok = crate::codes::count(got.iter().filter(|t| **t > 0).count());
                if ok == 0 {
                    got.first()
                        .copied()
                        .filter(|c| *c < 0)
                        .unwrap_or(PVM_SYS_ERR)
                } else {
                    ok
                }
            }
            Ok(Reply::Error(c)) => c,
            _ => PVM_SYS_ERR,
        }
    })
}

/// The host table (pvm_config): kept for the life of the task, as PVM's is
/// until the next call.
struct HostTable {
    #[allow(dead_code)] // owns the strings the table points to
    names: Vec<CString>,
    arch: CString,
    infos: Vec<HostInfo>,
}

#[repr(C)]
pub struct HostInfo {
    pub hi_tid: c_int,
    pub hi_name: *const c_char,
    pub hi_arch: *const c_char,
    pub hi_speed: c_int,
    pub hi_dsig: c_int,
}

#[repr(C)]
pub struct TaskInfo {
    pub ti_tid: c_int,
    pub ti_ptid: c_int,
    pub ti_host: c_int,
    pub ti_flag: c_int,
    pub ti_a_out: *const c_char,
    pub ti_pid: c_int,
}

struct TaskTable {
    #[allow(dead_code)] // owns the strings the table points to
    names: Vec<CString>,
    infos: Vec<TaskInfo>,
}

// SAFETY: the tables are only touched under their lock; the pointers in
// them point into their own strings.
unsafe impl Send for HostTable {}
// SAFETY: as above.
unsafe impl Send for TaskTable {}

static HOSTS: std::sync::Mutex<Option<HostTable>> = std::sync::Mutex::new(None);
static TASKS: std::sync::Mutex<Option<TaskTable>> = std::sync::Mutex::new(None);

/// pvm_config: the hosts (one per node of the cluster).
///
/// # Safety
/// Each pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pvm_config(
    nhost: *mut c_int,
    narch: *mut c_int,
    hostp: *mut *const HostInfo,
) -> c_int {
    with("pvm_config", |p| {
        let hosts = match p.relay.ask(&Request::Config) {
            Ok(Reply::Hosts(h)) => h,
            Ok(Reply::Error(c)) => return c,
            _ => return PVM_SYS_ERR,
        };
        let names: Vec<CString> = hosts
            .iter()
            .map(|h| CString::new(h.name.clone()).unwrap_or_default())
            .collect();
        let arch = CString::new("LINUX64").expect("no NUL");
        let infos = hosts
            .iter()
            .zip(&names)
            .map(|(h, n)| HostInfo {
                hi_tid: h.tid,
                hi_name: n.as_ptr(),
                hi_arch: arch.as_ptr(),
                hi_speed: 1000,
                hi_dsig: 0x408841,
            })
            .collect();
        let mut g = HOSTS.lock().unwrap_or_else(|e| e.into_inner());
        let t = g.insert(HostTable { names, arch, infos });
        let _ = &t.arch;
        // SAFETY: the caller's contract: NULL or writable.
        unsafe {
            if let Some(x) = nhost.as_mut() {
                *x = count(t.infos.len());
            }
            if let Some(x) = narch.as_mut() {
                *x = 1;
            }
            if let Some(x) = hostp.as_mut() {
                *x = t.infos.as_ptr();
            }
        }
        PVM_OK
    })
}

/// pvm_tasks: the tasks of the virtual machine (0), of a host (its tid),
/// or one task.
///
/// # Safety
/// Each pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pvm_tasks(
    which: c_int,
    ntask: *mut c_int,
    taskp: *mut *const TaskInfo,
) -> c_int {
    with("pvm_tasks", |p| {
        let tasks = match p.relay.ask(&Request::Tasks { which }) {
            Ok(Reply::Tasks(t)) => t,
            Ok(Reply::Error(c)) => return c,
            _ => return PVM_SYS_ERR,
        };
        let names: Vec<CString> = tasks
            .iter()
            .map(|t| CString::new(t.program.clone()).unwrap_or_default())
            .collect();
        let infos = tasks
            .iter()
            .zip(&names)
            .map(|(t, n)| TaskInfo {
                ti_tid: t.tid,
                ti_ptid: t.parent,
                ti_host: t.host,
                ti_flag: 4, // TF_CONN: connected
                ti_a_out: n.as_ptr(),
                // A pid is a pid_t; 0 for one the relay could not have sent.
                ti_pid: c_int::try_from(t.pid).unwrap_or(0),
            })
            .collect();
        let mut g = TASKS.lock().unwrap_or_else(|e| e.into_inner());
        let t = g.insert(TaskTable { names, infos });
        // SAFETY: the caller's contract: NULL or writable.
        unsafe {
            if let Some(x) = ntask.as_mut() {
                *x = count(t.infos.len());
            }
            if let Some(x) = taskp.as_mut() {
                *x = t.infos.as_ptr();
            }
        }
        PVM_OK
    })
}

/// pvm_notify: PvmTaskExit only; a message with `tag` holding the tid comes
/// when each task of the list exits (at once for one already gone).
///
/// # Safety
/// `tids` holds `count` ints.
#[no_mangle]
pub unsafe extern "C" fn pvm_notify(
    what: c_int,
    tag: c_int,
    count: c_int,
    tids: *const c_int,
) -> c_int {
    if what != NOTIFY_TASK_EXIT {
        return with("pvm_notify", |_| {
            crate::codes::not_supported("pvm_notify other than PvmTaskExit")
        });
    }
    let Ok(n) = usize::try_from(count) else {
        return PVM_BAD_PARAM;
    };
    if tids.is_null() && n > 0 {
        return PVM_BAD_PARAM;
    }
    let list = if n == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(tids, n) }.to_vec()
    };
    with("pvm_notify", |p| {
        match p.relay.ask(&Request::NotifyExit { tag, tids: list }) {
            Ok(Reply::Value(v)) => v,
            Ok(Reply::Error(c)) => c,
            _ => PVM_SYS_ERR,
        }
    })
}

#[no_mangle]
pub extern "C" fn pvm_kill(tid: c_int) -> c_int {
    with("pvm_kill", |p| {
        if tid == p.tid {
            return PVM_BAD_PARAM;
        }
        match p.relay.ask(&Request::Kill { tid }) {
            Ok(Reply::Value(v)) => v,
            Ok(Reply::Error(c)) => c,
            _ => PVM_SYS_ERR,
        }
    })
}

#[no_mangle]
pub extern "C" fn pvm_setopt(what: c_int, value: c_int) -> c_int {
    with("pvm_setopt", |p| {
        let slot = match what {
            OPT_ROUTE => &mut p.opts.route,
            OPT_AUTO_ERR => &mut p.opts.auto_err,
            OPT_DEBUG_MASK => &mut p.opts.debug_mask,
            OPT_FRAG_SIZE => &mut p.opts.frag_size,
            OPT_SHOW_TIDS => &mut p.opts.show_tids,
            _ => return crate::codes::not_supported("pvm_setopt of this option"),
        };
        std::mem::replace(slot, value)
    })
}

#[no_mangle]
pub extern "C" fn pvm_getopt(what: c_int) -> c_int {
    with("pvm_getopt", |p| match what {
        OPT_ROUTE => p.opts.route,
        OPT_AUTO_ERR => p.opts.auto_err,
        OPT_DEBUG_MASK => p.opts.debug_mask,
        OPT_FRAG_SIZE => p.opts.frag_size,
        OPT_SHOW_TIDS => p.opts.show_tids,
        _ => crate::codes::not_supported("pvm_getopt of this option"),
    })
}

/// pvm_serror (PVM 3.3): turn automatic error reports on or off; the old
/// setting.
#[no_mangle]
pub extern "C" fn pvm_serror(how: c_int) -> c_int {
    pvm_setopt(OPT_AUTO_ERR, how)
}

/// pvm_perror: `msg` and the text of the last error, on stderr.
///
/// # Safety
/// `msg` is NULL or a string.
#[no_mangle]
pub unsafe extern "C" fn pvm_perror(msg: *const c_char) -> c_int {
    let code = pvm_errno.load(Ordering::Relaxed);
    let tid = with("pvm_perror", |p| p.tid);
    eprintln!(
        "libpvm [t{tid:x}]: {}: {}",
        cstr(msg).unwrap_or_default(),
        text(code)
    );
    PVM_OK
}

/// pvm_strerror (PVM 3.4's declaration takes no argument: the text of the
/// last error).
#[no_mangle]
pub extern "C" fn pvm_strerror() -> *const c_char {
    static TEXTS: std::sync::OnceLock<Vec<CString>> = std::sync::OnceLock::new();
    let texts = TEXTS.get_or_init(|| {
        (0..=40)
            .map(|c| CString::new(text(-c)).expect("no NUL"))
            .collect()
    });
    let c = pvm_errno.load(Ordering::Relaxed);
    let i = usize::try_from(c.saturating_neg().clamp(0, 40)).expect("clamped to 0..=40");
    texts[i].as_ptr()
}

/// pvm_version: the PVM version whose API this library keeps.
#[no_mangle]
pub extern "C" fn pvm_version() -> *const c_char {
    c"3.4.6 (libpvm-mc, on UMP)".as_ptr()
}
