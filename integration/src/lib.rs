//! Helpers for tests across processes and guests.
//!
//! - [`VirtualCluster`]: the real backend in this process and one virtual
//!   guest per node (a thread speaking vhost-user to its socket, exactly as a
//!   guest process does), each with the Memory Channel API open.
//! - [`binary`]: the path of a workspace binary (`mc-host`, `mc-guest`) for
//!   tests that run whole processes, built first ([`build`]).
//! - [`hostile`]: a hostile vhost-user frontend and a well-behaved victim, for
//!   the tests that attack the backend.
//! - [`delivery`]: which delivery modes (eager, skewed with which seeds) a
//!   test runs under.
//! - [`c_program`]: C programs built with the system `cc` against libimc
//!   (the C library of `guest-driver/libimc`).

pub mod build;
pub mod c_program;
pub mod delivery;
pub mod dsm_runs;

pub use build::binary;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use firmware_model::{ClusterConfig, DeliveryMode};
use mc_api::{AdapterPort, MemoryChannel, OpenOptions};
use mc_device::{Cluster, ClusterOptions};
use mc_driver::{Adapter, AdapterOptions, VhostUserOptions, VhostUserTransport};

pub mod hostile;
pub mod ump_rig;

/// A running backend with a socket directory that lives as long as it does.
pub struct VirtualCluster {
    pub cluster: Arc<Cluster>,
    dir: tempfile::TempDir,
}

impl VirtualCluster {
    pub fn start(config: ClusterConfig) -> VirtualCluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster =
            Cluster::start(ClusterOptions::new(config, dir.path())).expect("start the backend");
        VirtualCluster {
            cluster: Arc::new(cluster),
            dir,
        }
    }

    /// `nodes` adapters with every default but `delivery`.
    pub fn with_delivery(nodes: u8, delivery: DeliveryMode) -> VirtualCluster {
        VirtualCluster::start(delivery::config(nodes, delivery))
    }

    pub fn nodes(&self) -> u8 {
        self.cluster.nodes()
    }

    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self, node: u8) -> PathBuf {
        self.dir.path().join(format!("node{node}.sock"))
    }

    /// A virtual guest's adapter on `node`.
    pub fn adapter(&self, node: u8) -> Adapter<VhostUserTransport> {
        let t = VhostUserTransport::connect(self.socket(node), &VhostUserOptions::default())
            .expect("connect");
        Adapter::new(
            t,
            AdapterOptions {
                spin: 64,
                ..Default::default()
            },
        )
        .expect("adapter")
    }

    /// Run `f` on every node at once, each with the Memory Channel API open,
    /// and return the results in node order. A panic on any node fails the test.
    pub fn on_every_node<R: Send + 'static>(
        &self,
        f: impl Fn(MemoryChannel) -> R + Send + Sync + 'static,
    ) -> Vec<R> {
        let f = Arc::new(f);
        let handles: Vec<_> = (0..self.nodes())
            .map(|n| {
                let f = f.clone();
                let socket = self.socket(n);
                std::thread::Builder::new()
                    .name(format!("guest{n}"))
                    .spawn(move || {
                        let t = VhostUserTransport::connect(&socket, &VhostUserOptions::default())
                            .expect("connect");
                        let a = Adapter::new(
                            t,
                            AdapterOptions {
                                spin: 64,
                                ..Default::default()
                            },
                        )
                        .expect("adapter");
                        let port = AdapterPort::new(a).expect("status page");
                        let mc = MemoryChannel::open(Box::new(port), &OpenOptions::default())
                            .expect("open the API");
                        f(mc)
                    })
                    .expect("spawn")
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(n, h)| h.join().unwrap_or_else(|_| panic!("node {n} failed")))
            .collect()
    }
}

/// `mc-host run --nodes N --timeout SECS HOST_OPTS -- GUEST...` (mc-host finds
/// `mc-guest` beside itself; both are built first). Returns whether
/// it succeeded, and its stdout and stderr together.
pub fn mc_host_run(
    nodes: u32,
    timeout_s: u32,
    host_opts: &[&str],
    guest: &[&str],
) -> (bool, String) {
    let out = Command::new(binary("mc-host"))
        .args(["run", "--nodes", &nodes.to_string()])
        .args(["--timeout", &timeout_s.to_string()])
        .args(host_opts)
        .arg("--")
        .args(guest)
        .output()
        .expect("run mc-host");
    (out.status.success(), output_text(&out))
}

/// A finished process's stdout and stderr together, as one text.
pub fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
