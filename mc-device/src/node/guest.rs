//! The guest as one adapter sees it: its RAM (the memory table the frontend
//! sent, once checked: mem_table.rs), its virtqueues, and which of them its
//! driver has broken (queues.rs says when a queue is served and when it is
//! broken). Replaced as a whole when a guest connects or leaves.

use vhost_user_backend::VringRwLock;
use vm_memory::{GuestAddressSpace, GuestMemoryAtomic};

use super::queues::{check, configured, RingDefect, ServedQueue};
use crate::memory::{Mem, MemGuard};

/// One adapter's guest: memory, vrings and broken queues.
#[derive(Default)]
pub(crate) struct Guest {
    /// Guest RAM, shared by the frontend with SET_MEM_TABLE, once checked
    /// (mem_table.rs). The backend's own snapshot: the vhost-user daemon's view
    /// is replaced by a new table before it has been checked.
    mem: Option<GuestMemoryAtomic<Mem>>,
    /// The vrings, captured from the backend's first `handle_event`.
    vrings: Option<Vec<VringRwLock>>,
    /// Bit q: queue q is broken and not served until the driver re-initialises
    /// its ring (queues.rs; the register file's `broken_queues`).
    broken_queues: u32,
}

impl Guest {
    /// The guest's memory now, if a guest is attached.
    pub(crate) fn memory(&self) -> Option<MemGuard> {
        self.mem.as_ref().map(GuestAddressSpace::memory)
    }

    /// A guest is attached (its memory table was accepted).
    pub(crate) fn attached(&self) -> bool {
        self.mem.is_some()
    }

    /// The guest's memory table, checked.
    pub(crate) fn set_memory(&mut self, mem: GuestMemoryAtomic<Mem>) {
        self.mem = Some(mem);
    }

    /// The guest's memory table was refused: nothing of it may be touched.
    pub(crate) fn refuse_memory(&mut self) {
        self.mem = None;
        self.vrings = None;
    }

    /// The vrings, the first time a worker sees them.
    pub(crate) fn capture_vrings(&mut self, vrings: impl FnOnce() -> Vec<VringRwLock>) {
        if self.vrings.is_none() {
            self.vrings = Some(vrings());
        }
    }

    /// Vring `q`, if captured.
    pub(crate) fn vring(&self, q: u16) -> Option<&VringRwLock> {
        self.vrings.as_ref()?.get(usize::from(q))
    }

    /// The driver reset the device: every queue is served again.
    pub(crate) fn reset_queues(&mut self) {
        self.broken_queues = 0;
    }

    /// The driver stopped queue `q` (VHOST_USER_GET_VRING_BASE): whatever it
    /// broke about the ring, it is setting it up afresh.
    pub(crate) fn ring_stopped(&mut self, q: u32) {
        if q < 32 {
            self.broken_queues &= !(1 << q);
        }
    }

    /// The register file's `broken_queues`.
    pub(crate) fn broken_queues(&self) -> u32 {
        self.broken_queues
    }

    /// Queue `q`, if the device may serve it now (queues.rs). A queue found
    /// broken here is marked so and not served; `Err` says how, the first
    /// time only, for the caller to report.
    pub(crate) fn served_queue(&mut self, q: u16) -> Result<Option<ServedQueue>, RingDefect> {
        if self.broken_queues & (1 << q) != 0 {
            return Ok(None);
        }
        let (Some(vring), Some(atomic)) = (self.vring(q).cloned(), self.mem.as_ref()) else {
            return Ok(None);
        };
        if !configured(&vring) {
            return Ok(None);
        }
        let mem = atomic.memory();
        if let Err(defect) = check(&vring, &mem) {
            return match self.break_queue(q, defect) {
                Some(d) => Err(d),
                None => Ok(None),
            };
        }
        Ok(Some(ServedQueue::new(vring, mem, q)))
    }

    /// The driver broke queue `q`: stop serving it until the ring is
    /// re-initialised. Returns the defect if the queue was not broken before
    /// (so it is reported once).
    pub(crate) fn break_queue(&mut self, q: u16, defect: RingDefect) -> Option<RingDefect> {
        if self.broken_queues & (1 << q) != 0 {
            return None;
        }
        self.broken_queues |= 1 << q;
        Some(defect)
    }
}
