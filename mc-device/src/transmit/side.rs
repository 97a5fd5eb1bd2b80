//! One node's transmit side: its registered FIFO (if any) and how far the
//! hub has taken it, published for the control path (progress.rs). Every
//! change to the FIFO's state goes through here, and each says so in the
//! FIFO header's words the driver reads (docs/device.md section 14).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use firmware_model::abi::{self, CtrlResponse, Status};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend};

use super::fifo::RegisteredFifo;
use super::progress::TxProgress;
use crate::memory::MemGuard;

/// One node's transmit FIFO and its published progress.
#[derive(Debug, Default)]
pub(crate) struct TxSide {
    /// The registered transmit FIFO, if any.
    fifo: Option<RegisteredFifo>,
    /// How far the hub has taken the FIFO, readable without the device lock.
    progress: Arc<TxProgress>,
}

impl TxSide {
    /// The FIFO as it is now, if registered and running (a copy: the hub's
    /// pass takes from it, then records how far with [`Self::taken`]).
    pub(crate) fn running(&self) -> Option<RegisteredFifo> {
        self.fifo.filter(RegisteredFifo::is_running)
    }

    /// What a control request waits for: the running FIFO and its progress.
    pub(crate) fn order_point(&self) -> Option<(RegisteredFifo, Arc<TxProgress>)> {
        Some((self.running()?, self.progress.clone()))
    }

    /// The hub took `taken`'s records up to `head` (if `taken` is still the
    /// registered FIFO: a control request may have replaced it meanwhile).
    pub(crate) fn taken(&mut self, taken: &RegisteredFifo, head: u64) {
        if let Some(cur) = self.fifo.as_mut().filter(|c| c.same_ring(taken)) {
            cur.advance_to(head);
            self.progress.taken(head);
        }
    }

    /// Count a refused store in the FIFO header (the model has counted the
    /// protection error and raised the event).
    pub(crate) fn refuse(&mut self, mem: Option<&MemGuard>, position: u64, s: Status, d: u32) {
        let Some(f) = self.fifo.as_mut() else {
            return;
        };
        let refused = f.count_refused();
        let f = *f;
        if let Some(mem) = mem {
            f.write_last(mem, position, s, d);
            let _ = mem.store(
                refused,
                f.header(abi::fifo::header::REFUSED),
                Ordering::Release,
            );
        }
    }

    /// A record that does not parse: stop taking this FIFO until the driver
    /// registers it again, and say why in its header. False if no FIFO is
    /// registered.
    pub(crate) fn break_fifo(&mut self, mem: &MemGuard, position: u64, s: Status, d: u32) -> bool {
        let Some(f) = self.fifo.as_mut() else {
            return false;
        };
        f.set_broken();
        let f = *f;
        self.progress.replaced();
        f.write_last(mem, position, s, d);
        let _ = mem.store(
            abi::fifo::State::Broken as u32,
            f.header(abi::fifo::header::STATE),
            Ordering::Release,
        );
        true
    }

    /// Register (or with `gpa == 0` forget) the FIFO in `mem`; `current` is
    /// the guest's memory now, where a FIFO registered before is forgotten.
    /// It must be 4096-aligned and lie in one piece of guest RAM. The device
    /// clears the tag array and the header, so a ring used before commits
    /// nothing.
    pub(crate) fn register(
        &mut self,
        mem: &MemGuard,
        current: Option<&MemGuard>,
        gpa: u64,
        slots: u32,
    ) -> CtrlResponse {
        if gpa == 0 {
            self.forget(current);
            return CtrlResponse::ok(0, 0);
        }
        let Some(layout) = abi::fifo::Layout::new(slots) else {
            return CtrlResponse::error(Status::Malformed, slots);
        };
        if gpa % 4096 != 0 || mem.get_slice(GuestAddress(gpa), layout.bytes()).is_err() {
            return CtrlResponse::error(Status::BadAddress, 0);
        }
        let clear = vec![0u8; abi::fifo::slots_offset(slots)];
        if mem.write_slice(&clear, GuestAddress(gpa)).is_err() {
            return CtrlResponse::error(Status::BadAddress, 0);
        }
        self.forget(current);
        let f = RegisteredFifo::new(gpa, layout);
        let _ = mem.store(
            abi::fifo::State::Running as u32,
            f.header(abi::fifo::header::STATE),
            Ordering::Release,
        );
        self.fifo = Some(f);
        self.progress.replaced();
        CtrlResponse::ok(0, 0)
    }

    /// Forget the FIFO (unregistered, replaced, or its adapter reset).
    /// Everything committed before the request that does this has been
    /// taken (the control path waits for it: progress.rs); nothing more is
    /// taken from it, and its header's state word in `mem` says so (Idle).
    pub(crate) fn forget(&mut self, mem: Option<&MemGuard>) {
        if let (Some(f), Some(mem)) = (self.fifo.take(), mem) {
            let _ = mem.store(
                abi::fifo::State::Idle as u32,
                f.header(abi::fifo::header::STATE),
                Ordering::Release,
            );
        }
        self.progress.replaced();
    }

    /// The guest left: its FIFO is gone with its memory.
    pub(crate) fn forget_guest(&mut self) {
        self.fifo = None;
        self.progress.replaced();
    }

    /// Arm the doorbell before the hub sleeps, if the FIFO runs. Returns
    /// true if a record was committed meanwhile (then do not sleep).
    pub(crate) fn arm_doorbell(&mut self, mem: &MemGuard) -> bool {
        let Some(f) = self.fifo.as_mut() else {
            return false;
        };
        if !f.is_running() {
            return false;
        }
        let bell = f.header(abi::fifo::header::DOORBELL);
        if mem.store(1u32, bell, Ordering::SeqCst).is_err() {
            return false;
        }
        f.set_armed(true);
        // Dekker with the driver (commit, fence, read the doorbell): after
        // this fence either the driver sees the doorbell or we see its tag.
        std::sync::atomic::fence(Ordering::SeqCst);
        f.head_committed(mem)
    }

    /// The hub polls again: no kick needed.
    pub(crate) fn disarm_doorbell(&mut self, mem: &MemGuard) {
        let Some(f) = self.fifo.as_mut() else {
            return;
        };
        if f.armed() {
            let _ = mem.store(
                0u32,
                f.header(abi::fifo::header::DOORBELL),
                Ordering::Release,
            );
            f.set_armed(false);
        }
    }
}
