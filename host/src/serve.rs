//! `mc-host serve`: run the backend for QEMU guests (or virtual guests).

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use clap::Args;
use log::info;
use mc_device::{Cluster, ClusterOptions};
use std::sync::Arc;

use crate::cluster_args::schedule_plan;
use crate::control::{format_snapshot, ControlServer, CONTROL_SOCKET};

use crate::cli_error::CliError;
use crate::cluster_args::ClusterArgs;

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Directory for the sockets `node<i>.sock` (created if missing).
    #[arg(long)]
    pub socket_dir: PathBuf,
    /// Microseconds the hub keeps polling after traffic stops before it sleeps.
    #[arg(long, default_value_t = 200)]
    pub spin_us: u64,
}

pub fn run(args: &ServeArgs) -> Result<(), CliError> {
    let plan = args.cluster.plan()?;
    let config = args.cluster.config(plan.as_ref())?;
    let mut opts = ClusterOptions::new(config, &args.socket_dir);
    opts.spin = Duration::from_micros(args.spin_us);
    let (tx, rx) = mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = tx.send(());
    })?;
    let cluster = Arc::new(Cluster::start(opts)?);
    if let Some(plan) = &plan {
        schedule_plan(&cluster, plan)?;
    }
    let control = ControlServer::start(&args.socket_dir, cluster.clone())?;
    for n in 0..cluster.nodes() {
        if let Some(p) = cluster.socket_path(firmware_model::NodeId(n)) {
            println!("node{n}: {}", p.display());
        }
    }
    println!(
        "control: {}",
        args.socket_dir.join(CONTROL_SOCKET).display()
    );
    println!("serving; Ctrl-C to stop");
    let _ = rx.recv();
    info!("shutting down");
    drop(control);
    let snap = cluster.snapshot();
    if let Ok(c) = Arc::try_unwrap(cluster) {
        c.shutdown();
    }
    print!("{}", format_snapshot(&snap));
    Ok(())
}
