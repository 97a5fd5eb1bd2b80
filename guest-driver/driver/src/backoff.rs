//! One way for the guest side to wait for something another thread, another
//! node or the device is about to do: poll, spinning briefly, then yielding
//! the core a bounded number of times, then sleeping for growing intervals.
//!
//! Polling is the only way to low latency (the adapter raises no interrupt a
//! user-space driver can take, and a wake-up through the kernel costs tens of
//! microseconds here), but with more spinning threads than cores they starve
//! each other; so every waiter steps down from spinning to yielding to
//! sleeping, and never yields without bound (a `sched_yield` loop on a busy
//! machine is a storm of context switches that lets nobody progress).

use std::time::{Duration, Instant};

/// How a [`Backoff`] steps down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// Busy polls (with a CPU spin hint) before the first yield.
    pub spins: u32,
    /// Yields of the core before the first sleep.
    pub yields: u32,
    /// Longest single sleep; sleeps double from 1 us up to it.
    pub max_sleep: Duration,
}

impl BackoffPolicy {
    /// For waits that are usually short (a loopback, a device completion) but
    /// may last while another process runs.
    pub const DEFAULT: BackoffPolicy = BackoffPolicy {
        spins: 200,
        yields: 64,
        max_sleep: Duration::from_micros(50),
    };
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        BackoffPolicy::DEFAULT
    }
}

/// The state of one wait. Create one per wait; call [`Backoff::snooze`]
/// between polls.
#[derive(Debug)]
pub struct Backoff {
    policy: BackoffPolicy,
    step: u32,
    sleep: Duration,
    start: Instant,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new()
    }
}

impl Backoff {
    pub fn new() -> Backoff {
        Backoff::with_policy(BackoffPolicy::DEFAULT)
    }

    pub fn with_policy(policy: BackoffPolicy) -> Backoff {
        Backoff {
            policy,
            step: 0,
            sleep: Duration::from_micros(1),
            start: Instant::now(),
        }
    }

    /// Time since this wait began.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Still in the busy-polling phase.
    pub fn is_spinning(&self) -> bool {
        self.step < self.policy.spins
    }

    /// Wait a little before the next poll: spin, then yield, then sleep.
    pub fn snooze(&mut self) {
        let p = &self.policy;
        if self.step < p.spins {
            std::hint::spin_loop();
        } else if self.step < p.spins.saturating_add(p.yields) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(self.sleep);
            self.sleep = (self.sleep * 2).min(p.max_sleep.max(Duration::from_micros(1)));
        }
        self.step = self.step.saturating_add(1);
    }

    /// Start over at the spinning phase (progress was made; the next wait is
    /// likely short again). The clock is not reset.
    pub fn restart(&mut self) {
        self.step = 0;
        self.sleep = Duration::from_micros(1);
    }
}

/// Poll `f` until it yields a value or `timeout` has passed (`None`).
pub fn poll_until<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    poll_until_with(BackoffPolicy::DEFAULT, timeout, || {
        Ok::<_, std::convert::Infallible>(f())
    })
    .unwrap_or_else(|e| match e {})
}

/// Poll `f` until it yields a value (`Ok(Some)`), fails (`Err`), or
/// `timeout` has passed (`Ok(None)`). `f` is always called at least once,
/// and once more after the deadline, so a value that arrived during the
/// last snooze is not lost.
pub fn poll_until_with<T, E>(
    policy: BackoffPolicy,
    timeout: Duration,
    mut f: impl FnMut() -> Result<Option<T>, E>,
) -> Result<Option<T>, E> {
    let mut b = Backoff::with_policy(policy);
    loop {
        if let Some(v) = f()? {
            return Ok(Some(v));
        }
        // Reading the clock costs more than a spin: only past the spins.
        if !b.is_spinning() && b.elapsed() > timeout {
            return f();
        }
        b.snooze();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn steps_down_from_spinning_to_sleeping() {
        let p = BackoffPolicy {
            spins: 3,
            yields: 2,
            max_sleep: Duration::from_micros(8),
        };
        let mut b = Backoff::with_policy(p);
        for _ in 0..3 {
            assert!(b.is_spinning());
            b.snooze();
        }
        assert!(!b.is_spinning());
        b.snooze();
        b.snooze();
        // Sleeps double: 1, 2, 4, 8, then stay at the cap.
        for want in [1, 2, 4, 8, 8] {
            assert_eq!(b.sleep, Duration::from_micros(want));
            b.snooze();
        }
        b.restart();
        assert!(b.is_spinning());
    }

    #[test]
    fn a_value_set_by_another_thread_is_seen() {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            f.store(true, Ordering::Release);
        });
        let got = poll_until(Duration::from_secs(10), || {
            flag.load(Ordering::Acquire).then_some(7)
        });
        assert_eq!(got, Some(7));
        t.join().unwrap();
    }

    #[test]
    fn gives_up_after_the_timeout_but_not_before() {
        let start = Instant::now();
        let got: Option<()> = poll_until(Duration::from_millis(20), || None);
        assert_eq!(got, None);
        assert!(start.elapsed() >= Duration::from_millis(20));
        // An error ends the wait at once.
        let r: Result<Option<()>, &str> =
            poll_until_with(BackoffPolicy::DEFAULT, Duration::from_secs(60), || {
                Err("no")
            });
        assert_eq!(r, Err("no"));
    }
}
