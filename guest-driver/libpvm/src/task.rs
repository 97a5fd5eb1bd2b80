//! The task: its identity, its UMP endpoint and the relay connection,
//! brought up by its first PVM call (enrolment), and the process-wide
//! state every call works on under one lock (PVM's library is not
//! thread-safe; the lock makes misuse from threads safe, not concurrent).

use std::collections::{HashMap, VecDeque};
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use mc_api::MemoryChannel;
use pvm_relay::{env, Request};
use ump::{ChannelId, Config, Node, PendingWrite, Transport, Ump};

use crate::buffers::Buffers;
use crate::codes::*;
use crate::relay::{env_int, env_ints, Relay, RelayError};
use crate::wire::Msg;

/// Why a task could not enrol.
#[derive(Debug, thiserror::Error)]
pub enum EnrolError {
    #[error(transparent)]
    Relay(#[from] RelayError),
    #[error("{} is not set: this task was not started by `mc-host pvm`", env::TID)]
    NoTid,
    #[error("{0}")]
    Node(String),
    #[error("registering the task's UMP endpoint")]
    Ump(#[source] ump::UmpError),
    #[error("the relay refused the task: {}", text(*.0))]
    Refused(c_int),
}

/// The UMP endpoint of a task: its tid, in a space of its own.
pub fn handle(tid: i32) -> u64 {
    // The tid's 32 bits as they are.
    0x5056_4d00_0000_0000 | u64::from(u32::from_ne_bytes(tid.to_ne_bytes()))
}

/// The tid behind an endpoint, if it is a task's.
pub fn tid_of(handle: u64) -> Option<i32> {
    let low = u32::try_from(handle & 0xffff_ffff).expect("masked to 32 bits");
    (handle >> 32 == 0x5056_4d00).then_some(i32::from_ne_bytes(low.to_ne_bytes()))
}

/// Options of pvm_setopt that are kept (and read back by pvm_getopt).
pub struct Options {
    pub route: c_int,
    pub auto_err: c_int,
    pub debug_mask: c_int,
    pub frag_size: c_int,
    pub show_tids: c_int,
}

/// The state of the task.
pub struct Pvm {
    pub tid: i32,
    pub parent: i32,
    pub siblings: Vec<i32>,
    pub relay: Relay,
    pub mc: MemoryChannel,
    pub ump: Ump,
    pub bufs: Buffers,
    /// The channel to each peer, and the peer of each channel.
    pub chans: HashMap<i32, ChannelId>,
    pub peers: HashMap<ChannelId, i32>,
    /// Messages received and not yet taken, oldest first.
    pub queue: VecDeque<Msg>,
    /// Sends whose message is not yet all in the peer's ring.
    pub pending: Vec<(i32, PendingWrite)>,
    pub opts: Options,
    /// Members of frozen groups, by instance.
    pub frozen: HashMap<String, Vec<i32>>,
    /// The buffer the last pvm_probe made.
    pub probe_buf: Option<c_int>,
    /// Packets lost on this adapter's link when the task enrolled.
    pub losses_at_start: u64,
    pub errors_at_start: u64,
}

static STATE: Mutex<Option<Pvm>> = Mutex::new(None);
/// Set once the task has called pvm_exit: later calls fail.
static EXITED: Mutex<bool> = Mutex::new(false);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The process's adapter and UMP node: brought up by the task shell
/// before a program is assigned (every adapter opens at the cluster's
/// start), else by the first PVM call.
pub fn node() -> Result<(MemoryChannel, Arc<Node>), EnrolError> {
    static NODE: OnceLock<Result<(MemoryChannel, Arc<Node>), String>> = OnceLock::new();
    NODE.get_or_init(|| {
        let mc = imc::memory_channel()
            .map_err(|e| format!("opening the Memory Channel adapter: {e}"))?;
        let node = Node::open(&mc, Config::from_env())
            .map_err(|e| {
                // A lost packet leaves a copy of the region table or of the
                // directory incomplete, and the error then names what it
                // read, not the loss: say the loss first.
                let lost = mc.losses();
                let why = if lost > 0 {
                    format!(
                        "{lost} packets were lost on this adapter's link since it opened (Memory Channel does not retransmit), which left what UMP reads incomplete: "
                    )
                } else {
                    String::new()
                };
                format!("bringing UMP up: {why}{}", chain(&e))
            })?;
        Ok((mc, node))
    })
    .clone()
    .map_err(EnrolError::Node)
}

fn enrol() -> Result<Pvm, EnrolError> {
    take_sigterm();
    let relay = Relay::connect()?;
    let tid = env_int(env::TID)?.ok_or(EnrolError::NoTid)?;
    let parent = env_int(env::PARENT)?.unwrap_or(PVM_NO_PARENT);
    let siblings = env_ints(env::SIBLINGS)?;
    let (mc, node) = node()?;
    let ump = Ump::init(&node);
    ump.listen(handle(tid), Transport::Auto)
        .map_err(EnrolError::Ump)?;
    if let pvm_relay::Reply::Error(c) = relay.ask(&Request::Enroll {
        tid,
        pid: std::process::id(),
    })? {
        return Err(EnrolError::Refused(c));
    }
    // SAFETY: registers a plain extern "C" function with no arguments.
    unsafe { libc::atexit(flush_at_exit) };
    Ok(Pvm {
        tid,
        parent,
        siblings,
        losses_at_start: mc.losses(),
        errors_at_start: mc.error_count(),
        relay,
        mc,
        ump,
        bufs: Buffers::default(),
        chans: HashMap::new(),
        peers: HashMap::new(),
        queue: VecDeque::new(),
        pending: Vec::new(),
        opts: Options {
            route: 2,
            auto_err: 1,
            debug_mask: 0,
            frag_size: 4096,
            show_tids: 1,
        },
        frozen: HashMap::new(),
        probe_buf: None,
    })
}

/// Set by SIGTERM (pvm_kill): the task ends at its next PVM call or in
/// its next wait, where it holds no cluster lock (a task killed inside a
/// directory update would leave UMP's directory locked for every task).
static KILLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: c_int) {
    KILLED.store(true, Ordering::SeqCst);
}

/// From here on SIGTERM (pvm_kill) ends the task only where it is safe,
/// called before the adapter, UMP or the task's endpoint are brought up.
pub fn take_sigterm() {
    // SAFETY: installs a handler that only stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGTERM,
            on_term as extern "C" fn(c_int) as libc::sighandler_t,
        )
    };
}

/// End the task now if pvm_kill asked for it.
pub fn end_if_killed() {
    if KILLED.load(Ordering::Relaxed) {
        // SAFETY: _exit ends the process at once; nothing of it is used after.
        unsafe { libc::_exit(128 + libc::SIGTERM) };
    }
}

/// Messages still being written when the program returns from main
/// without pvm_exit go out before the process ends.
extern "C" fn flush_at_exit() {
    if let Ok(mut g) = STATE.try_lock() {
        if let Some(p) = g.as_mut() {
            p.finish_sends();
        }
    }
}

/// Run `f` on the task, enrolling it first if need be. A task that cannot
/// enrol says why (once) and every call returns PvmSysErr. A negative
/// code is reported as `call`'s (pvm_errno, PvmAutoErr).
pub fn with<F: FnOnce(&mut Pvm) -> c_int>(call: &'static str, f: F) -> c_int {
    end_if_killed();
    let mut g = lock(&STATE);
    if g.is_none() {
        if *lock(&EXITED) {
            return PVM_SYS_ERR;
        }
        match enrol() {
            Ok(p) => *g = Some(p),
            Err(e) => {
                eprintln!("libpvm-mc: cannot enrol in PVM: {}", chain(&e));
                *lock(&EXITED) = true;
                return PVM_SYS_ERR;
            }
        }
    }
    let p = g.as_mut().expect("enrolled above");
    let code = f(p);
    report(p, call, code);
    code
}

/// pvm_exit: the writes finish, UMP closes, the relay forgets the task.
pub fn exit() -> c_int {
    let mut g = lock(&STATE);
    let Some(mut p) = g.take() else {
        return PVM_OK;
    };
    *lock(&EXITED) = true;
    p.finish_sends();
    let _ = p.relay.ask(&Request::Exit);
    if let Err(e) = p.ump.exit() {
        eprintln!("libpvm-mc (t{:x}): closing UMP: {}", p.tid, chain(&e));
    }
    PVM_OK
}

/// An error and its causes, each once.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

impl Pvm {
    /// A message was lost or damaged, or the network failed under the
    /// task: say which and end the task (PVM programs rarely check codes,
    /// and going on would hand them wrong or missing data).
    pub fn fatal(&self, what: &str) -> ! {
        eprintln!(
            "libpvm-mc (t{:x}): {what}; Memory Channel does not retransmit, so this task cannot go on",
            self.tid
        );
        std::process::exit(70);
    }

    /// Wait until every message sent is in its reader's ring, driving
    /// UMP meanwhile (a channel opens, and a queued write starts, only
    /// when its task looks at the directory).
    pub fn finish_sends(&mut self) {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            self.reap_sends();
            if self.pending.is_empty() {
                return;
            }
            if Instant::now() >= until {
                break;
            }
            self.step(Duration::from_millis(1));
        }
        for (dst, _) in std::mem::take(&mut self.pending) {
            eprintln!(
                "libpvm-mc (t{:x}): a message to t{dst:x} was still not delivered after 60 s (is t{dst:x} running?)",
                self.tid
            );
        }
    }
}

/// The last error code a call returned (PVM's `pvm_errno`).
#[no_mangle]
pub static pvm_errno: AtomicI32 = AtomicI32::new(0);

/// Record `code` of `call` and, when PvmAutoErr says so, print it (2:
/// and end the task), as PVM's library does.
pub fn report(p: &Pvm, call: &str, code: c_int) {
    // PvmNoParent is pvm_parent's answer, not a failure (PVM is silent).
    if code >= 0 || (call == "pvm_parent" && code == PVM_NO_PARENT) {
        return;
    }
    pvm_errno.store(code, Ordering::Relaxed);
    if p.opts.auto_err != 0 && code != PVM_NOT_IMPL {
        eprintln!("libpvm [t{:x}]: {call}(): {}", p.tid, text(code));
        if p.opts.auto_err == 2 {
            std::process::exit(1);
        }
    }
}
