//! Completion queues. Progress is manual (FI_PROGRESS_MANUAL): reading a
//! queue drives the endpoints bound to it. A queue that stays empty makes
//! its reader spin briefly, then yield, then sleep in short steps, so that
//! more ranks than cores do not starve each other or the hub.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, Weak};
use std::time::Duration;

use crate::ep::Ep;

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

#[derive(Default)]
struct Queues {
    ok: VecDeque<McComp>,
    err: VecDeque<McComp>,
    eps: Vec<Weak<Ep>>,
}

#[derive(Default)]
pub struct Cq {
    q: Mutex<Queues>,
    idle: AtomicU32,
}

/// Empty reads before a reader yields, and before it sleeps.
const SPIN: u32 = 2000;
const YIELD: u32 = 4000;

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

    pub fn bind(&self, ep: Weak<Ep>) {
        self.q().eps.push(ep);
    }

    fn progress(&self) -> bool {
        let eps: Vec<_> = {
            let mut q = self.q();
            q.eps.retain(|e| e.strong_count() > 0);
            q.eps.clone()
        };
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
        if n >= YIELD {
            std::thread::sleep(Duration::from_micros(20));
        } else if n >= SPIN {
            std::thread::yield_now();
        }
    }
}
