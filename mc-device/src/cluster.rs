//! A running cluster: one hub, one vhost-user socket per adapter.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use firmware_model::{
    AdapterErrorStatus, ClusterConfig, FaultCommand, FaultScope, Hub, HubCounters, Membership,
    ModelError, Nanos, NodeCounters, NodeId, PacketFault, Rate, ScheduledFault,
};
use log::info;
use vhost::vhost_user::Listener;

use crate::device::Device;
use crate::error::DeviceError;
use crate::node::Node;
use crate::server::serve_node;
use crate::socket_dir::{clear_socket_path, DirLock};
use crate::vhost_user::NodeBackend;

/// How a cluster is started.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    pub config: ClusterConfig,
    /// Where `node<i>.sock` are created.
    pub socket_dir: PathBuf,
    /// How long the hub keeps polling after the last transmit before it sleeps.
    pub spin: Duration,
}

impl ClusterOptions {
    pub fn new(config: ClusterConfig, socket_dir: impl Into<PathBuf>) -> Self {
        ClusterOptions {
            config,
            socket_dir: socket_dir.into(),
            spin: Duration::from_micros(200),
        }
    }
}

/// What `mc-host stats` and tests read about one adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeSnapshot {
    pub node: NodeId,
    /// A guest is attached (its memory table is known).
    pub connected: bool,
    /// Times a guest has connected to this node's socket.
    pub connections: u64,
    pub status: AdapterErrorStatus,
    pub counters: NodeCounters,
}

/// A consistent view of the whole cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSnapshot {
    pub membership: Membership,
    pub cluster_error_count: u64,
    pub hub: HubCounters,
    pub nodes: Vec<NodeSnapshot>,
    pub uptime: Nanos,
}

/// Faults in force on a running cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultStatus {
    pub rules: Vec<(PacketFault, FaultScope, Rate)>,
    pub scheduled: Vec<ScheduledFault>,
    pub stalled_until: Nanos,
    pub now: Nanos,
}

/// A running cluster. Dropping it shuts it down and removes its sockets.
pub struct Cluster {
    shared: Arc<Device>,
    nodes: u8,
    sockets: Vec<PathBuf>,
    /// Duplicates of the listening sockets, shut down to unblock `accept` at
    /// exit. Owned here so the numbers cannot be reused by another socket
    /// before then, even if a server thread has already ended.
    listen_fds: Vec<OwnedFd>,
    hub_thread: Option<JoinHandle<()>>,
    servers: Vec<JoinHandle<()>>,
    /// This cluster's claim on its socket directory (socket_dir.rs).
    dir_lock: Option<DirLock>,
}

impl Cluster {
    /// Validate the configuration, create the hub and listen on one socket per
    /// node. Returns once every socket accepts connections.
    ///
    /// Refused, with nothing changed on disk, when another backend serves the
    /// same socket directory, or when a socket path holds anything but a stale
    /// socket (a live one, a file, a directory): see socket_dir.rs.
    pub fn start(opts: ClusterOptions) -> Result<Cluster, DeviceError> {
        let hub = Hub::new(opts.config.clone())?;
        std::fs::create_dir_all(&opts.socket_dir).map_err(|source| DeviceError::SocketDir {
            path: opts.socket_dir.clone(),
            source,
        })?;
        let dir_lock = DirLock::acquire(&opts.socket_dir)?;
        let shared = Arc::new(Device::new(hub, opts.spin).map_err(DeviceError::EventFd)?);
        let mut cluster = Cluster {
            shared: shared.clone(),
            nodes: opts.config.nodes,
            sockets: Vec::new(),
            listen_fds: Vec::new(),
            hub_thread: None,
            servers: Vec::new(),
            dir_lock: Some(dir_lock),
        };
        for node in NodeId::all(opts.config.nodes) {
            let path = opts.socket_dir.join(format!("{}.sock", Node(node)));
            clear_socket_path(&path)?;
            let listener = Listener::new(&path, false).map_err(|source| DeviceError::Listen {
                path: path.clone(),
                source,
            })?;
            // SAFETY: the listener's fd is open for the duration of this call.
            let fd = unsafe { BorrowedFd::borrow_raw(listener.as_raw_fd()) };
            cluster
                .listen_fds
                .push(
                    fd.try_clone_to_owned()
                        .map_err(|source| DeviceError::ListenFd {
                            path: path.clone(),
                            source,
                        })?,
                );
            let backend =
                Arc::new(NodeBackend::new(node, shared.clone()).map_err(DeviceError::EventFd)?);
            let t = std::thread::Builder::new()
                .name(format!("mc-{}", Node(node)))
                .spawn(move || serve_node(backend, listener))
                .map_err(DeviceError::Thread)?;
            cluster.servers.push(t);
            cluster.sockets.push(path);
        }
        let s = shared.clone();
        // The hub says when it runs (its thread id stored), so that
        // `hub_thread_id` is known once `start` returns.
        let (running, started) = std::sync::mpsc::sync_channel(1);
        cluster.hub_thread = Some(
            std::thread::Builder::new()
                .name("mc-hub".into())
                .spawn(move || {
                    s.hub_thread_started();
                    let _ = running.send(());
                    crate::hub_loop::run(s)
                })
                .map_err(DeviceError::Thread)?,
        );
        let _ = started.recv();
        info!(
            "cluster up: {} nodes, {} MiB, {} B pages, link {}, {} delivery, sockets in {}",
            opts.config.nodes,
            opts.config.address_space >> 20,
            opts.config.page_size,
            opts.config.link,
            opts.config.delivery,
            opts.socket_dir.display()
        );
        Ok(cluster)
    }

    pub fn nodes(&self) -> u8 {
        self.nodes
    }

    /// The vhost-user socket of `node`.
    pub fn socket_path(&self, node: NodeId) -> Option<&Path> {
        self.sockets.get(node.index()).map(PathBuf::as_path)
    }

    /// The hub thread's kernel thread id (known once [`Cluster::start`] has
    /// returned): where its CPU time is accounted
    /// (`/proc/self/task/<tid>/stat`, `schedstat`).
    pub fn hub_thread_id(&self) -> Option<i32> {
        self.shared.hub_tid()
    }

    /// Apply a fault to the running hub.
    pub fn apply_fault(&self, cmd: FaultCommand) -> Result<(), ModelError> {
        self.shared.lock().apply_fault(cmd)
    }

    /// Schedule a fault at `at` after the cluster started (a fault plan entry).
    pub fn schedule_fault(&self, at: Nanos, cmd: FaultCommand) -> Result<(), ModelError> {
        let r = self.shared.lock().schedule_fault(at, cmd);
        self.shared.wake_hub();
        r
    }

    /// Active packet fault rules, faults still scheduled, and the hub stall.
    pub fn fault_status(&self) -> FaultStatus {
        let st = self.shared.lock();
        FaultStatus {
            rules: st.hub().packet_faults().to_vec(),
            scheduled: st.hub().scheduled_faults().to_vec(),
            stalled_until: st.hub().stalled_until(),
            now: st.now(),
        }
    }

    pub fn snapshot(&self) -> ClusterSnapshot {
        let st = self.shared.lock();
        let hub = st.hub();
        let nodes = st
            .nodes()
            .iter()
            .map(|n| NodeSnapshot {
                node: n.id(),
                connected: n.guest().attached(),
                connections: n.connections(),
                status: hub.error_status(n.id()).unwrap_or_default(),
                counters: hub.node_counters(n.id()).unwrap_or_default(),
            })
            .collect();
        ClusterSnapshot {
            membership: hub.membership(),
            cluster_error_count: hub.cluster_error_count(),
            hub: hub.hub_counters(),
            nodes,
            uptime: st.now(),
        }
    }

    /// Stop serving: close every socket and stop the hub thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if !self.shared.begin_shutdown() {
            return;
        }
        self.shared.wake_hub();
        if let Some(t) = self.hub_thread.take() {
            let _ = t.join();
        }
        // Server threads block in accept() or in a guest's connection: shut
        // both down (works even if the socket files were removed meanwhile).
        for fd in &self.listen_fds {
            // SAFETY: `fd` is a descriptor this struct owns; shutdown only
            // changes the state of the socket it refers to.
            unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
        }
        self.shared.end_connections();
        for t in self.servers.drain(..) {
            let _ = t.join();
        }
        // The sockets are gone (each listener removes its own): give the
        // directory up.
        if let Some(l) = self.dir_lock.take() {
            l.release();
        }
        info!("cluster down");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}
