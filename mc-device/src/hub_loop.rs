//! The hub thread: takes every adapter's transmit FIFO, performs deliveries
//! when due, and sleeps when there is nothing to do.
//!
//! Low latency needs polling (a wake-up through the kernel costs tens of
//! microseconds here), but a spinning thread steals a core from the guests.
//! So the hub polls while traffic is recent or a delivery is about to be due,
//! and otherwise arms the FIFOs' doorbells and sleeps until a guest kicks its
//! transmit queue (the kick eventfd is watched by this thread itself, not by a
//! vhost-user worker, so a kick costs one wake-up), a delivery falls due (a
//! timerfd), or something else needs it (the wake eventfd). It never sleeps
//! holding the device lock, and each pass under it is bounded.
//!
//! Why not `event-manager`: the kick eventfds belong to vhost-user-backend's
//! vrings and change with every connection and SET_VRING_KICK, so the set of
//! descriptors is taken afresh (under each vring's lock) before every sleep;
//! the crate's subscriber registry would only add a layer over the three
//! epoll calls this needs.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use firmware_model::abi;
use log::{debug, error};
use vhost_user_backend::VringT;
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::timerfd::TimerFd;

use crate::device::Device;
use crate::node::Node;
use crate::state::DeviceState;

/// Sleep at most this long, so a shutdown request is seen.
const MAX_SLEEP: Duration = Duration::from_millis(100);
/// A delivery due sooner than this is waited for by polling.
const POLL_AHEAD: Duration = Duration::from_micros(100);

const WAKE: u64 = 0;
const TIMER: u64 = 1;
const KICK_BASE: u64 = 2;

pub(crate) fn run(device: Arc<Device>) {
    let mut sleeper = match Sleeper::new(&device) {
        Ok(s) => s,
        Err(e) => {
            error!("hub: cannot set up its wait (epoll, timerfd): {e}; the cluster is stopped");
            return;
        }
    };
    let mut idle_since: Option<Instant> = None;
    let mut spins: u32 = 0;
    while !device.shutting_down() {
        let (worked, next) = device.hub_lock().pass();
        if worked > 0 {
            idle_since = None;
            continue;
        }
        let until_due = next.map(|t| Duration::from_nanos(t.0.saturating_sub(device.now().0)));
        let since = *idle_since.get_or_insert_with(Instant::now);
        if until_due.is_some_and(|d| d < POLL_AHEAD) || since.elapsed() < device.spin() {
            spins = spins.wrapping_add(1);
            if spins % 32 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        {
            let mut st = device.lock();
            if st.arm_doorbells() {
                st.disarm_doorbells();
                idle_since = None;
                continue;
            }
            sleeper.watch_kicks(&st);
        }
        sleeper.wait(&device, until_due.unwrap_or(MAX_SLEEP).min(MAX_SLEEP));
        device.lock().disarm_doorbells();
        idle_since = None;
    }
}

/// What the hub sleeps on.
struct Sleeper {
    epoll: Epoll,
    timer: TimerFd,
    /// Kick eventfds registered, by node.
    kicks: HashMap<usize, RawFd>,
    events: Vec<EpollEvent>,
}

impl Sleeper {
    fn new(device: &Device) -> io::Result<Sleeper> {
        let epoll = Epoll::new()?;
        let timer = TimerFd::new()?;
        epoll.ctl(
            ControlOperation::Add,
            device.wake_fd(),
            EpollEvent::new(EventSet::IN, WAKE),
        )?;
        epoll.ctl(
            ControlOperation::Add,
            timer.as_raw_fd(),
            EpollEvent::new(EventSet::IN, TIMER),
        )?;
        Ok(Sleeper {
            epoll,
            timer,
            kicks: HashMap::new(),
            events: vec![EpollEvent::default(); 8],
        })
    }

    /// Watch each node's current transmit-queue kick eventfd, edge-triggered:
    /// each kick wakes the hub once and nothing needs to read the eventfd
    /// (the frontend owns it). Each is added under its vring's lock, so it
    /// cannot be closed meanwhile; epoll forgets a closed one by itself.
    fn watch_kicks(&mut self, st: &DeviceState) {
        for (i, node) in st.nodes().iter().enumerate() {
            let Some(vring) = node.guest().vring(abi::TX_QUEUE) else {
                self.kicks.remove(&i);
                continue;
            };
            let guard = vring.get_ref();
            let Some(fd) = guard.get_kick().as_ref().map(|k| k.as_raw_fd()) else {
                self.kicks.remove(&i);
                continue;
            };
            if self.kicks.get(&i) == Some(&fd) {
                continue;
            }
            let ev = EpollEvent::new(
                EventSet::IN | EventSet::EDGE_TRIGGERED,
                KICK_BASE + i as u64,
            );
            let r = match self.epoll.ctl(ControlOperation::Add, fd, ev) {
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                    self.epoll.ctl(ControlOperation::Modify, fd, ev)
                }
                r => r,
            };
            match r {
                Ok(()) => {
                    self.kicks.insert(i, fd);
                }
                Err(e) => crate::guest_log::unattributed(
                    log::Level::Debug,
                    format_args!("{}: cannot watch the transmit kick: {e}", Node(node.id())),
                ),
            }
        }
    }

    fn wait(&mut self, device: &Device, timeout: Duration) {
        let _ = self
            .timer
            .reset(timeout.max(Duration::from_micros(1)), None);
        match self.epoll.wait(-1, &mut self.events) {
            Ok(n) => {
                for e in &self.events[..n] {
                    match e.data() {
                        // Both are ours; read only what fired, so nothing blocks.
                        WAKE => {
                            device.consume_wake();
                        }
                        TIMER => {
                            let _ = self.timer.wait();
                        }
                        _ => {}
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                debug!("hub: epoll wait failed: {e}");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}
