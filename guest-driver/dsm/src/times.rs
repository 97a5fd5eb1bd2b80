//! Where each thread's time goes (`mc-guest csm ... --stats`): the protocol
//! activity a thread is in, clocked per thread, and the scheduler's view of
//! the thread from `/proc/self/task/TID/schedstat` (time on a core, time
//! runnable but waiting for one).
//!
//! Each thread keeps its own clock in thread-local cells (no lock, no
//! allocation: the fault handler enters `Fault` on the faulting thread). An
//! activity entered inside another pauses it, so the activities of a thread
//! add up to its wall time; whatever is in no activity is `compute`.
//!
//! In a predicted-time run (docs/virtual-time.md) every activity change
//! also brings the thread's virtual clock up to date (`vclock::tick`), and
//! the virtual time is kept per activity beside the wall time: the
//! breakdown's [`VirtualBreakdown`] (user, protocol, communication, wait).
//!
//! [`TimeBreakdown`] is plain data with public fields, ready to be derived
//! `Serialize` or extended with a variant's own activities (issue 18's
//! protocol variants): add an [`Activity`], a field, and a line in
//! [`TimeBreakdown::fields`].

use std::cell::Cell;
use std::time::Instant;

use mc_api::vclock;

/// What a thread is doing, for the breakdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Activity {
    /// The application's own work (and anything not below).
    Compute = 0,
    /// Resolving a page fault, except waiting for the page.
    Fault = 1,
    /// Waiting for a page (or a null message) from a remote home.
    Fetch = 2,
    /// Release: diffing dirty pages, sending diffs and write notices.
    Diff = 3,
    /// Acquire: taking write notices, invalidating, incoming diffs.
    Acquire = 4,
    /// Waiting at a barrier (the node's threads and the cluster).
    Barrier = 5,
    /// Waiting for a lock.
    Lock = 6,
    /// Waiting for a flag.
    Flag = 7,
    /// Answering other nodes (page requests, notice drains).
    Serve = 8,
    /// The protocol thread with nothing to do (blocked or spinning for a
    /// request).
    Idle = 9,
}

const ACTIVITIES: usize = 10;

struct ThreadClock {
    current: Cell<u8>,
    /// Nanoseconds since `EPOCH` when `current` was entered.
    since: Cell<u64>,
    acc: [Cell<u64>; ACTIVITIES],
    /// When the window began (nanoseconds since `EPOCH`); 0: not begun.
    began: Cell<u64>,
    sched_at_begin: Cell<(u64, u64, u64)>,
    /// The window as it was when it ended (`end_window`): the times, the
    /// wall time and the scheduler's times then.
    ended: Cell<bool>,
    frozen: [Cell<u64>; ACTIVITIES],
    frozen_wall: Cell<u64>,
    frozen_sched: Cell<Option<(u64, u64, u64)>>,
    /// Virtual time (ns) when `current` was entered, per activity since the
    /// window began, at the window's start and as frozen at its end.
    vsince: Cell<u64>,
    vacc: [Cell<u64>; ACTIVITIES],
    vbegan: Cell<u64>,
    vfrozen: [Cell<u64>; ACTIVITIES],
    vfrozen_end: Cell<u64>,
}

thread_local! {
    static CLOCK: ThreadClock = const {
        ThreadClock {
            current: Cell::new(0),
            since: Cell::new(0),
            acc: [const { Cell::new(0) }; ACTIVITIES],
            began: Cell::new(0),
            sched_at_begin: Cell::new((0, 0, 0)),
            ended: Cell::new(false),
            frozen: [const { Cell::new(0) }; ACTIVITIES],
            frozen_wall: Cell::new(0),
            frozen_sched: Cell::new(None),
            vsince: Cell::new(0),
            vacc: [const { Cell::new(0) }; ACTIVITIES],
            vbegan: Cell::new(0),
            vfrozen: [const { Cell::new(0) }; ACTIVITIES],
            vfrozen_end: Cell::new(0),
        }
    };
}

/// Nanoseconds on a monotonic clock shared by all threads.
fn now_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    // The first call is made in ordinary context (`Csm::start`), so the
    // handler never initialises the lock.
    #[allow(
        clippy::cast_possible_truncation,
        reason = "ns since the process began: 2^64 ns is 584 years"
    )]
    let ns = EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64;
    ns + 1
}

/// Make sure the shared clock is set up (before any handler may read it).
pub fn init() {
    now_ns();
}

/// In activity `a` until the guard is dropped; then back in the one before.
pub struct InActivity {
    prev: u8,
    /// A protocol activity's work counts even inside a region that the
    /// host's timing opened (`vclock::counter::Counted`); dropped before the
    /// clock switches back.
    counted: Option<vclock::counter::Counted>,
}

/// Count the virtual time since the last change to the current activity,
/// and count the CPU time from now on as activity `next`'s: the
/// application's computing or protocol work, each at its scale
/// (`vclock::tick_into`).
fn virtual_change(c: &ThreadClock, next: u8) {
    if !vclock::enabled() {
        return;
    }
    let v = vclock::tick_into(next != Activity::Compute as u8);
    let acc = &c.vacc[c.current.get() as usize];
    acc.set(acc.get() + v.saturating_sub(c.vsince.get()));
    c.vsince.set(v);
}

pub fn enter(a: Activity) -> InActivity {
    // The change of activity is bookkeeping, not work: under counted work
    // its edges would land in whichever class the thread was in, as often
    // as the host's timing has it look for requests.
    let prev = {
        let _bookkeeping = vclock::counter::Uncounted::enter();
        CLOCK.with(|c| {
            let t = now_ns();
            virtual_change(c, a as u8);
            let cur = c.current.get();
            let acc = &c.acc[cur as usize];
            acc.set(acc.get() + t.saturating_sub(c.since.get()));
            c.current.set(a as u8);
            c.since.set(t);
            cur
        })
    };
    // Protocol work counts (at the protocol's rate) even where the host's
    // timing decided that it happens (a poll that found a request, a fault
    // another thread's fetch did not spare): the region that decided it
    // leaves out only the way in and out.
    let counted = (a != Activity::Compute).then(vclock::counter::Counted::resume);
    InActivity { prev, counted }
}

impl Drop for InActivity {
    fn drop(&mut self) {
        // Pause first: the way back to the application is the region's.
        drop(self.counted.take());
        let _bookkeeping = vclock::counter::Uncounted::enter();
        CLOCK.with(|c| {
            let t = now_ns();
            virtual_change(c, self.prev);
            let cur = c.current.get();
            let acc = &c.acc[cur as usize];
            acc.set(acc.get() + t.saturating_sub(c.since.get()));
            c.current.set(self.prev);
            c.since.set(t);
        })
    }
}

/// Start this thread's window: clear its clock, note its scheduler times.
pub fn begin_window() {
    let sched = schedstat(gettid()).unwrap_or((0, 0, 0));
    CLOCK.with(|c| {
        let t = now_ns();
        for a in c.acc.iter().chain(&c.vacc) {
            a.set(0);
        }
        let v = vclock::tick();
        c.vsince.set(v);
        c.vbegan.set(v);
        c.since.set(t);
        c.began.set(t);
        c.sched_at_begin.set(sched);
        c.ended.set(false);
    })
}

/// End this thread's window: what [`breakdown`] reports from now on.
pub fn end_window() {
    let sched = schedstat(gettid());
    CLOCK.with(|c| {
        let (wall, acc) = now_in(c);
        for (f, a) in c.frozen.iter().zip(acc) {
            f.set(a);
        }
        c.frozen_wall.set(wall);
        c.frozen_sched.set(sched);
        virtual_change(c, c.current.get());
        for (f, a) in c.vfrozen.iter().zip(&c.vacc) {
            f.set(a.get());
        }
        c.vfrozen_end.set(c.vsince.get());
        c.ended.set(true);
    })
}

/// (wall time of the window, time per activity) now.
fn now_in(c: &ThreadClock) -> (u64, [u64; ACTIVITIES]) {
    let t = now_ns();
    let mut acc = [0u64; ACTIVITIES];
    for (i, a) in c.acc.iter().enumerate() {
        acc[i] = a.get();
    }
    acc[c.current.get() as usize] += t.saturating_sub(c.since.get());
    let began = if c.began.get() == 0 { 1 } else { c.began.get() };
    (t.saturating_sub(began), acc)
}

/// This thread's breakdown over its window: from [`begin_window`] (or the
/// start of the thread) to [`end_window`] (or now).
pub fn breakdown(thread: &str, node: u32) -> TimeBreakdown {
    CLOCK.with(|c| {
        let ((wall, acc), sched) = if c.ended.get() {
            let mut acc = [0u64; ACTIVITIES];
            for (a, f) in acc.iter_mut().zip(&c.frozen) {
                *a = f.get();
            }
            ((c.frozen_wall.get(), acc), c.frozen_sched.get())
        } else {
            (now_in(c), schedstat(gettid()))
        };
        let s0 = c.sched_at_begin.get();
        let mut b = TimeBreakdown::from_ns(thread, node, wall, &acc);
        if vclock::enabled() {
            let mut vacc = [0u64; ACTIVITIES];
            let end = if c.ended.get() {
                for (a, f) in vacc.iter_mut().zip(&c.vfrozen) {
                    *a = f.get();
                }
                c.vfrozen_end.get()
            } else {
                virtual_change(c, c.current.get());
                for (a, f) in vacc.iter_mut().zip(&c.vacc) {
                    *a = f.get();
                }
                c.vsince.get()
            };
            b.virtual_times = Some(VirtualBreakdown::from_ns(c.vbegan.get(), end, &vacc));
        }
        if let Some(s) = sched {
            b.on_cpu = Some((s.0.saturating_sub(s0.0)) as f64 / 1e9);
            b.runnable_waiting = Some((s.1.saturating_sub(s0.1)) as f64 / 1e9);
            b.timeslices = Some(s.2.saturating_sub(s0.2));
        }
        b
    })
}

pub fn gettid() -> i64 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// (ns on a core, ns runnable but waiting, timeslices) of thread `tid` of
/// this process.
pub fn schedstat(tid: i64) -> Option<(u64, u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let mut it = s.split_whitespace().map(|w| w.parse::<u64>().ok());
    Some((it.next()??, it.next()??, it.next()??))
}

/// One thread's time, in seconds, by activity (they add up to `wall`), and
/// the scheduler's view of it. Plain data: every field is public and of a
/// simple type, so it serialises as it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimeBreakdown {
    /// `app0`, `app1`, ... (global thread number) or `proto`.
    pub thread: String,
    pub node: u32,
    pub wall: f64,
    pub compute: f64,
    pub fault: f64,
    pub fetch: f64,
    pub diff: f64,
    pub acquire: f64,
    pub barrier: f64,
    pub lock: f64,
    pub flag: f64,
    pub serve: f64,
    pub idle: f64,
    /// On a core (schedstat), when /proc has it.
    pub on_cpu: Option<f64>,
    /// Runnable but not running: waiting for a core (schedstat).
    pub runnable_waiting: Option<f64>,
    pub timeslices: Option<u64>,
    /// The same window in virtual time, in a predicted-time run.
    pub virtual_times: Option<VirtualBreakdown>,
}

/// One thread's window in virtual time (docs/virtual-time.md), in seconds:
/// where it began and ended on the thread's virtual clock, and the time in
/// between by kind. They add up to `end - begin`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VirtualBreakdown {
    pub begin: f64,
    pub end: f64,
    /// The application's own work.
    pub user: f64,
    /// Protocol work: faults, diffs, acquires, serving requests.
    pub protocol: f64,
    /// Waiting for pages and acknowledgements from other nodes.
    pub communication: f64,
    /// Synchronisation: barriers, locks, flags (and a protocol thread's
    /// idle time).
    pub wait: f64,
}

impl VirtualBreakdown {
    fn from_ns(begin: u64, end: u64, acc: &[u64; ACTIVITIES]) -> VirtualBreakdown {
        let s = |a: &[Activity]| a.iter().map(|&x| acc[x as usize]).sum::<u64>() as f64 / 1e9;
        VirtualBreakdown {
            begin: begin as f64 / 1e9,
            end: end as f64 / 1e9,
            user: s(&[Activity::Compute]),
            protocol: s(&[
                Activity::Fault,
                Activity::Diff,
                Activity::Acquire,
                Activity::Serve,
            ]),
            communication: s(&[Activity::Fetch]),
            wait: s(&[
                Activity::Barrier,
                Activity::Lock,
                Activity::Flag,
                Activity::Idle,
            ]),
        }
    }

    /// (name, seconds) of each kind, in a fixed order.
    pub fn fields(&self) -> [(&'static str, f64); 5] {
        [
            ("total", self.end - self.begin),
            ("user", self.user),
            ("protocol", self.protocol),
            ("communication", self.communication),
            ("wait", self.wait),
        ]
    }
}

impl TimeBreakdown {
    fn from_ns(thread: &str, node: u32, wall: u64, acc: &[u64; ACTIVITIES]) -> TimeBreakdown {
        let s = |a: Activity| acc[a as usize] as f64 / 1e9;
        TimeBreakdown {
            thread: thread.to_string(),
            node,
            wall: wall as f64 / 1e9,
            compute: s(Activity::Compute),
            fault: s(Activity::Fault),
            fetch: s(Activity::Fetch),
            diff: s(Activity::Diff),
            acquire: s(Activity::Acquire),
            barrier: s(Activity::Barrier),
            lock: s(Activity::Lock),
            flag: s(Activity::Flag),
            serve: s(Activity::Serve),
            idle: s(Activity::Idle),
            on_cpu: None,
            runnable_waiting: None,
            timeslices: None,
            virtual_times: None,
        }
    }

    /// (name, seconds) of every time field, in a fixed order: what a table
    /// or a JSON object of the breakdown holds.
    pub fn fields(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("wall", self.wall),
            ("compute", self.compute),
            ("fault", self.fault),
            ("fetch", self.fetch),
            ("diff", self.diff),
            ("acquire", self.acquire),
            ("barrier", self.barrier),
            ("lock", self.lock),
            ("flag", self.flag),
            ("serve", self.serve),
            ("idle", self.idle),
        ];
        if let Some(x) = self.on_cpu {
            v.push(("on_cpu", x));
        }
        if let Some(x) = self.runnable_waiting {
            v.push(("runnable_waiting", x));
        }
        v
    }
}

impl std::fmt::Display for TimeBreakdown {
    /// `node N THREAD: wall W s = compute C + fault F + ... | on cpu X s,
    /// runnable Y s`, in milliseconds where under a second.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |x: f64| format!("{:.1}", x * 1e3);
        write!(
            f,
            "node {} {}: wall {} ms = compute {} + fault {} + fetch {} + diff {} + acquire {} \
             + barrier {} + lock {} + flag {} + serve {} + idle {}",
            self.node,
            self.thread,
            ms(self.wall),
            ms(self.compute),
            ms(self.fault),
            ms(self.fetch),
            ms(self.diff),
            ms(self.acquire),
            ms(self.barrier),
            ms(self.lock),
            ms(self.flag),
            ms(self.serve),
            ms(self.idle),
        )?;
        if let (Some(c), Some(w)) = (self.on_cpu, self.runnable_waiting) {
            write!(
                f,
                " | on a core {} ms, runnable but waiting {} ms, {} timeslices",
                ms(c),
                ms(w),
                self.timeslices.unwrap_or(0)
            )?;
        }
        if let Some(v) = &self.virtual_times {
            write!(
                f,
                " | virtual {} ms = user {} + protocol {} + communication {} + wait {}",
                ms(v.end - v.begin),
                ms(v.user),
                ms(v.protocol),
                ms(v.communication),
                ms(v.wait)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_activities_add_up_to_the_wall_time() {
        begin_window();
        {
            let _b = enter(Activity::Barrier);
            std::thread::sleep(std::time::Duration::from_millis(5));
            {
                let _d = enter(Activity::Diff);
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let b = breakdown("t", 0);
        assert!(b.barrier >= 0.009 && b.diff >= 0.004, "{b}");
        let sum: f64 = b.fields()[1..11].iter().map(|(_, v)| v).sum();
        assert!((sum - b.wall).abs() < 1e-6, "{sum} vs {}", b.wall);
        assert!(b.on_cpu.is_some(), "schedstat readable on Linux");
    }
}
