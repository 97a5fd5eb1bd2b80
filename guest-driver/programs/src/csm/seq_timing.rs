//! Where a sequential program's timed computation begins: the programs
//! mark it ([`compute_begins`]) and the suite's timing of them
//! (`suite::time_sequential_cpu`) reads it. Its own module so the
//! applications need nothing from the suite that registers them.

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    /// Where this thread's sequential program began computing (after its
    /// initialisation): CPU ns and wall instant ([`compute_begins`]).
    static COMPUTE_BEGAN: Cell<Option<(u64, Instant)>> = const { Cell::new(None) };
}

/// A sequential program calls this when its initialisation is done and its
/// computation begins: the timed part, as the parallel version's window
/// begins after its initialisation (`Csm::mark_start`). Outside
/// `suite::time_sequential_cpu` (a program computing its reference result)
/// it only notes the time.
pub(crate) fn compute_begins() {
    COMPUTE_BEGAN.with(|c| c.set(Some((mc_api::vclock::work_ns(), Instant::now()))));
}

/// Forget this thread's mark: a sequential run is about to start.
pub(super) fn clear() {
    COMPUTE_BEGAN.with(|c| c.set(None));
}

/// This thread's mark since [`clear`] (CPU ns, wall instant), taken: None
/// when the program never marked its computation.
pub(super) fn take() -> Option<(u64, Instant)> {
    COMPUTE_BEGAN.with(|c| c.take())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_taken_once_and_cleared() {
        clear();
        assert_eq!(take(), None);
        compute_begins();
        assert!(take().is_some());
        assert_eq!(take(), None);
        compute_begins();
        clear();
        assert_eq!(take(), None);
    }
}
