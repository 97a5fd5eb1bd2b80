//! The node's own barrier (2L): a node's application threads arrive here,
//! and the last one takes the node through the cluster's barrier (and the
//! protocol's release and acquire) for all of them — they share the
//! node's frames, so its writes are every thread's (seed 002 s.3.3).

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use mc_api::vclock;

struct Generation<E> {
    arrived: u32,
    generation: u64,
    failed: Option<Arc<E>>,
    /// The virtual time at which the last thread let the others go.
    released_vt: u64,
    /// The latest virtual time at which a thread of this generation
    /// arrived: the node arrives at the cluster barrier then, whichever of
    /// its threads the host happened to run last.
    latest_arrival_vt: u64,
}

/// A barrier of one node's application threads; `E` is the protocol's
/// error, which every thread of the generation gets if the last one's
/// cluster part fails.
pub struct NodeBarrier<E> {
    state: Mutex<Generation<E>>,
    cv: Condvar,
}

impl<E> Default for NodeBarrier<E> {
    fn default() -> Self {
        NodeBarrier {
            state: Mutex::new(Generation {
                arrived: 0,
                generation: 0,
                failed: None,
                released_vt: 0,
                latest_arrival_vt: 0,
            }),
            cv: Condvar::new(),
        }
    }
}

/// How a thread's passage through the node barrier failed.
#[derive(Debug)]
pub enum NodeBarrierError<E> {
    /// The last thread's cluster part failed (every thread gets it).
    Failed(Arc<E>),
    /// `aborted` said so while this thread waited.
    Aborted(E),
}

impl<E> NodeBarrier<E> {
    /// Arrive as one of `threads`; the last to arrive runs `last` (the
    /// cluster part). The others wait, asking `aborted` every 10 ms
    /// whether to give up. Call `times::enter` (or sync the clock) first.
    pub fn arrive(
        &self,
        threads: u32,
        aborted: impl Fn() -> Option<E>,
        last: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), NodeBarrierError<E>> {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        g.arrived += 1;
        g.latest_arrival_vt = g.latest_arrival_vt.max(vclock::stamp());
        let gen = g.generation;
        if g.arrived < threads {
            // In virtual time the node's threads go on when the last one
            // lets them, at its time (docs/virtual-time.md s.5).
            vclock::wait_begin();
            while g.generation == gen {
                g = self
                    .cv
                    .wait_timeout(g, Duration::from_millis(10))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                if g.generation == gen {
                    if let Some(e) = aborted() {
                        vclock::wait_end(None);
                        return Err(NodeBarrierError::Aborted(e));
                    }
                }
            }
            vclock::wait_end(Some(g.released_vt));
            return match &g.failed {
                Some(e) => Err(NodeBarrierError::Failed(e.clone())),
                None => Ok(()),
            };
        }
        // The last to arrive in the host's time need not be the last in
        // virtual time: the node reaches the cluster barrier when its
        // latest thread does (waiting, not computing, until then).
        let latest = std::mem::take(&mut g.latest_arrival_vt);
        drop(g);
        vclock::observe(latest);
        let r = last().map_err(Arc::new);
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        g.arrived = 0;
        g.generation += 1;
        g.released_vt = vclock::tick();
        if let Err(e) = &r {
            g.failed = Some(e.clone());
        }
        self.cv.notify_all();
        drop(g);
        vclock::sync();
        r.map_err(NodeBarrierError::Failed)
    }
}
