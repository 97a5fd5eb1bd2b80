//! Futex waits and wakes on a 32-bit word: the way a guest thread blocks
//! until another thread (of its process, or of another process sharing the
//! memory) changes the word.
//!
//! Spinning is the only way to low latency, but with more threads than cores
//! spinners starve the thread they wait for (docs/perf.md); a futex sleep
//! gives the core away and costs one wake-up (10-30 us here) when the waker
//! finds a sleeper. `Scope::Shared` words live in memory mapped `MAP_SHARED`
//! by several processes (the clock board), where the kernel keys the futex
//! by the file page, not the address.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Whether other processes may wait on the word too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Only threads of this process (the cheaper private futex).
    Private,
    /// Threads of any process that maps the word's memory `MAP_SHARED`.
    Shared,
}

impl Scope {
    fn flag(self) -> libc::c_int {
        match self {
            Scope::Private => libc::FUTEX_PRIVATE_FLAG,
            Scope::Shared => 0,
        }
    }
}

/// Sleep while `word` holds `expected`, at most `timeout`. Returns early on a
/// wake, a signal, or when the word already differs: the caller looks again.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Duration, scope: Scope) {
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos()),
    };
    // SAFETY: FUTEX_WAIT reads the aligned 32-bit word `word` points at,
    // which outlives this call; `ts` is a valid timespec on the stack. A
    // spurious or early return is harmless: callers look again.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | scope.flag(),
            expected,
            &ts as *const libc::timespec,
            0usize,
            0u32,
        );
    }
}

/// Wake every thread sleeping on `word`.
pub fn wake_all(word: &AtomicU32, scope: Scope) {
    // SAFETY: FUTEX_WAKE uses the word's address only as a key; it reads and
    // writes no memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | scope.flag(),
            i32::MAX,
            0usize,
            0usize,
            0u32,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[test]
    fn a_sleeper_is_woken_when_the_word_changes() {
        let word = Arc::new(AtomicU32::new(0));
        let w = word.clone();
        let t = std::thread::spawn(move || {
            while w.load(Ordering::Acquire) == 0 {
                wait(&w, 0, Duration::from_secs(10), Scope::Private);
            }
        });
        std::thread::sleep(Duration::from_millis(10));
        word.store(1, Ordering::Release);
        wake_all(&word, Scope::Private);
        t.join().unwrap();
    }

    #[test]
    fn a_wait_on_a_changed_word_returns_at_once() {
        let word = AtomicU32::new(5);
        // Expected 4, the word holds 5: EAGAIN at once, not a 10 s sleep.
        wait(&word, 4, Duration::from_secs(10), Scope::Shared);
    }
}
