//! What `mc-host run` and `mc-host mpirun` set up alike around the programs
//! they start: the backend's cluster, the fault plan scheduled on it, its
//! control socket (for `mc-host fault` and `mc-host stats` while it runs),
//! and a Ctrl-C handler that only raises a flag, so that the caller stops
//! its programs and tears the cluster down itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mc_device::{Cluster, ClusterOptions};

use crate::cli_error::CliError;
use crate::cluster_args::schedule_plan;
use crate::control::ControlServer;
use crate::fault_plan::FaultPlan;

/// A started cluster with its control socket open and Ctrl-C caught.
///
/// Dropped without [`Launch::finish`] (a caller that fails half-way), the
/// control socket closes before the cluster goes, as `finish` does it.
pub struct Launch {
    // Fields drop in this order.
    control: ControlServer,
    cluster: Arc<Cluster>,
    interrupted: Arc<AtomicBool>,
}

impl Launch {
    /// Start the cluster `opts` describes, schedule `plan` on it, open the
    /// control socket in its socket directory and catch Ctrl-C.
    pub fn start(opts: ClusterOptions, plan: Option<&FaultPlan>) -> Result<Launch, CliError> {
        let dir = opts.socket_dir.clone();
        let cluster = Arc::new(Cluster::start(opts)?);
        if let Some(plan) = plan {
            schedule_plan(&cluster, plan)?;
        }
        let control = ControlServer::start(&dir, cluster.clone())?;
        let interrupted = Arc::new(AtomicBool::new(false));
        let flag = interrupted.clone();
        // A handler that cannot be installed leaves Ctrl-C's default: it
        // ends mc-host.
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
        Ok(Launch {
            control,
            cluster,
            interrupted,
        })
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Ctrl-C was pressed since the start.
    pub fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    /// Close the control socket, then shut the cluster down.
    pub fn finish(self) {
        drop(self.control);
        if let Ok(c) = Arc::try_unwrap(self.cluster) {
            c.shutdown();
        }
    }
}
