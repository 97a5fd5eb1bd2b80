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

pub mod board;
mod config;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use board::{ClockBoard, SlotState};

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

struct Global {
    scale: f64,
    protocol_scale: f64,
    board: ClockBoard,
    config: ClockConfig,
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

/// This thread's CPU time in ns (`CLOCK_THREAD_CPUTIME_ID`).
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

const NO_SLOT: u32 = u32::MAX;

/// One thread's clock. Cells only (no allocation, no lock, no destructor),
/// so the fault handler may use it on the faulting thread.
struct ThreadClock {
    vt: Cell<u64>,
    cpu_mark: Cell<u64>,
    started: Cell<bool>,
    slot: Cell<u32>,
    waiting: Cell<u32>,
    /// Serving a request inside a wait ([`serve`]): its CPU counts.
    serving: Cell<bool>,
    /// In protocol code ([`tick_into`]): CPU counts at the
    /// protocol scale.
    protocol: Cell<bool>,
    stalled: Cell<Option<(u32, u64)>>,
    /// When the thread last synced, on the host's monotonic clock: what
    /// [`sync_when_due`] throttles by.
    synced_at: Cell<Option<Instant>>,
}

thread_local! {
    static CLOCK: ThreadClock = const {
        ThreadClock {
            vt: Cell::new(0),
            cpu_mark: Cell::new(0),
            started: Cell::new(false),
            slot: Cell::new(NO_SLOT),
            waiting: Cell::new(0),
            serving: Cell::new(false),
            protocol: Cell::new(false),
            stalled: Cell::new(None),
            synced_at: Cell::new(None),
        }
    };
}

fn scaled(ns: u64, scale: f64) -> u64 {
    if scale == 1.0 {
        ns
    } else {
        (ns as f64 * scale) as u64
    }
}

impl ThreadClock {
    fn start(&self) {
        if !self.started.get() {
            self.started.set(true);
            self.cpu_mark.set(thread_cpu_ns());
        }
    }

    /// Add the CPU time since the last sync (unless waiting) and any debt.
    fn advance(&self, g: &Global) -> u64 {
        self.start();
        let cpu = thread_cpu_ns();
        let used = cpu.saturating_sub(self.cpu_mark.get());
        self.cpu_mark.set(cpu);
        let mut vt = self.vt.get();
        if self.waiting.get() == 0 || self.serving.get() {
            let scale = if self.protocol.get() || self.serving.get() {
                g.protocol_scale
            } else {
                g.scale
            };
            vt = vt.saturating_add(scaled(used, scale));
        }
        let slot = self.slot.get();
        if slot != NO_SLOT {
            vt = vt.saturating_add(g.board.take_debt(slot));
        }
        vt
    }

    fn set(&self, g: &Global, vt: u64) {
        let old = self.vt.replace(vt);
        let slot = self.slot.get();
        if slot != NO_SLOT {
            g.board.publish(slot, vt, old);
        }
    }

    fn gate(&self, g: &Global) {
        let slot = self.slot.get();
        if slot == NO_SLOT || self.waiting.get() > 0 {
            return;
        }
        let mut stalled = self.stalled.get();
        if g.board.gate(slot, self.vt.get(), &mut stalled) {
            QUANTUM_BREAKS.fetch_add(1, Ordering::Relaxed);
        }
        self.stalled.set(stalled);
        // Time spent held at the gate is waiting, not computing.
        self.cpu_mark.set(thread_cpu_ns());
    }
}

/// Bring this thread's clock up to date (its CPU time since the last sync),
/// show it on the board, and hold the thread while it is more than a
/// quantum ahead of the slowest. Returns its virtual time (0 when off).
pub fn sync() -> u64 {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return 0;
    };
    CLOCK.with(|c| {
        let vt = c.advance(g);
        c.set(g, vt);
        c.gate(g);
        c.synced_at.set(Some(Instant::now()));
        c.vt.get()
    })
}

/// How often a thread that polls in a tight loop syncs at most
/// ([`sync_when_due`]), in the host's time.
pub const SYNC_GAP: Duration = Duration::from_micros(50);

/// [`sync`], unless this thread synced less than [`SYNC_GAP`] ago (on the
/// host's monotonic clock, which costs a fraction of reading the thread's
/// CPU clock, a system call): for a safe point a program passes every
/// microsecond or so (`Csm::poll` at loop back edges). Syncing there every
/// few polls cost Gauss 1024's processors more CPU time than half the
/// sequential program's whole computation, and that cost, counted as
/// computing, varied with the host's load (docs/virtual-time.md s.8).
/// Returns the thread's time as last synced (0 when off).
pub fn sync_when_due() -> u64 {
    if !enabled() {
        return 0;
    }
    let due = CLOCK.with(|c| c.synced_at.get().is_none_or(|t| t.elapsed() >= SYNC_GAP));
    if due {
        sync()
    } else {
        stamp()
    }
}

/// When a store of `bytes` sent at virtual time `send` arrives, at Memory
/// Channel 2 timing (`firmware_model::vtime::arrival`): for a receiver that
/// knows the sender's time from the data itself.
pub fn one_way(send: u64, bytes: u64) -> u64 {
    firmware_model::vtime::arrival(firmware_model::Nanos(send), bytes).0
}

/// This thread's virtual time, brought up to date ([`sync`]).
pub fn now() -> u64 {
    sync()
}

/// Bring this thread's clock up to date and show it on the board, without
/// the quantum's gate: for code that may hold a lock another thread needs
/// (an activity change inside the protocol, a batch of stores), where
/// holding the thread could hold the slowest one too. Returns its time.
pub fn tick() -> u64 {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return 0;
    };
    CLOCK.with(|c| {
        let vt = c.advance(g);
        c.set(g, vt);
        vt
    })
}

/// [`tick`], then count this thread's CPU time from now on as protocol work
/// (`true`: faults, twins, diffs, serving, at the protocol scale) or as the
/// application's computing (`false`, at the CPU scale). Returns its time.
pub fn tick_into(protocol: bool) -> u64 {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return 0;
    };
    CLOCK.with(|c| {
        let vt = c.advance(g);
        c.set(g, vt);
        c.protocol.set(protocol);
        vt
    })
}

/// The thread is inside a wait ([`wait_begin`] .. [`wait_end`]).
pub fn waiting() -> bool {
    enabled() && CLOCK.with(|c| c.waiting.get() > 0)
}

/// Serve a request that arrived at `arrival`, found by a poll (seed 000
/// s.2.1's polling, or a waiter answering while it waits;
/// docs/virtual-time.md s.5).
///
/// The service happens at the request's arrival, whoever does it and
/// whenever the host ran it: its CPU time counts from `arrival`, and what
/// it sends is stamped so. (The real cluster's processors poll every few
/// microseconds, at loop back-edges; on this host a poller may notice the
/// request only after its clock has run far past the arrival while the
/// requester waited, and a reply stamped then would make the prediction
/// follow the host's scheduling.) When the returned guard drops, a thread
/// that was waiting gets its clock back (its processor was idle); a thread
/// that was computing gets its clock back plus the service's time (its
/// processor did the work). A request from the server's own virtual future
/// (a computing poller leaves those, `cashmere::requests`) moves a
/// computing server's clock up to it first. Nested calls serve on the
/// outer one's terms. Without `arrival` the service starts at the thread's
/// own time.
pub fn serve(arrival: Option<u64>) -> Serving {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return Serving { restore: None };
    };
    CLOCK.with(|c| {
        let now = c.advance(g);
        c.set(g, now);
        if c.serving.get() {
            return Serving { restore: None };
        }
        let waiting = c.waiting.get() > 0;
        let at = arrival.unwrap_or(now);
        c.serving.set(true);
        // Not published: the board shows the thread's own time, which the
        // service does not move back.
        c.vt.set(at);
        Serving {
            restore: Some(Restore {
                back_to: if waiting { now } else { now.max(at) },
                from: at,
                add_service: !waiting,
            }),
        }
    })
}

/// A request being served ([`serve`]); dropping it ends the service.
#[derive(Debug)]
pub struct Serving {
    restore: Option<Restore>,
}

/// Where a server's clock goes when its service ends.
#[derive(Debug, Clone, Copy)]
struct Restore {
    /// Its own time, before the service.
    back_to: u64,
    /// When the service started.
    from: u64,
    /// The service's time is added (the thread was computing).
    add_service: bool,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let Some(r) = self.restore else {
            return;
        };
        let Some(g) = GLOBAL.get() else {
            return;
        };
        let _ = CLOCK.try_with(|c| {
            let end = c.advance(g);
            c.serving.set(false);
            let service = end.saturating_sub(r.from);
            let vt = if r.add_service {
                r.back_to.saturating_add(service)
            } else {
                r.back_to
            };
            c.set(g, vt);
        });
    }
}

/// This thread's virtual time as last synced: what a store carries (reading
/// the CPU clock per store would cost more than the store).
#[inline]
pub fn stamp() -> u64 {
    if !enabled() {
        return 0;
    }
    CLOCK.with(|c| c.vt.get())
}

/// Begin a wait for data: the time so far is counted, and the thread leaves
/// the board's floor until [`wait_end`]. Nests (a fault inside a wait).
pub fn wait_begin() {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return;
    };
    CLOCK.with(|c| {
        let vt = c.advance(g);
        c.set(g, vt);
        let depth = c.waiting.get();
        c.waiting.set(depth + 1);
        if depth == 0 && c.slot.get() != NO_SLOT {
            g.board.set_state(c.slot.get(), SlotState::Waiting);
        }
    });
}

/// End a wait: the CPU the wait burnt is not counted; the thread resumes at
/// the later of its own time and `arrival` (the data's virtual arrival, if
/// known), plus [`NOTICE_NS`]. Returns its new time.
///
/// At `trace` level it logs where a wait resumed (its caller) and how far
/// past the thread's own time: what to look at when a prediction moves.
#[track_caller]
pub fn wait_end(arrival: Option<u64>) -> u64 {
    if log::log_enabled!(log::Level::Trace) {
        if let Some(a) = arrival.filter(|_| enabled()) {
            let own = CLOCK.with(|c| c.vt.get());
            log::trace!(
                "vclock: the wait at {} resumed {} us past its thread's own time {} us",
                std::panic::Location::caller(),
                a.saturating_sub(own) / 1000,
                own / 1000
            );
        }
    }
    end_wait(arrival, NOTICE_NS)
}

/// End a wait that waited for the host's own machinery, nothing of the
/// emulated network (a transmit FIFO draining into the hub): its CPU is not
/// counted and no time is added. Returns the thread's time.
pub fn wait_end_quiet() -> u64 {
    end_wait(None, 0)
}

fn end_wait(arrival: Option<u64>, notice: u64) -> u64 {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return 0;
    };
    CLOCK.with(|c| {
        c.start();
        c.cpu_mark.set(thread_cpu_ns());
        let depth = c.waiting.get().saturating_sub(1);
        c.waiting.set(depth);
        let mut vt = c.vt.get();
        if let Some(a) = arrival {
            vt = vt.max(a);
        }
        vt = vt.saturating_add(notice);
        c.set(g, vt);
        if depth == 0 && c.slot.get() != NO_SLOT {
            g.board.set_state(c.slot.get(), SlotState::Running);
        }
        // No gate here: a wait may end with a lock held that the slowest
        // thread needs; the next [`sync`] holds the thread if it must.
        c.vt.get()
    })
}

/// Move this thread's clock to at least `vt` without waiting (a local
/// handoff whose time is known, e.g. a lock released at `vt` by a thread of
/// the same node, seen by a poll that found it free).
pub fn observe(vt: u64) {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return;
    };
    CLOCK.with(|c| {
        let now = c.advance(g);
        c.set(g, now.max(vt));
    });
}

/// Start this thread's clock at `vt` (a thread spawned by one whose time was
/// `vt`) and join the board: the thread then counts for the floor until the
/// returned guard drops. Without virtual time, the guard does nothing.
pub fn join(vt: u64) -> Result<Participant, VclockError> {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return Ok(Participant { slot: NO_SLOT });
    };
    CLOCK.with(|c| {
        if c.slot.get() != NO_SLOT {
            return Ok(Participant { slot: NO_SLOT });
        }
        let slot = g.board.claim(vt)?;
        c.slot.set(slot);
        c.vt.set(vt);
        c.started.set(true);
        c.cpu_mark.set(thread_cpu_ns());
        Ok(Participant { slot })
    })
}

/// The board slot of this thread, for [`charge`] by another thread.
pub fn my_slot() -> Option<u32> {
    if !enabled() {
        return None;
    }
    CLOCK.with(|c| Some(c.slot.get()).filter(|&s| s != NO_SLOT))
}

/// Charge `ns` of virtual time to the processor of `slot` (work another
/// thread, e.g. a protocol thread, did on its behalf).
pub fn charge(slot: u32, ns: u64) {
    if let Some(g) = GLOBAL.get().filter(|_| enabled()) {
        g.board.charge(slot, ns);
    }
}

/// CPU time of this thread since `mark` (a [`thread_cpu_ns`] reading), in
/// virtual ns at the protocol scale: what a piece of protocol work cost, to
/// charge elsewhere.
pub fn scaled_cpu_since(mark: u64) -> u64 {
    let scale = GLOBAL.get().map_or(1.0, |g| g.protocol_scale);
    scaled(thread_cpu_ns().saturating_sub(mark), scale)
}

/// A thread's place on the clock board; dropping it leaves the board.
#[derive(Debug)]
pub struct Participant {
    slot: u32,
}

impl Drop for Participant {
    fn drop(&mut self) {
        if self.slot == NO_SLOT {
            return;
        }
        if let Some(g) = GLOBAL.get() {
            g.board.release(self.slot);
        }
        let _ = CLOCK.try_with(|c| c.slot.set(NO_SLOT));
    }
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
