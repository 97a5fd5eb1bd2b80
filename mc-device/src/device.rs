//! The device as the hub thread and every node's vhost-user server share it:
//! the device state (under one mutex), each node's current guest connection,
//! the hub's wake-up event and the shutdown flag.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::TryLockError;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use firmware_model::Nanos;

use vhost_user_backend::ShutdownHandle;
use vmm_sys_util::eventfd::EventFd;

use crate::cluster_clock::ClusterClock;
use crate::state::DeviceState;

/// State shared by the hub thread and every node's vhost-user backend.
pub(crate) struct Device {
    pub(crate) state: Mutex<DeviceState>,
    /// Per node: how to end its current guest connection (shutdown).
    pub(crate) connections: Mutex<Vec<Option<ShutdownHandle>>>,
    pub(crate) wake: EventFd,
    pub(crate) shutdown: AtomicBool,
    pub(crate) spin: Duration,
    /// Model time (the same clock as the state's).
    pub(crate) clock: ClusterClock,
    /// The hub thread's kernel thread id (0 until it runs).
    pub(crate) hub_tid: AtomicI32,
    /// Threads blocked in [`Device::lock`] (vhost-user workers with a
    /// control request or a register read, the control socket): the hub
    /// gives way to them between its passes.
    pub(crate) waiting: AtomicU32,
}

/// How many times the hub yields, at most, for threads waiting for the lock
/// before it takes it again (so that they cannot stop it either).
const GIVE_WAY_YIELDS: u32 = 64;

/// Lock `m` even if a thread panicked while holding it: that would be a bug in
/// this crate, and the state is still consistent enough to keep serving the
/// other guests.
pub(crate) fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Device {
    pub(crate) fn lock(&self) -> MutexGuard<'_, DeviceState> {
        match self.state.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.waiting.fetch_add(1, Ordering::AcqRel);
                let g = relock(&self.state);
                self.waiting.fetch_sub(1, Ordering::AcqRel);
                g
            }
        }
    }

    /// The lock as the hub takes it for each pass. The hub takes it again
    /// right after releasing it whenever there is work (under skewed
    /// delivery, almost always), and a mutex does not queue its waiters: a
    /// woken waiter finds it taken again, so a guest's control request could
    /// wait seconds behind another guest's flood. Yielding first while
    /// someone waits hands the lock over.
    pub(crate) fn hub_lock(&self) -> MutexGuard<'_, DeviceState> {
        let mut yields = 0;
        while self.waiting.load(Ordering::Acquire) > 0 && yields < GIVE_WAY_YIELDS {
            std::thread::yield_now();
            yields += 1;
        }
        relock(&self.state)
    }

    pub(crate) fn wake_hub(&self) {
        let _ = self.wake.write(1);
    }

    /// Model time now, without taking the lock.
    pub(crate) fn now(&self) -> Nanos {
        self.clock.now()
    }
}
