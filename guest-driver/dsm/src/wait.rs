//! The one way Cashmere waits: spin briefly, then sleep on the node's
//! doorbell, which whoever makes progress possible rings.
//!
//! Almost everything a node waits for is a store from the network into its
//! mailbox (a reply, a barrier arrival or sense, its own echo, a ring), and
//! every such store raises an interrupt-on-receive event (seed 004). The
//! node's protocol thread is the one thread that blocks on the adapter's
//! event signal; each time it wakes and takes events it rings the doorbell,
//! a futex word, and every other waiter of the node (application threads,
//! including ones resolving a fault inside the SIGSEGV handler) sleeps on
//! that word. Local changes (a thread of the node setting a flag, the stop at
//! `finish`) ring it directly.
//!
//! Spinning first keeps short waits cheap (a wake-up costs 10-30 us here);
//! sleeping after it gives the core to the threads the wait depends on (the
//! hub, the other node's protocol thread) when there are fewer cores than
//! runnable threads. How long to spin is learnt per node and kind of wait
//! (`AdaptiveSpin`). A spinning waiter yields its core every 8th look, so a
//! thread woken on that core (perhaps the one it waits for) runs at once;
//! none loops on `sched_yield` alone.
//!
//! Signal safety: `futex(2)` and `clock_gettime` are system calls with no
//! user-space locks or allocation; a waiter in the fault handler uses this
//! as any other thread does.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mc_api::futex::{self, Scope};
use mc_api::vclock;

/// What a wait is for: it decides how long the waiter spins first and how
/// long one sleep lasts at most before it looks again (a bound, for
/// wake-ups that cannot come: a lost packet, a crashed node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// Another node's answer (a page, a barrier, a flag): a round trip
    /// through the hub and a remote thread.
    Remote,
    /// This node's own loopback: one pass of the hub.
    Loopback,
}

impl WaitKind {
    fn nap(self) -> Duration {
        match self {
            WaitKind::Remote => Duration::from_millis(5),
            WaitKind::Loopback => Duration::from_millis(2),
        }
    }
}

/// How long to spin before sleeping, learnt from the waits before (as an
/// adaptive mutex does): a wait that ended while spinning lengthens the
/// spin, one that had to sleep shortens it. With a core per thread, waits
/// end while spinning and the spin grows to cover them (no wake-up costs);
/// with more threads than cores, a spinner holds a core the thread it waits
/// for needs, waits end asleep, and the spin shrinks to almost nothing.
#[derive(Debug)]
struct AdaptiveSpin {
    micros: AtomicU32,
    min: u32,
    max: u32,
}

impl AdaptiveSpin {
    const fn new(start: u32, min: u32, max: u32) -> AdaptiveSpin {
        AdaptiveSpin {
            micros: AtomicU32::new(start),
            min,
            max,
        }
    }

    fn get(&self) -> Duration {
        Duration::from_micros(u64::from(self.micros.load(Ordering::Relaxed)))
    }

    fn ended_spinning(&self) {
        let m = self.micros.load(Ordering::Relaxed);
        self.micros
            .store((m + m / 4 + 1).min(self.max), Ordering::Relaxed);
    }

    fn had_to_sleep(&self) {
        let m = self.micros.load(Ordering::Relaxed);
        self.micros.store((m / 2).max(self.min), Ordering::Relaxed);
    }
}

/// The node's doorbell: a generation counter threads sleep on, and what the
/// node has learnt about how long to spin.
#[derive(Debug)]
pub struct FutexBell {
    generation: AtomicU32,
    sleepers: AtomicU32,
    /// Counts the application threads' looks for requests they would
    /// answer (`Node::serve_if_waiting`: `Csm::poll`, barrier and flag
    /// waits; a fetch's wait): while it moves and nobody sleeps here,
    /// requests are noticed without the adapter's interrupt.
    polls: AtomicU32,
    /// The protocol thread is ticking instead of waiting for the interrupt
    /// (`FutexBell::tick`): a thread about to sleep here wakes it first.
    ticking: AtomicBool,
    remote: AdaptiveSpin,
    loopback: AdaptiveSpin,
    /// The protocol thread's spin after its last piece of work.
    protocol: AdaptiveSpin,
}

impl Default for FutexBell {
    fn default() -> Self {
        FutexBell {
            generation: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            polls: AtomicU32::new(0),
            ticking: AtomicBool::new(false),
            remote: AdaptiveSpin::new(50, 2, 300),
            loopback: AdaptiveSpin::new(20, 2, 100),
            protocol: AdaptiveSpin::new(20, 2, 200),
        }
    }
}

impl FutexBell {
    /// Something a waiter may be waiting for has happened: wake them all to
    /// look again.
    pub fn ring(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            futex::wake_all(&self.generation, Scope::Private);
        }
    }

    /// An application thread looked for requests to answer.
    #[inline]
    pub fn polled(&self) {
        // Not a read-modify-write: two threads' counts may collide, and the
        // count still moves, which is all the protocol thread looks at.
        let n = self.polls.load(Ordering::Relaxed);
        self.polls.store(n.wrapping_add(1), Ordering::Relaxed);
    }

    /// The poll count, to compare with a later one: the application threads
    /// poll if it moved and no waiter sleeps (a sleeper needs the rings the
    /// interrupt brings).
    pub fn polls(&self) -> Option<u32> {
        (self.sleepers.load(Ordering::SeqCst) == 0).then(|| self.polls.load(Ordering::Relaxed))
    }

    /// The protocol thread sleeps `tick` at most, not waiting for the
    /// interrupt, while the application threads poll; a ring (or a thread
    /// about to sleep on the bell) ends it early.
    pub fn tick(&self, tick: Duration) {
        self.ticking.store(true, Ordering::SeqCst);
        let seen = self.generation.load(Ordering::SeqCst);
        // Looked at after `ticking` is set: a waiter that registers after
        // this look finds it set and rings.
        if self.sleepers.load(Ordering::SeqCst) == 0 {
            futex::wait(&self.generation, seen, tick, Scope::Private);
        }
        self.ticking.store(false, Ordering::SeqCst);
    }

    /// How long the protocol thread looks for more work before it sleeps.
    pub fn protocol_spin(&self) -> Duration {
        self.protocol.get()
    }

    /// The protocol thread found work while spinning (`true`), or went to
    /// sleep (`false`): its next spin is longer, or shorter.
    pub fn protocol_spun(&self, found_work: bool) {
        if found_work {
            self.protocol.ended_spinning();
        } else {
            self.protocol.had_to_sleep();
        }
    }

    fn spin_of(&self, what: WaitKind) -> &AdaptiveSpin {
        match what {
            WaitKind::Remote => &self.remote,
            WaitKind::Loopback => &self.loopback,
        }
    }

    /// Wait until `ready` yields a value or an error: spin a while, then
    /// sleep until the doorbell rings (at most a nap at a time). `ready`
    /// decides about timeouts and failures (it returns `Err`).
    ///
    /// In virtual time the wait costs the thread nothing of its own; it
    /// resumes at `arrival()`, the virtual arrival of what it waited for
    /// (read once `ready` saw it), if that is later than its own time
    /// (`vclock::wait_end`; docs/virtual-time.md s.5).
    #[track_caller]
    pub fn wait<T, E>(
        &self,
        what: WaitKind,
        ready: impl FnMut() -> Result<Option<T>, E>,
        arrival: impl FnOnce() -> Option<u64>,
    ) -> Result<T, E> {
        vclock::wait_begin();
        let r = self.wait_untimed(what, ready);
        vclock::wait_end(if r.is_ok() { arrival() } else { None });
        r
    }

    fn wait_untimed<T, E>(
        &self,
        what: WaitKind,
        mut ready: impl FnMut() -> Result<Option<T>, E>,
    ) -> Result<T, E> {
        let adaptive = self.spin_of(what);
        let spin = adaptive.get();
        let start = Instant::now();
        let mut polls = 0u32;
        loop {
            if let Some(v) = ready()? {
                adaptive.ended_spinning();
                return Ok(v);
            }
            polls += 1;
            // Reading the clock costs more than a poll: every 32nd.
            if polls % 32 == 0 && start.elapsed() >= spin {
                break;
            }
            if polls % 8 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        adaptive.had_to_sleep();
        loop {
            // Registered before looking: a ring after the look either bumps
            // the generation we sleep on (the futex returns at once) or sees
            // us registered and wakes us.
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            if self.ticking.load(Ordering::SeqCst) {
                // The protocol thread is not waiting for the interrupt
                // whose ring this sleep needs: back to it.
                self.ring();
            }
            let seen = self.generation.load(Ordering::SeqCst);
            let r = ready();
            if !matches!(r, Ok(None)) {
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                return r.map(|v| v.expect("checked above"));
            }
            futex::wait(&self.generation, seen, what.nap(), Scope::Private);
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Wait until this node's echo `mark` is back (`seen() >= mark`). An echo
/// is a packet like any other: where packets may be lost (no `--reliable`),
/// one that does not come back in 50 ms is posted again (`post` returns the
/// new mark), and the wait goes on for that one. `meanwhile` runs at every
/// look (answering requests, say) and ends the wait with its error (a node
/// failed, too long).
///
/// `arrival` gives the echo's virtual arrival, once back.
pub fn await_echo<E>(
    bell: &FutexBell,
    mut mark: u64,
    post: impl Fn() -> Result<u64, E>,
    seen: impl Fn() -> u64,
    mut meanwhile: impl FnMut() -> Result<(), E>,
    arrival: impl FnOnce() -> Option<u64>,
) -> Result<(), E> {
    const AGAIN: Duration = Duration::from_millis(50);
    let mut asked = Instant::now();
    bell.wait(
        WaitKind::Loopback,
        || {
            if seen() >= mark {
                return Ok(Some(()));
            }
            meanwhile()?;
            if asked.elapsed() > AGAIN {
                mark = post()?;
                asked = Instant::now();
            }
            Ok(None)
        },
        arrival,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn a_sleeping_waiter_is_woken_by_a_ring() {
        let bell = Arc::new(FutexBell::default());
        let flag = Arc::new(AtomicBool::new(false));
        let (b, f) = (bell.clone(), flag.clone());
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            f.store(true, Ordering::Release);
            b.ring();
        });
        let start = Instant::now();
        // The flag comes 20 ms later: past any spin, and past the 5 ms
        // nap, so the ring or a nap ends each sleep.
        let got: Result<u32, ()> = bell.wait(
            WaitKind::Remote,
            || Ok(flag.load(Ordering::Acquire).then_some(7)),
            || None,
        );
        assert_eq!(got, Ok(7));
        assert!(start.elapsed() < Duration::from_secs(10));
        t.join().unwrap();
    }

    #[test]
    fn an_error_ends_the_wait_and_a_nap_bounds_a_lost_ring() {
        let bell = FutexBell::default();
        let start = Instant::now();
        // Nobody rings: the naps let `ready` see its own deadline. (Far
        // longer than the spin, so that a preemption of the spinning
        // thread on a loaded host cannot end the wait before it slept.)
        let r: Result<(), &str> = bell.wait(
            WaitKind::Loopback,
            || {
                if start.elapsed() > Duration::from_millis(200) {
                    Err("late")
                } else {
                    Ok(None)
                }
            },
            || None,
        );
        assert_eq!(r, Err("late"));
        // It had to sleep: the next waits spin less.
        assert!(bell.loopback.get() < Duration::from_micros(20));
    }

    #[test]
    fn the_spin_grows_while_waits_end_spinning_and_stays_bounded() {
        let s = AdaptiveSpin::new(10, 2, 40);
        for _ in 0..50 {
            s.ended_spinning();
        }
        assert_eq!(s.get(), Duration::from_micros(40));
        for _ in 0..50 {
            s.had_to_sleep();
        }
        assert_eq!(s.get(), Duration::from_micros(2));
    }
}
