//! One node's vhost-user socket: accept a guest, serve it until it leaves,
//! reset its adapter, and accept the next one, for as long as the cluster runs.

use std::sync::Arc;
use std::time::Duration;

use log::{error, warn, Level};
use vhost::vhost_user::Listener;
use vhost_user_backend::VhostUserDaemon;
use vm_memory::{GuestMemoryAtomic, GuestMemoryMmap};

use crate::node::Node;
use crate::store_order::wait_for_committed_stores;
use crate::vhost_user::NodeBackend;

/// How long to wait before trying again when a connection cannot be set up
/// (out of descriptors or threads): the socket stays, the node comes back.
const RETRY: Duration = Duration::from_millis(100);

/// Serve one node's socket for as long as the cluster runs. A fresh daemon per
/// connection (vhost-user-backend never clears its "owned" flag) on one
/// listener, so a guest can disconnect and reconnect without disturbing others.
pub(crate) fn serve_node(backend: Arc<NodeBackend>, mut listener: Listener) {
    let node = backend.node;
    let shared = backend.shared.clone();
    while !shared.shutting_down() {
        backend.rearm_exit_event();
        let mem = GuestMemoryAtomic::new(GuestMemoryMmap::new());
        let mut daemon =
            match VhostUserDaemon::new(format!("mc-{}", Node(node)), backend.clone(), mem) {
                Ok(d) => d,
                Err(e) => {
                    error!(
                        "{}: cannot create the vhost-user daemon: {e}; retrying",
                        Node(node)
                    );
                    std::thread::sleep(RETRY);
                    continue;
                }
            };
        if let Err(e) = daemon.start(&mut listener) {
            if shared.shutting_down() {
                break;
            }
            warn!("{}: accepting a guest failed: {e}", Node(node));
            std::thread::sleep(RETRY);
            continue;
        }
        if shared.shutting_down() {
            break;
        }
        shared.set_connection(node, daemon.shutdown_handle());
        if shared.shutting_down() {
            // Stop was requested between accept and recording the handle.
            daemon.request_shutdown();
        }
        {
            let mut st = shared.lock();
            let n = st.node_mut(node);
            let count = n.connected();
            // Anyone who can reach the socket can connect: rate-limited.
            n.log(
                Level::Info,
                format_args!("guest connected (connection {count})"),
            );
        }
        let ended = daemon.wait();
        shared.set_connection(node, None);
        drop(daemon);
        // Stores the guest committed before it left still go (posted writes).
        wait_for_committed_stores(&shared, node);
        let mut st = shared.lock();
        let n = st.node_mut(node);
        match ended {
            Ok(()) => n.log(Level::Info, format_args!("guest disconnected")),
            Err(e) => n.log(Level::Info, format_args!("guest connection ended: {e}")),
        }
        st.disconnected(node);
    }
}
