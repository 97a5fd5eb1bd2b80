//! Where a node stands with the cluster's coherent state, shared by its
//! threads and its management thread (`join`, which moves it): the API's
//! own cluster operations wait here while the node catches up after a
//! rejoin.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use firmware_model::NodeId;

use crate::error::{McError, WaitFor};

/// Where this node stands with the cluster's coherent state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coherence {
    /// Control pages and arena are up to date.
    Coherent,
    /// The adapter crashed: the node is out of the cluster until it rejoins.
    Offline,
    /// Rejoined; a member is retransmitting the coherent state.
    CatchingUp,
}

/// What the last catch-up after a rejoin did, as the joiner saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resync {
    /// The membership epoch at which this node found it had rejoined.
    pub epoch: u64,
    /// The member that retransmitted; `None` if this node was alone.
    pub server: Option<NodeId>,
    /// From noticing the rejoin to coherent again.
    pub elapsed: Duration,
    /// Bytes of coherent state (control pages and arena).
    pub bytes: u64,
}

/// A node's coherence, shared by its threads and its management thread.
pub(crate) struct JoinState {
    state: Mutex<Coherence>,
    changed: Condvar,
    coherent: AtomicBool,
    /// Bumped whenever the node stops being coherent: a cluster lock taken
    /// across it is taken again.
    generation: AtomicU64,
    rejoins: AtomicU64,
    last: Mutex<Option<Resync>>,
}

impl JoinState {
    pub(crate) fn new() -> Self {
        JoinState {
            state: Mutex::new(Coherence::Coherent),
            changed: Condvar::new(),
            coherent: AtomicBool::new(true),
            generation: AtomicU64::new(0),
            rejoins: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }

    pub(crate) fn coherence(&self) -> Coherence {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn is_coherent(&self) -> bool {
        self.coherent.load(Ordering::Acquire)
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(crate) fn rejoins(&self) -> u64 {
        self.rejoins.load(Ordering::Acquire)
    }

    pub(crate) fn last(&self) -> Option<Resync> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Move to `s`; returns the state before.
    pub(crate) fn set(&self, s: Coherence) -> Coherence {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let old = *st;
        if old != s {
            if old == Coherence::Coherent {
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
            *st = s;
            self.coherent
                .store(s == Coherence::Coherent, Ordering::Release);
            self.changed.notify_all();
        }
        old
    }

    pub(crate) fn finish(&self, report: Resync) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(report);
        self.rejoins.fetch_add(1, Ordering::AcqRel);
        self.set(Coherence::Coherent);
    }

    /// For the API's own cluster operations (locks, tables): go on when
    /// coherent, wait while catching up, fail at once while offline.
    pub(crate) fn gate(&self, timeout: Duration) -> Result<(), McError> {
        if self.is_coherent() {
            return Ok(());
        }
        self.wait(timeout, false)
    }

    /// Wait until coherent; with `through_offline`, also while the adapter is
    /// down (for a rejoin that is yet to come).
    pub(crate) fn wait(&self, timeout: Duration, through_offline: bool) -> Result<(), McError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match *st {
                Coherence::Coherent => return Ok(()),
                Coherence::Offline if !through_offline => return Err(McError::Offline),
                _ => {}
            }
            let now = Instant::now();
            if now >= deadline {
                let waiting_for = match *st {
                    Coherence::Offline => WaitFor::Rejoin,
                    _ => WaitFor::CatchUp,
                };
                return Err(McError::Timeout {
                    after: timeout,
                    waiting_for,
                });
            }
            st = self
                .changed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn gate_and_wait() {
        let s = JoinState::new();
        assert!(s.gate(Duration::ZERO).is_ok());
        s.set(Coherence::Offline);
        assert_eq!(s.generation(), 1);
        assert!(matches!(s.gate(Duration::ZERO), Err(McError::Offline)));
        let e = s.wait(Duration::from_millis(1), true).unwrap_err();
        assert!(e.to_string().contains("rejoin"), "{e}");
        s.set(Coherence::CatchingUp);
        assert_eq!(s.generation(), 1, "only leaving coherence counts");
        assert!(matches!(
            s.gate(Duration::from_millis(1)),
            Err(McError::Timeout {
                waiting_for: WaitFor::CatchUp,
                ..
            })
        ));
        let s = Arc::new(s);
        let s2 = s.clone();
        let t = std::thread::spawn(move || s2.gate(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(10));
        s.finish(Resync {
            epoch: 3,
            server: Some(NodeId(0)),
            elapsed: Duration::from_millis(1),
            bytes: 8,
        });
        assert!(t.join().unwrap().is_ok());
        assert_eq!((s.rejoins(), s.coherence()), (1, Coherence::Coherent));
        assert_eq!(s.last().map(|r| r.epoch), Some(3));
    }
}
