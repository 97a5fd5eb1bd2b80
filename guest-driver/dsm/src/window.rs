//! The timed part of a program on one node (`mark_start` .. `mark_end`), in
//! wall-clock seconds since the node started and, with the virtual clock
//! on, in virtual nanoseconds (docs/virtual-time.md). Every thread marks
//! it; the node's window runs from the earliest start to the latest end.

use std::sync::Mutex;
use std::time::Instant;

use mc_api::vclock;

use crate::times;

/// A node's timed window; one owner, shared by the node's threads.
#[derive(Debug)]
pub struct TimedWindow {
    start: Instant,
    /// (start, end), seconds since `start`.
    wall: Mutex<(Option<f64>, Option<f64>)>,
    /// (earliest start, latest end), virtual ns.
    virt: Mutex<(Option<u64>, Option<u64>)>,
}

impl Default for TimedWindow {
    fn default() -> Self {
        TimedWindow::new()
    }
}

impl TimedWindow {
    /// A window whose clock starts now (the node's start).
    pub fn new() -> TimedWindow {
        TimedWindow {
            start: Instant::now(),
            wall: Mutex::new((None, None)),
            virt: Mutex::new((None, None)),
        }
    }

    /// Seconds since the node started.
    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// The calling thread enters the timed part. `then` runs once the
    /// window is open, before the thread's counted work starts (a protocol
    /// tells its own thread here).
    pub fn mark_start(&self, then: impl FnOnce()) {
        times::begin_window();
        if vclock::enabled() {
            let v = vclock::tick();
            let mut w = self.virt.lock().unwrap_or_else(|p| p.into_inner());
            w.0 = Some(w.0.map_or(v, |s| s.min(v)));
        }
        let t = self.elapsed();
        {
            let mut w = self.wall.lock().unwrap_or_else(|p| p.into_inner());
            w.0 = Some(w.0.map_or(t, |s| s.min(t)));
        }
        then();
        vclock::work_window(false);
    }

    /// The calling thread leaves the timed part; `then` runs after.
    pub fn mark_end(&self, then: impl FnOnce()) {
        vclock::work_window(true);
        times::end_window();
        if vclock::enabled() {
            let v = vclock::tick();
            let mut w = self.virt.lock().unwrap_or_else(|p| p.into_inner());
            w.1 = Some(w.1.map_or(v, |e| e.max(v)));
        }
        let t = self.elapsed();
        {
            let mut w = self.wall.lock().unwrap_or_else(|p| p.into_inner());
            w.1 = Some(w.1.map_or(t, |e| e.max(t)));
        }
        then();
    }

    /// Wall-clock seconds of the timed part, once it has ended.
    pub fn timed(&self) -> Option<f64> {
        let w = self.wall.lock().unwrap_or_else(|p| p.into_inner());
        Some(w.1? - w.0?)
    }

    /// The timed part in virtual ns (earliest start, latest end); none when
    /// the clock is off or counted work failed.
    pub fn virtual_window(&self) -> Option<(u64, u64)> {
        if vclock::work_fault().is_some() {
            return None;
        }
        let w = self.virt.lock().unwrap_or_else(|p| p.into_inner());
        Some((w.0?, w.1?))
    }

    /// The predicted time of the timed part, seconds.
    pub fn predicted(&self) -> Option<f64> {
        let (s, e) = self.virtual_window()?;
        #[allow(
            clippy::cast_precision_loss,
            reason = "a duration in ns, far below 2^52"
        )]
        Some(e.saturating_sub(s) as f64 / 1e9)
    }
}
