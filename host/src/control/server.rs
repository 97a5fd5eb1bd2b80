//! Serving the control socket: its listener, its thread and its shutdown.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use event_manager::{EventManager, SubscriberOps};
use log::warn;
use mc_device::Cluster;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::client::CONTROL_SOCKET;
use super::event_handler::ControlSocketHandler;

/// Why the control socket cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ControlServerError {
    #[error("cannot listen on {}", path.display())]
    Listen {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create its stop eventfd")]
    EventFd(#[source] std::io::Error),
    #[error("cannot wait on its file descriptors")]
    EventManager(#[from] event_manager::Error),
    #[error("cannot start its thread")]
    Thread(#[source] std::io::Error),
}

/// Serves the control socket until dropped.
pub struct ControlServer {
    path: PathBuf,
    /// Written on drop: wakes the thread out of epoll to end it.
    stop: EventFd,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Listen on `dir/control.sock` (replacing a stale socket there) and
    /// answer requests about `cluster` on a thread of its own.
    pub fn start(dir: &Path, cluster: Arc<Cluster>) -> Result<ControlServer, ControlServerError> {
        let path = dir.join(CONTROL_SOCKET);
        let _ = std::fs::remove_file(&path);
        let listen = |source| ControlServerError::Listen {
            path: path.clone(),
            source,
        };
        let listener = UnixListener::bind(&path).map_err(listen)?;
        listener.set_nonblocking(true).map_err(listen)?;
        let stop = EventFd::new(EFD_NONBLOCK).map_err(ControlServerError::EventFd)?;
        let handler = ControlSocketHandler::new(
            listener,
            stop.try_clone().map_err(ControlServerError::EventFd)?,
            cluster,
        );
        let mut manager = EventManager::new()?;
        let id = manager.add_subscriber(handler);
        if let Some(e) = manager.subscriber_mut(id)?.take_init_error() {
            return Err(e.into());
        }
        let thread = std::thread::Builder::new()
            .name("mc-control".into())
            .spawn(move || loop {
                if let Err(e) = manager.run() {
                    warn!("control socket: waiting for events failed: {e}; no more requests");
                    return;
                }
                if manager.subscriber_mut(id).map_or(true, |h| h.stopped()) {
                    return;
                }
            })
            .map_err(ControlServerError::Thread)?;
        Ok(ControlServer {
            path,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        if let Err(e) = self.stop.write(1) {
            warn!("control socket: cannot signal its thread to stop: {e}");
        } else if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
