//! Virtual time: the clock every guest thread keeps in a predicted-time run
//! (issue 29; docs/virtual-time.md).
//!
//! Direct execution with virtual time, as the Wisconsin Wind Tunnel and
//! SimGrid's SMPI predict a parallel machine from one host: the program runs
//! natively, and each thread's virtual time advances by
//! - its own CPU time (`CLOCK_THREAD_CPUTIME_ID`), times the CPU scale, read
//!   at protocol boundaries ([`sync`]), never per store;
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
//! `thread` (each thread's clock: syncs, ticks, joining the board) and
//! `wait` (waits for data, and serving requests while waiting). This module
//! holds the process's one clock and is the one place to reach it: every
//! function here works on the calling thread's clock, so the fault handler
//! and code without a context can use it.

pub mod board;
mod config;
pub mod meter;
mod thread;
mod wait;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

pub use board::{ClockBoard, SlotState};
pub use meter::{thread_cpu_ns, CpuTime, WorkMeter};
pub use thread::{
    charge, join, my_slot, now, observe, protocol_work_since, stamp, sync, sync_when_due, tick,
    tick_into, work_mark, Participant, SYNC_GAP,
};
pub use wait::{one_way, serve, wait_begin, wait_end, wait_end_quiet, waiting, Serving};

/// What noticing arrived data costs: one poll of local memory that misses in
/// the cache (seed 000 Table II lists no separate figure; 100 ns is the
/// order of an AlphaServer 4100's memory latency).
pub const NOTICE_NS: u64 = 100;
pub use config::config_from_env;
pub use firmware_model::abi::clock::{ClockConfig, ClockEnvError, DEFAULT_QUANTUM_NS};

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
        cpu_scale: 1.0,
        protocol_scale: None,
        board: None,
        quantum_ns: 1_000_000_000,
    })
    .expect("one configuration for every test of this binary");
}

#[cfg(test)]
mod tests;
