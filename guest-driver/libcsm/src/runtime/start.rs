//! `MAIN_INITENV`: the shared heap's layout (control block, the program's
//! `G_MALLOC` space, its globals at their link-time address), Cashmere
//! started over it, and the node's [`Runtime`].

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Instant;

use cashmere::{Config, CsmError, Levels};
use mc_api::vclock;

use super::control::{W_FUNCS, W_NEXT_ALLOC, W_NEXT_LOCK};
use super::exit::{register_exit_handler, stdout};
use super::{heap, Creation, RunError, Runtime, PROC, RUNTIME};
use crate::connect;
use crate::globals::{self, Globals, GLOBALS_AT};
use crate::settings::Settings;

fn page_round(n: usize, page: usize) -> usize {
    n.div_ceil(page) * page
}

/// Where the loader put this thread's errno: the same on every node only
/// when their address space layouts agree.
pub(super) fn layout_fingerprint() -> usize {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__errno_location() as usize }
}

/// `MAIN_INITENV`: start Cashmere on this node. Returns on node 0; on every
/// other node it runs that node's processes and exits.
///
/// The heap is the largest the model allows for the run's variant and
/// cluster (`heap::limit`), or `CSM_HEAP_MIB` where that asks for less;
/// `MAIN_INITENV`'s size (SPLASH's, sized for its own allocator and mostly
/// far more than the programs use) is not used.
pub fn main_initenv(globals: Globals, built: bool) -> Result<&'static Runtime, RunError> {
    if let Some(rt) = RUNTIME.get() {
        // Started already, by a macro used before MAIN_INITENV.
        return Ok(rt);
    }
    let settings = Settings::from_env()?;
    // Predicted time (`mc-host run --clock virtual`): the process's clock,
    // before anything runs on it. Under counted work the program must be
    // built with counters (`mc-cc --counted`), or this refuses.
    if let Some(c) = vclock::config_from_env().map_err(vclock::VclockError::from)? {
        vclock::init(c)?;
    }
    let page = settings.page_size as usize;
    let nodes_hint = settings.nodes_hint;
    let procs_hint = nodes_hint * settings.threads;
    // Globals not where mc-cc's linker script puts them are the process's
    // own, not shared (a program not built by mc-cc).
    let globals = if built && globals.start == GLOBALS_AT {
        globals
    } else {
        Globals { start: 0, len: 0 }
    };
    let globals_len = page_round(globals.len, page);
    let control_len = page_round(8 * (W_FUNCS + procs_hint.max(64) as usize), page);
    let heap_len = |user: usize| control_len + user + globals_len;
    let mut cfg = Config {
        page_size: settings.page_size,
        threads: settings.threads,
        levels: if settings.one_level {
            Levels::One
        } else {
            Levels::Two
        },
        locks: settings.locks,
        flags: 4,
        exclusive_mode: settings.exclusive_mode,
        home_direct: settings.home_direct,
        variant: settings.variant,
        detection: settings.detection,
        ..Config::default()
    };
    let adapter = connect::adapter().map_err(RunError::Connect)?;
    let cluster = adapter.cluster();
    if cluster.nodes > nodes_hint {
        return Err(RunError::NodesHint {
            hint: nodes_hint,
            nodes: cluster.nodes,
        });
    }
    let fixed = control_len + globals_len;
    let floor = globals::image_end();
    let limit = heap::limit(&cfg, &cluster, fixed, floor).ok_or(RunError::NoHeap {
        fixed,
        variant: settings.variant,
        nodes: cluster.nodes,
        address_space: cluster.address_space,
    })?;
    let user = match settings.heap_mib {
        None => limit.user,
        Some(m) if m << 20 <= limit.user => page_round(m << 20, page).min(limit.user),
        Some(m) => {
            return Err(RunError::HeapSetting {
                mib: m,
                fixed,
                limit,
            })
        }
    };
    cfg.heap_bytes = heap_len(user);
    let mc = adapter
        .open(heap::arena_bytes(&cfg, &cluster))
        .map_err(RunError::Connect)?;
    let nodes = mc.nodes();
    if !built && nodes > 1 {
        return Err(RunError::NotBuilt);
    }
    // The heap ends where the globals end (the limit keeps it above the
    // executable).
    let base = GLOBALS_AT - control_len - user;
    debug_assert!(base >= floor);
    cfg.heap_base = Some(base);
    // Node 0's globals as main left them; the pages go to Cashmere.
    let saved = globals.copy();
    if globals_len > 0 {
        // SAFETY: the range is the program's own data segment (mc-cc's
        // linker script puts nothing else there, and pads it to 64 KiB);
        // until the heap is mapped over it, only this thread runs and no
        // code touches the program's globals.
        if unsafe { libc::munmap(GLOBALS_AT as *mut libc::c_void, globals_len) } != 0 {
            return Err(RunError::Csm(CsmError::Io(std::io::Error::last_os_error())));
        }
    }
    let csm = settings
        .protocol
        .start(&mc, &cfg)
        .map_err(|e| match e.downcast::<CsmError>() {
            Ok(CsmError::Mc(source @ mc_api::McError::NoSpace(_))) => RunError::NoSpace {
                heap: heap_len(user),
                nodes,
                why: source,
            },
            Ok(e) => e.into(),
            Err(e) => e.into(),
        })?;
    let me = mc.node_id().0 as u32;
    if me == 0 && !saved.is_empty() {
        // SAFETY: the globals are heap pages now; node 0 writes them first
        // (their home) and publishes them with the start flag.
        unsafe {
            std::ptr::copy_nonoverlapping(saved.as_ptr(), GLOBALS_AT as *mut u8, saved.len())
        };
    }
    let control = csm.alloc::<u64>(control_len / 8, true)?;
    // SAFETY: a pointer to the start of the array; the slice is not read.
    let control = unsafe { control.as_mut_slice(0..0).as_mut_ptr() };
    let procs = nodes * settings.threads;
    let program = std::env::args()
        .next()
        .map(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(a)
        })
        .unwrap_or_else(|| "program".into());
    let rt = Runtime {
        me,
        nodes,
        threads: settings.threads,
        procs,
        heap_len: heap_len(user),
        globals,
        control,
        base,
        user_start: control_len,
        user_end: control_len + user,
        limit,
        creation: Mutex::new(Creation {
            funcs: vec![0; procs as usize],
            ..Default::default()
        }),
        finished: AtomicBool::new(false),
        breakdowns: Mutex::new(Vec::new()),
        roi: Mutex::new((None, None)),
        program,
        started_at: Instant::now(),
        settings,
        mc,
        csm,
    };
    if me == 0 {
        rt.write(W_NEXT_ALLOC, control_len as u64);
        rt.write(W_NEXT_LOCK, 0);
    }
    let rt = RUNTIME.get_or_init(|| rt);
    register_exit_handler();
    // SAFETY: line-buffered stdout, so each node's lines reach `mc-host run`
    // as they are printed (it prefixes them by node), not at exit.
    unsafe { libc::setvbuf(stdout(), std::ptr::null_mut(), libc::_IOLBF, 0) };
    if me != 0 {
        rt.serve();
    }
    PROC.with(|p| p.set(Some(0)));
    Ok(rt)
}
