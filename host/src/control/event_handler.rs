//! How the control socket's thread reacts to its file descriptors: an
//! `event-manager` subscriber (the `MutEventSubscriber` `init`/`process`
//! pair, as Firecracker's device event handlers are) on the listening socket
//! and a stop eventfd. The thread sleeps in `epoll_wait` until a client
//! connects or the server is dropped, instead of polling `accept`.

use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::time::Duration;

use event_manager::{EventOps, EventSet, Events, MutEventSubscriber};
use log::warn;
use mc_device::Cluster;
use vmm_sys_util::eventfd::EventFd;

use super::requests::handle;

/// The control socket's subscriber: accepts and answers connections, and
/// notes when it is told to stop.
pub(super) struct ControlSocketHandler {
    listener: UnixListener,
    stop: EventFd,
    cluster: Arc<Cluster>,
    stopped: bool,
    /// A registration that failed in `init` (which cannot return it).
    init_error: Option<event_manager::Error>,
}

impl ControlSocketHandler {
    /// `listener` must be non-blocking: one readiness event may stand for
    /// several connections, and [`Self::accept_all`] takes them until none is
    /// left.
    pub(super) fn new(listener: UnixListener, stop: EventFd, cluster: Arc<Cluster>) -> Self {
        ControlSocketHandler {
            listener,
            stop,
            cluster,
            stopped: false,
            init_error: None,
        }
    }

    /// Whether the stop eventfd fired (or the listener failed for good).
    pub(super) fn stopped(&self) -> bool {
        self.stopped
    }

    /// The error of a registration `init` could not make, if any.
    pub(super) fn take_init_error(&mut self) -> Option<event_manager::Error> {
        self.init_error.take()
    }

    /// Answer every connection waiting on the listener, one after another.
    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if let Err(e) = handle(stream, &self.cluster) {
                        warn!("control request failed: {e}");
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of file descriptors, say: the connection stays
                    // queued and epoll reports it again at once, so pause
                    // rather than spin on it.
                    warn!("control socket: accept: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                    return;
                }
            }
        }
    }
}

impl MutEventSubscriber for ControlSocketHandler {
    fn init(&mut self, ops: &mut EventOps) {
        for events in [
            Events::new(&self.listener, EventSet::IN),
            Events::new(&self.stop, EventSet::IN),
        ] {
            if let Err(e) = ops.add(events) {
                self.init_error.get_or_insert(e);
            }
        }
    }

    fn process(&mut self, events: Events, ops: &mut EventOps) {
        let fd = events.fd();
        let set = events.event_set();
        if fd == self.stop.as_raw_fd() {
            // Drained so that a reused handler would not wake at once.
            let _ = self.stop.read();
            self.stopped = true;
        } else if fd == self.listener.as_raw_fd() {
            if set.contains(EventSet::IN) {
                self.accept_all();
            }
            if set.intersects(EventSet::ERROR | EventSet::HANG_UP) {
                warn!("control socket: the listening socket failed ({set:?}); no more requests");
                let _ = ops.remove(events);
                self.stopped = true;
            }
        } else {
            warn!("control socket: event on unknown fd {fd} ({set:?})");
            let _ = ops.remove(events);
        }
    }
}
