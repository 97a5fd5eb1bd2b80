//! Each thread's clock ([`ThreadClock`], a thread-local of cells, so the
//! fault handler may use it): syncing it with its work meter, ticking it
//! into protocol or application work, joining the board.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use firmware_model::abi::clock::WorkMeasure;

use super::counter::Uncounted;
use super::{enabled, fault, Global, VclockError, WorkFault, GLOBAL, QUANTUM_BREAKS};

pub(super) const NO_SLOT: u32 = u32::MAX;

/// One thread's clock. Cells only (no allocation, no lock, no destructor),
/// so the fault handler may use it on the faulting thread.
pub(super) struct ThreadClock {
    pub(super) vt: Cell<u64>,
    /// The meter's reading (its units) at the last sync.
    pub(super) cpu_mark: Cell<u64>,
    pub(super) started: Cell<bool>,
    pub(super) slot: Cell<u32>,
    pub(super) waiting: Cell<u32>,
    /// Serving a request inside a wait ([`serve`]): its CPU counts.
    pub(super) serving: Cell<bool>,
    /// In protocol code ([`tick_into`]): CPU counts at the
    /// protocol scale.
    pub(super) protocol: Cell<bool>,
    pub(super) stalled: Cell<Option<(u32, u64)>>,
    /// When the thread last synced, on the host's monotonic clock: what
    /// [`sync_when_due`] throttles by.
    pub(super) synced_at: Cell<Option<Instant>>,
    /// Virtual ns of work the meter cannot see, charged by the model
    /// ([`super::unseen`]) and not yet added.
    pub(super) unseen: Cell<u64>,
    /// The meter's readings the clock counted, as the application's
    /// computing and as protocol work (the meter's units, reported in ns
    /// at scale 1): what a thread reports when it leaves ([`Participant`]).
    pub(super) app_work: Cell<u64>,
    pub(super) protocol_work: Cell<u64>,
    /// Those two at the start of the thread's timed part, and over it
    /// ([`work_window`]).
    pub(super) window_start: Cell<Option<(u64, u64)>>,
    pub(super) window: Cell<Option<(u64, u64)>>,
}

thread_local! {
    pub(super) static CLOCK: ThreadClock = const {
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
            unseen: Cell::new(0),
            app_work: Cell::new(0),
            protocol_work: Cell::new(0),
            window_start: Cell::new(None),
            window: Cell::new(None),
        }
    };
}

#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a float-to-integer `as` saturates: a scale is positive (checked when configured) and ns past 2^64 stay at u64::MAX"
)]
fn scaled(ns: u64, scale: f64) -> u64 {
    if scale == 1.0 {
        ns
    } else {
        (ns as f64 * scale) as u64
    }
}

impl ThreadClock {
    pub(super) fn start(&self, g: &Global) {
        if !self.started.get() {
            self.started.set(true);
            self.cpu_mark.set(g.meter.read());
        }
    }

    /// The meter's reading, checked: a reading below the last one (a
    /// counter that wrapped or that something else wrote) or one that no
    /// longer fits in ns is recorded as the run's fault ([`super::check`]).
    pub(super) fn read(&self, g: &Global) -> u64 {
        let now = g.meter.read();
        let mark = self.cpu_mark.get();
        if g.meter.to_ns(now) == u64::MAX {
            fault(WorkFault::Overflow);
        } else if now < mark {
            fault(WorkFault::Backwards {
                before: mark,
                after: now,
            });
        }
        now
    }

    /// Add the work since the last sync (unless waiting), the unseen work
    /// charged meanwhile, and any debt.
    pub(super) fn advance(&self, g: &Global) -> u64 {
        self.start(g);
        let cpu = self.read(g);
        let mark = self.cpu_mark.replace(cpu);
        let used = cpu.saturating_sub(mark);
        // In ns as the difference of the two readings' ns, so that a
        // thread's time does not depend on how often it synced.
        let used_ns = g.meter.to_ns(cpu).saturating_sub(g.meter.to_ns(mark));
        let mut vt = self.vt.get();
        if self.waiting.get() == 0 || self.serving.get() {
            let protocol = self.protocol.get() || self.serving.get();
            let (scale, sum) = if protocol {
                (g.protocol_scale, &self.protocol_work)
            } else {
                (g.scale, &self.app_work)
            };
            sum.set(sum.get().saturating_add(used));
            vt = vt.saturating_add(scaled(used_ns, scale));
        }
        vt = vt.saturating_add(self.unseen.take());
        let slot = self.slot.get();
        if slot != NO_SLOT {
            vt = vt.saturating_add(g.board.take_debt(slot));
        }
        vt
    }

    pub(super) fn set(&self, g: &Global, vt: u64) {
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
        self.cpu_mark.set(self.read(g));
    }
}

/// Bring this thread's clock up to date (its CPU time since the last sync),
/// show it on the board, and hold the thread while it is more than a
/// quantum ahead of the slowest. Returns its virtual time (0 when off).
pub fn sync() -> u64 {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return 0;
    };
    let _uncounted = Uncounted::enter();
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
    // Whether it is due follows the host's clock: none of it is work.
    let _uncounted = Uncounted::enter();
    let due = CLOCK.with(|c| c.synced_at.get().is_none_or(|t| t.elapsed() >= SYNC_GAP));
    if due {
        sync()
    } else {
        stamp()
    }
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
    let _uncounted = Uncounted::enter();
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
    let _uncounted = Uncounted::enter();
    CLOCK.with(|c| {
        let vt = c.advance(g);
        c.set(g, vt);
        c.protocol.set(protocol);
        vt
    })
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

/// Move this thread's clock to at least `vt` without waiting (a local
/// handoff whose time is known, e.g. a lock released at `vt` by a thread of
/// the same node, seen by a poll that found it free).
pub fn observe(vt: u64) {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return;
    };
    let _uncounted = Uncounted::enter();
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
        return Ok(Participant::none());
    };
    let _uncounted = Uncounted::enter();
    CLOCK.with(|c| {
        if c.slot.get() != NO_SLOT {
            return Ok(Participant::none());
        }
        let slot = g.board.claim(vt)?;
        c.slot.set(slot);
        c.vt.set(vt);
        c.started.set(true);
        let at = g.meter.read();
        c.cpu_mark.set(at);
        c.app_work.set(0);
        c.protocol_work.set(0);
        c.window_start.set(None);
        c.window.set(None);
        Ok(Participant {
            slot,
            joined_at: at,
            label: None,
        })
    })
}

/// Mark the start (`end == false`) or the end of this thread's timed part
/// in the work it counted, after a [`tick`]: what it reports, beside its
/// whole life's work, when it leaves the board ([`Participant`]). A
/// program's `Csm::mark_start` and `mark_end` call it, so the report
/// leaves out what a thread did before and after (a verification that the
/// first thread of a node to get there does, say).
pub fn work_window(end: bool) {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return;
    };
    let _uncounted = Uncounted::enter();
    CLOCK.with(|c| {
        let vt = c.advance(g);
        c.set(g, vt);
        let now = (c.app_work.get(), c.protocol_work.get());
        if !end {
            c.window_start.set(Some(now));
        } else if let Some(s) = c.window_start.get() {
            c.window
                .set(Some((now.0.saturating_sub(s.0), now.1.saturating_sub(s.1))));
        }
    });
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
        let _uncounted = Uncounted::enter();
        g.board.charge(slot, ns);
    }
}

/// This thread's work so far as the run's meter reads it, in ns at scale 1:
/// its counted work under `--work counted`, otherwise (and outside virtual
/// time) its CPU time. What a sequential program is timed by, so that a
/// predicted speedup divides like by like.
pub fn work_ns() -> u64 {
    GLOBAL.get().map_or_else(super::meter::thread_cpu_ns, |g| {
        g.meter.to_ns(g.meter.read())
    })
}

/// This thread's work meter reading (0 when off): the mark a piece of
/// protocol work is measured from ([`protocol_work_since`]).
pub fn work_mark() -> u64 {
    GLOBAL.get().map_or(0, |g| g.meter.read())
}

/// The work this thread did since `mark` (a [`work_mark`]), in virtual ns at
/// the protocol scale: what a piece of protocol work cost, to charge
/// elsewhere.
pub fn protocol_work_since(mark: u64) -> u64 {
    GLOBAL.get().map_or(0, |g| {
        let m = g.meter;
        scaled(
            m.to_ns(m.read()).saturating_sub(m.to_ns(mark)),
            g.protocol_scale,
        )
    })
}

/// A thread's place on the clock board; dropping it leaves the board.
///
/// When it leaves, the thread reports the work its clock counted
/// (`RUST_LOG=mc_driver::vclock::work=info`: the application's and the
/// protocol's, in ns at scale 1; under counted work the same on every run of
/// a deterministic program). Under counted work a thread that counted
/// nothing from joining to leaving (its code is not instrumented) makes the
/// run's fault ([`super::check`]): its time would be a wrong prediction.
#[derive(Debug)]
pub struct Participant {
    slot: u32,
    /// The meter's reading when the thread joined.
    joined_at: u64,
    /// (node, thread of the node), for the report.
    label: Option<(u32, u32)>,
}

impl Participant {
    fn none() -> Participant {
        Participant {
            slot: NO_SLOT,
            joined_at: 0,
            label: None,
        }
    }

    /// Name the thread in what it reports when it leaves: thread `local`
    /// of node `node`.
    pub fn label(&mut self, node: u32, local: u32) {
        self.label = Some((node, local));
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        if self.slot == NO_SLOT {
            return;
        }
        if let Some(g) = GLOBAL.get() {
            let _uncounted = Uncounted::enter();
            let _ = CLOCK.try_with(|c| {
                // Count what it did since its last sync.
                let vt = c.advance(g);
                c.set(g, vt);
                let ns = |units| g.meter.to_ns(units);
                let (app, protocol) = (ns(c.app_work.get()), ns(c.protocol_work.get()));
                let who = match self.label {
                    Some((n, l)) => format!("node {n} thread {l}"),
                    None => format!("board slot {}", self.slot),
                };
                let timed = match c.window.get() {
                    Some((a, p)) => {
                        let (a, p) = (ns(a), ns(p));
                        format!("; in the timed part: application {a} ns, protocol {p} ns")
                    }
                    None => String::new(),
                };
                log::info!(
                    target: "mc_driver::vclock::work",
                    "{who}: {} work: application {app} ns, protocol {protocol} ns{timed} \
                     (at scale 1)",
                    g.meter.name()
                );
                if g.config.work == WorkMeasure::Counted && g.meter.read() == self.joined_at {
                    fault(WorkFault::NeverCounted { slot: self.slot });
                }
            });
            g.board.release(self.slot);
        }
        let _ = CLOCK.try_with(|c| c.slot.set(NO_SLOT));
    }
}
