//! `mc-host serve`: run the backend for QEMU guests (or virtual guests).

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use clap::Args;
use log::info;
use mc_device::{Cluster, ClusterOptions, ClusterSnapshot};

use crate::cluster_args::ClusterArgs;
use crate::CliError;

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
    let config = args.cluster.config().map_err(CliError::Usage)?;
    let mut opts = ClusterOptions::new(config, &args.socket_dir);
    opts.throttle = args.cluster.throttle();
    opts.spin = Duration::from_micros(args.spin_us);
    let (tx, rx) = mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = tx.send(());
    })
    .map_err(|e| CliError::Runtime(format!("cannot install the Ctrl-C handler: {e}")))?;
    let cluster = Cluster::start(opts).map_err(|e| CliError::Runtime(e.to_string()))?;
    for n in 0..cluster.nodes() {
        if let Some(p) = cluster.socket_path(firmware_model::NodeId(n)) {
            println!("node{n}: {}", p.display());
        }
    }
    println!("serving; Ctrl-C to stop");
    let _ = rx.recv();
    info!("shutting down");
    let snap = cluster.snapshot();
    cluster.shutdown();
    print_snapshot(&snap);
    Ok(())
}

/// The per-node table `serve` prints at exit (and `stats` will show).
pub fn print_snapshot(s: &ClusterSnapshot) {
    println!(
        "membership epoch {} members {}; cluster error count {}; up {:.1} s",
        s.membership.epoch,
        s.membership.members,
        s.cluster_error_count,
        s.uptime.0 as f64 / 1e9
    );
    println!(
        "{:<6} {:>5} {:>10} {:>12} {:>10} {:>12} {:>7} {:>7} {:>7}",
        "node", "conns", "pkts tx", "bytes tx", "pkts rx", "bytes rx", "drops", "errors", "refused"
    );
    for n in &s.nodes {
        let c = &n.counters;
        println!(
            "{:<6} {:>5} {:>10} {:>12} {:>10} {:>12} {:>7} {:>7} {:>7}",
            n.node.to_string(),
            n.connections,
            c.packets_sent,
            c.bytes_sent,
            c.packets_received,
            c.bytes_received,
            c.drops,
            c.errors,
            c.protection_errors
        );
    }
}
