//! What measures a thread's computing: a [`WorkMeter`] (issue 38). The
//! clock advances a thread's virtual time by the meter's reading since the
//! last sync, times the scale of the work (application or protocol).
//!
//! Today's meter is the thread's CPU time ([`CpuTime`]). A meter must be
//! readable from any code on the thread with no context: the SIGSEGV
//! handler syncs the clock, and a counter bumped by compiler-inserted
//! callbacks (SanitizerCoverage's `trace_pc_guard` takes no argument) can
//! only be thread-local. So [`WorkMeter::read`] takes no thread argument
//! and reads the calling thread's own count; it must be async-signal-safe
//! and never allocate. The meter is chosen once per process, in
//! [`select`], from the clock's configuration: a second way to measure
//! work is a new implementation and one arm there, not a branch in the
//! clock's callers.

use firmware_model::abi::clock::ClockConfig;

/// A per-thread, monotonic measure of work done.
pub trait WorkMeter: Sync + 'static {
    /// The calling thread's work so far, in ns of its reference processor at
    /// scale 1 (so the configuration's scales apply as to CPU time).
    /// Async-signal-safe; never allocates.
    fn read(&self) -> u64;
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
    fn name(&self) -> &'static str {
        "cpu-time"
    }
}

/// The meter a configuration asks for.
pub(super) fn select(_config: &ClockConfig) -> &'static dyn WorkMeter {
    &CpuTime
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
