//! What measures a thread's computing: a [`WorkMeter`] (issue 38). The
//! clock advances a thread's virtual time by the meter's reading since the
//! last sync, times the scale of the work (application or protocol).
//!
//! Two meters: the thread's CPU time ([`CpuTime`]) and counted work
//! ([`CountedWork`]: the edges its instrumented code passed, `counter.rs`,
//! at [`EDGE_PS`]; issue 39). A meter must be
//! readable from any code on the thread with no context: the SIGSEGV
//! handler syncs the clock, and a counter bumped by compiler-inserted
//! callbacks (SanitizerCoverage's `trace_pc_guard` takes no argument) can
//! only be thread-local. So [`WorkMeter::read`] takes no thread argument
//! and reads the calling thread's own count; it must be async-signal-safe
//! and never allocate. The meter is chosen once per process, in
//! [`select`], from the clock's configuration: a second way to measure
//! work is a new implementation and one arm there, not a branch in the
//! clock's callers.

use firmware_model::abi::clock::{ClockConfig, WorkMeasure};

use super::counter;

/// A per-thread, monotonic measure of work done.
pub trait WorkMeter: Sync + 'static {
    /// The calling thread's work so far, in the meter's own units (ns of
    /// CPU time, counted edges). Async-signal-safe; never allocates.
    fn read(&self) -> u64;
    /// `units` of work as ns of the reference processor at scale 1 (so the
    /// configuration's scales apply as to CPU time); `u64::MAX` when that
    /// does not fit. Work is summed in units and converted once: a sum of
    /// converted pieces would round differently with how the work was cut
    /// (where the host's timing made a thread switch to protocol work).
    fn to_ns(&self, units: u64) -> u64;
    /// The meter's name in records and messages.
    fn name(&self) -> &'static str;
}

/// The thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuTime;

impl WorkMeter for CpuTime {
    fn read(&self) -> u64 {
        thread_cpu_ns()
    }
    fn to_ns(&self, units: u64) -> u64 {
        units
    }
    fn name(&self) -> &'static str {
        "cpu-time"
    }
}

/// Counted work (issue 39): the calling thread's count of instrumented
/// edges and blocks (`counter.rs`), as ns of this host's processor at
/// [`EDGE_PS`] each. Deterministic: the same program on the same data reads
/// the same on every run, whatever the host's load. The application's and
/// the protocol's rates are then the clock's two scales, as for CPU time.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountedWork;

/// The committed rates (one table, shared with the host:
/// `firmware_model::abi::reference`): [`EDGE_PS`], what scale 1 means under
/// counted work, and the paper processor's protocol scale.
pub use firmware_model::abi::reference::{EDGE_PS, PAPER_PROTOCOL_SCALE};

/// Counted edges as ns at [`EDGE_PS`]; `u64::MAX` when that does not fit
/// (only past 2^64 ns of work: the clock then records an overflow,
/// `WorkFault::Overflow`, rather than go on from a wrong time).
pub fn edges_to_ns(edges: u64) -> u64 {
    u64::try_from(u128::from(edges) * u128::from(EDGE_PS) / 1000).unwrap_or(u64::MAX)
}

impl WorkMeter for CountedWork {
    fn read(&self) -> u64 {
        counter::edges()
    }
    fn to_ns(&self, units: u64) -> u64 {
        edges_to_ns(units)
    }
    fn name(&self) -> &'static str {
        "counted"
    }
}

/// The meter a configuration asks for.
pub(super) fn select(config: &ClockConfig) -> &'static dyn WorkMeter {
    match config.work {
        WorkMeasure::CpuTime => &CpuTime,
        WorkMeasure::Counted => &CountedWork,
    }
}

/// This thread's CPU time in ns (`CLOCK_THREAD_CPUTIME_ID`): [`CpuTime`]'s
/// reading, and what a program times its sequential run by.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `ts`, which is valid
    // and writable; it is async-signal-safe (the SIGSEGV handler syncs too).
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0;
    }
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}
