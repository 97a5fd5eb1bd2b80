//! The device as the hub thread and every node's vhost-user server share it:
//! the device state (under one mutex), each node's current guest connection,
//! the hub's wake-up event and the shutdown flag.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::TryLockError;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use firmware_model::{Hub, Nanos, NodeId};

use vhost_user_backend::ShutdownHandle;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::cluster_clock::ClusterClock;
use crate::state::DeviceState;

/// State shared by the hub thread and every node's vhost-user backend.
pub(crate) struct Device {
    state: Mutex<DeviceState>,
    /// Per node: how to end its current guest connection (shutdown).
    connections: Mutex<Vec<Option<ShutdownHandle>>>,
    wake: EventFd,
    shutdown: AtomicBool,
    /// How long the hub polls after its last work before it sleeps.
    spin: Duration,
    /// Model time (the same clock as the state's).
    clock: ClusterClock,
    /// The hub thread's kernel thread id (0 until it runs).
    hub_tid: AtomicI32,
    /// Threads blocked in [`Device::lock`] (vhost-user workers with a
    /// control request or a register read, the control socket): the hub
    /// gives way to them between its passes.
    waiting: AtomicU32,
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
    /// The device for `hub`'s cluster, model time 0 now; the hub polls for
    /// `spin` after its last work before it sleeps.
    pub(crate) fn new(hub: Hub, spin: Duration) -> io::Result<Device> {
        let clock = ClusterClock::start();
        let nodes = hub.nodes();
        Ok(Device {
            state: Mutex::new(DeviceState::new(hub, clock)),
            connections: Mutex::new(NodeId::all(nodes).map(|_| None).collect()),
            wake: EventFd::new(EFD_NONBLOCK)?,
            shutdown: AtomicBool::new(false),
            spin,
            clock,
            hub_tid: AtomicI32::new(0),
            waiting: AtomicU32::new(0),
        })
    }

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

    /// The hub's wake-up eventfd, to wait on.
    pub(crate) fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// The hub woke: clear the wake-up (non-blocking).
    pub(crate) fn consume_wake(&self) {
        let _ = self.wake.read();
    }

    /// How long the hub polls after its last work before it sleeps.
    pub(crate) fn spin(&self) -> Duration {
        self.spin
    }

    /// The cluster is shutting down.
    pub(crate) fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Start shutting down; false if it had started already.
    pub(crate) fn begin_shutdown(&self) -> bool {
        !self.shutdown.swap(true, Ordering::AcqRel)
    }

    /// `node`'s current guest connection (`None`: it ended).
    pub(crate) fn set_connection(&self, node: NodeId, handle: Option<ShutdownHandle>) {
        if let Some(slot) = relock(&self.connections).get_mut(node.index()) {
            *slot = handle;
        }
    }

    /// End every guest connection.
    pub(crate) fn end_connections(&self) {
        for h in relock(&self.connections).iter().flatten() {
            h.shutdown();
        }
    }

    /// The calling thread is the hub thread.
    pub(crate) fn hub_thread_started(&self) {
        // SAFETY: gettid takes no arguments and cannot fail.
        let tid = unsafe { libc::gettid() };
        self.hub_tid.store(tid, Ordering::Release);
    }

    /// The hub thread's kernel thread id, once it runs.
    pub(crate) fn hub_tid(&self) -> Option<i32> {
        Some(self.hub_tid.load(Ordering::Acquire)).filter(|t| *t > 0)
    }

    /// Model time now, without taking the lock.
    pub(crate) fn now(&self) -> Nanos {
        self.clock.now()
    }
}
