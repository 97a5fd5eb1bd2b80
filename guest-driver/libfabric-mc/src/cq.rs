//! Completion queues. Progress is manual (FI_PROGRESS_MANUAL): reading a
//! queue drives the endpoints bound to it. A queue that stays empty makes
//! its reader spin briefly, then yield, then sleep in short steps, so that
//! more ranks than cores do not starve each other or the hub.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

/// What reading a completion queue drives (progress is manual): an
/// endpoint bound to it (the endpoint implements this; the queue does not
/// know endpoints otherwise).
pub trait CqUser: Send + Sync {
    /// Move what can move; true if anything did.
    fn progress(&self) -> bool;
}

/// Kind bits of a completion (the C side turns them into FI_ flags).
pub const K_SEND: u64 = 1;
pub const K_RECV: u64 = 2;
pub const K_TAGGED: u64 = 4;
pub const K_DATA: u64 = 8;
pub const K_MSG: u64 = 16;

/// One completion, as the C side reads it (an error if `err` is not 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct McComp {
    pub context: u64,
    pub kind: u64,
    pub len: u64,
    pub buf: u64,
    pub data: u64,
    pub tag: u64,
    /// fi_addr of the sender (FI_ADDR_NOTAVAIL when unknown).
    pub src: u64,
    /// A positive FI_E* code, or 0.
    pub err: i64,
    /// Bytes that did not fit (FI_ETRUNC).
    pub olen: u64,
}

struct Queues {
    ok: VecDeque<McComp>,
    err: VecDeque<McComp>,
    /// Shared, so that a read takes the list without allocating.
    eps: Arc<[Weak<dyn CqUser>]>,
}

impl Default for Queues {
    fn default() -> Queues {
        Queues {
            ok: VecDeque::new(),
            err: VecDeque::new(),
            eps: Arc::new([]),
        }
    }
}

#[derive(Default)]
pub struct Cq {
    q: Mutex<Queues>,
    idle: AtomicU32,
}

/// Empty reads a reader spins through before it yields, when every rank
/// and the hub can have a core of their own; then yields before it sleeps.
const SPIN_ALONE: u32 = 20_000;
const YIELDS: u32 = 2000;

/// Empty reads before a reader yields: MC_FI_SPIN if set; otherwise many
/// when the cluster's nodes (MC_NODES, one rank each) and the backend's hub
/// each have a core, none when they do not. `mc-host mpirun` sets 2000 on
/// a crowded host, where Open MPI yields between its polls itself
/// (`mpi_yield_when_idle`). Measured on 2 cores with 2 nodes, straight on
/// the provider (integration/c/mpi/fi_pingpong.c, which never yields):
/// 2000 reads before yielding kept the hub off a core, and an 8-byte
/// one-way took 120-370 us; yielding at once, 3.6-15 us (docs/mpi.md).
fn spin_reads() -> u32 {
    static SPIN: OnceLock<u32> = OnceLock::new();
    *SPIN.get_or_init(|| {
        if let Some(n) = std::env::var("MC_FI_SPIN")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            return n;
        }
        let nodes: usize = std::env::var("MC_NODES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(usize::MAX - 1);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // A core for each rank, and one for the hub.
        if nodes < cores {
            SPIN_ALONE
        } else {
            0
        }
    })
}

impl Cq {
    fn q(&self) -> MutexGuard<'_, Queues> {
        self.q.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn push(&self, c: McComp) {
        let mut q = self.q();
        if c.err != 0 {
            q.err.push_back(c);
        } else {
            q.ok.push_back(c);
        }
    }

    pub fn bind(&self, ep: Weak<dyn CqUser>) {
        let mut q = self.q();
        let mut eps: Vec<_> = q
            .eps
            .iter()
            .filter(|e| e.strong_count() > 0)
            .cloned()
            .collect();
        eps.push(ep);
        q.eps = eps.into();
    }

    fn progress(&self) -> bool {
        let eps = self.q().eps.clone();
        let mut any = false;
        for e in eps.iter().filter_map(Weak::upgrade) {
            any |= e.progress();
        }
        any
    }

    /// Up to `out.len()` completions: Ok(n > 0), or Err(FI_EAGAIN) when
    /// none, or Err(FI_EAVAIL) when an error waits for fi_cq_readerr.
    pub fn read(&self, out: &mut [McComp]) -> Result<usize, i64> {
        let moved = self.progress();
        let mut q = self.q();
        if !q.err.is_empty() {
            return Err(crate::FI_EAVAIL);
        }
        let n = out.len().min(q.ok.len());
        for slot in out.iter_mut().take(n) {
            *slot = q.ok.pop_front().expect("counted");
        }
        drop(q);
        if n > 0 || moved {
            self.idle.store(0, Ordering::Relaxed);
        } else {
            self.idle_step();
        }
        if n == 0 {
            return Err(libc::EAGAIN as i64);
        }
        Ok(n)
    }

    pub fn read_err(&self) -> Option<McComp> {
        self.q().err.pop_front()
    }

    fn idle_step(&self) {
        let n = self.idle.fetch_add(1, Ordering::Relaxed);
        let spin = spin_reads();
        if n >= spin.saturating_add(YIELDS) {
            std::thread::sleep(Duration::from_micros(20));
        } else if n >= spin {
            std::thread::yield_now();
        }
    }
}
