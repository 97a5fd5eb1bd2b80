//! Virtual time: the clock every guest thread keeps in a predicted-time run
//! (issue 29; docs/virtual-time.md).
//!
//! Direct execution with virtual time, as the Wisconsin Wind Tunnel and
//! SimGrid's SMPI predict a parallel machine from one host: the program runs
//! natively, and each thread's virtual time advances by
//! - its own computing, times the CPU scale (or the protocol scale), read
//!   at protocol boundaries ([`sync`]), never per store: its CPU time
//!   (`CLOCK_THREAD_CPUTIME_ID`), or the work its instrumented code counted
//!   ([`counter`], [`CountedWork`]) plus a stated model of what the counters
//!   cannot see ([`unseen`]), as the run's [`WorkMeasure`] says;
//! - the network's modelled time when it waits for data: it resumes at the
//!   later of its own time and the data's virtual arrival, plus the cost of
//!   noticing it ([`wait_end`]); waiting itself (spinning, sleeping) never
//!   advances it;
//! - work another thread did on its processor's behalf ([`charge`]).
//!
//! Stores carry their sender's time to the hub ([`stamp`]), which gives each
//! packet a virtual arrival (docs/device.md).
//!
//! No running thread gets more than a quantum ahead of the slowest
//! ([`board`]). Off by default: every call is one relaxed load unless the
//! process called [`init`] with a virtual-time configuration
//! ([`config_from_env`]: the configuration `mc-host run --clock virtual`
//! hands its guests, `firmware_model::abi::clock`).

//!
//! The clock's parts, one job each: [`config`] (what the run asks for,
//! parsed once), [`board`] (the quantum across threads and guests),
//! [`meter`] (what measures a thread's computing: a [`WorkMeter`]),
//! [`counter`] (the compiler-inserted counters' callbacks), [`unseen`] (the
//! model of work no counter sees),
//! `thread` (each thread's clock: syncs, ticks, joining the board) and
//! `wait` (waits for data, and serving requests while waiting). This module
//! holds the process's one clock and is the one place to reach it: every
//! function here works on the calling thread's clock, so the fault handler
//! and code without a context can use it.

pub mod board;
mod config;
pub mod counter;
pub mod meter;
mod network;
mod thread;
pub mod unseen;
mod wait;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

pub use board::{ClockBoard, SlotState};
pub use meter::{thread_cpu_ns, CountedWork, CpuTime, WorkMeter};
pub use network::{learn_network, network};
pub use thread::{
    charge, join, my_slot, now, observe, protocol_work_since, stamp, sync, sync_when_due, tick,
    tick_into, work_mark, work_ns, work_window, Participant, SYNC_GAP,
};
pub use wait::{one_way, serve, wait_begin, wait_end, wait_end_quiet, waiting, Serving};

/// What noticing arrived data costs: one poll of local memory that misses in
/// the cache (seed 000 Table II lists no separate figure; 100 ns is the
/// order of an AlphaServer 4100's memory latency).
pub const NOTICE_NS: u64 = 100;
pub use config::config_from_env;
pub use firmware_model::abi::clock::{ClockConfig, ClockEnvError, WorkMeasure, DEFAULT_QUANTUM_NS};
pub use unseen::{charge_unseen, Unseen};

/// Why the virtual clock could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum VclockError {
    #[error(transparent)]
    Env(#[from] ClockEnvError),
    #[error("clock board {path}")]
    Board {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is not a clock board (made by `mc-host run --clock virtual`)")]
    NotABoard(String),
    #[error("mapping the clock board: {0}")]
    Map(String),
    #[error("the clock board is full ({0} threads)")]
    BoardFull(u32),
    #[error("the virtual clock was already set up differently in this process")]
    AlreadySet,
    #[error(
        "counted work (--work counted) needs a program built with work counters, and this one \
         has none (its counter never moved): build mc-guest with \
         scripts/build-counted.sh and run that mc-guest, or a C program with scripts/mc-cc \
         --counted; or use --work cpu-time"
    )]
    NotInstrumented,
    #[error(transparent)]
    Work(#[from] WorkFault),
}

/// Why the work a thread counted cannot give a prediction: the run has no
/// predicted time rather than a wrong one ([`check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WorkFault {
    #[error(
        "a thread's work count went backwards ({before} -> {after} ns at scale 1): the counter \
         wrapped at 2^64 or something else wrote it; no prediction"
    )]
    Backwards { before: u64, after: u64 },
    #[error(
        "a thread on the clock (board slot {slot}) counted no work from joining the clock to \
         leaving it: its code is not instrumented (scripts/build-counted.sh, scripts/mc-cc \
         --counted); no prediction"
    )]
    NeverCounted { slot: u32 },
    #[error("a thread's counted work overflowed 2^64 ns at the committed rate; no prediction")]
    Overflow,
}

/// The run's first work fault: its kind (0: none, 1: backwards, 2: never
/// counted, 3: overflow) and its two values. Atomics only: recorded from the fault
/// handler too.
static FAULT_KIND: AtomicU32 = AtomicU32::new(0);
static FAULT_A: AtomicU64 = AtomicU64::new(0);
static FAULT_B: AtomicU64 = AtomicU64::new(0);

/// Record `f` as the run's fault, unless one is already recorded.
fn fault(f: WorkFault) {
    let (kind, a, b) = match f {
        WorkFault::Backwards { before, after } => (1, before, after),
        WorkFault::NeverCounted { slot } => (2, u64::from(slot), 0),
        WorkFault::Overflow => (3, 0, 0),
    };
    if FAULT_KIND
        .compare_exchange(0, u32::MAX, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
    {
        FAULT_A.store(a, Ordering::Relaxed);
        FAULT_B.store(b, Ordering::Relaxed);
        FAULT_KIND.store(kind, Ordering::Release);
    }
}

/// The run's work fault, if any thread recorded one.
pub fn work_fault() -> Option<WorkFault> {
    let a = || FAULT_A.load(Ordering::Relaxed);
    match FAULT_KIND.load(Ordering::Acquire) {
        1 => Some(WorkFault::Backwards {
            before: a(),
            after: FAULT_B.load(Ordering::Relaxed),
        }),
        2 => Some(WorkFault::NeverCounted {
            slot: u32::try_from(a()).unwrap_or(u32::MAX),
        }),
        3 => Some(WorkFault::Overflow),
        _ => None,
    }
}

/// Whether the clock's times can be trusted: `Err` when a thread's work
/// count went wrong ([`WorkFault`]). A program checks this before it gives a
/// predicted time, and fails with the error instead.
pub fn check() -> Result<(), VclockError> {
    match work_fault() {
        Some(f) => Err(f.into()),
        None => Ok(()),
    }
}

/// The process's clock: its configuration, board and work meter.
struct Global {
    scale: f64,
    protocol_scale: f64,
    board: ClockBoard,
    config: ClockConfig,
    meter: &'static dyn WorkMeter,
}

static ENABLED: AtomicBool = AtomicBool::new(false);
static GLOBAL: OnceLock<Global> = OnceLock::new();
/// Times a gate was passed because the slowest thread stalled.
static QUANTUM_BREAKS: AtomicU64 = AtomicU64::new(0);

/// Set the process's clock up from the environment (idempotent). Returns
/// whether virtual time is on.
pub fn init_from_env() -> Result<bool, VclockError> {
    match config_from_env()? {
        Some(c) => init(c).map(|()| true),
        None => Ok(enabled()),
    }
}

/// Turn virtual time on for this process with `config`. A second call with
/// the same configuration does nothing; a different one is refused.
pub fn init(config: ClockConfig) -> Result<(), VclockError> {
    if let Some(g) = GLOBAL.get() {
        return if g.config == config {
            Ok(())
        } else {
            Err(VclockError::AlreadySet)
        };
    }
    if config.work == WorkMeasure::Counted && !counter::instrumented() {
        return Err(VclockError::NotInstrumented);
    }
    let board = match &config.board {
        Some(path) => ClockBoard::open_or_create(path, config.quantum_ns, board::DEFAULT_CAPACITY)?,
        None => ClockBoard::private(config.quantum_ns, board::DEFAULT_CAPACITY)?,
    };
    let g = Global {
        scale: config.cpu_scale,
        protocol_scale: config.protocol_scale.unwrap_or(config.cpu_scale),
        board,
        config: config.clone(),
        meter: meter::select(&config),
    };
    if GLOBAL.set(g).is_err() {
        // Another thread won the race: fine if it set the same.
        return match GLOBAL.get() {
            Some(g) if g.config == config => Ok(()),
            _ => Err(VclockError::AlreadySet),
        };
    }
    ENABLED.store(true, Ordering::Release);
    Ok(())
}

/// Virtual time is on in this process.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The process's configuration, when virtual time is on.
pub fn config() -> Option<&'static ClockConfig> {
    GLOBAL.get().map(|g| &g.config)
}

/// Gates passed because the slowest thread did not move for a long time
/// (it blocked where no clock knows of it); the run reports them.
pub fn quantum_breaks() -> u64 {
    QUANTUM_BREAKS.load(Ordering::Relaxed)
}

/// Virtual time on, with the one configuration every test of this crate's
/// test binary uses (a process has one clock).
#[cfg(test)]
pub(crate) fn test_on() {
    init(ClockConfig {
        quantum_ns: 1_000_000_000,
        ..ClockConfig::new(1.0)
    })
    .expect("one configuration for every test of this binary");
}

#[cfg(test)]
mod tests;
