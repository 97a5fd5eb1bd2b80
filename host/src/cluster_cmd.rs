//! `mc-host cluster up|run|status|down`: a cluster of QEMU guests on one
//! backend. The logic is in `mc_qemu::cluster`; see docs/qemu.md.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use firmware_model::ErrorChain;
use mc_qemu::cluster::{self, StateDir, UpOptions};
use mc_qemu::guest_build::default_guest_binary;
use mc_qemu::shell::shell_join;
use mc_qemu::{build_image, find_qemu, CacheDir, GuestInputs, QemuError};

use crate::cli_error::CliError;
use crate::cluster_args::{parse_size, ClusterArgs};
use crate::control::request;
use crate::qemu_cmd::GuestImageArgs;

#[derive(Args, Debug)]
pub struct ClusterCmd {
    /// State directory: pid files, sockets, serial logs
    /// [default: $MC_CLUSTER_DIR, else /tmp/mc-cluster-<uid>].
    #[arg(long, global = true)]
    pub state_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub action: ClusterAction,
}

#[derive(Subcommand, Debug)]
pub enum ClusterAction {
    /// Start the backend and one QEMU guest (TCG) per node; wait until every
    /// guest is ready for commands.
    Up(ClusterUpArgs),
    /// Run a command on every guest at once; print each node's output and
    /// exit status (exit 1 if any node failed).
    Run(ClusterRunArgs),
    /// Show the processes of the cluster and the backend's counters.
    Status,
    /// Stop every process of the cluster (also after a crash of mc-host).
    Down,
}

#[derive(Args, Debug)]
pub struct ClusterUpArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Guest memory (shared memfd RAM), e.g. 256M.
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    pub memory: u64,
    #[command(flatten)]
    pub image: GuestImageArgs,
    /// Seconds each guest may take to become ready.
    #[arg(long, default_value_t = 90)]
    pub ready_timeout: u64,
    /// Leave `quiet` off the guests' kernel command line.
    #[arg(long)]
    pub verbose_kernel: bool,
}

#[derive(Args, Debug)]
pub struct ClusterRunArgs {
    /// Give up on a node after this many seconds without output.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Print the output node by node at the end only (not live).
    #[arg(long)]
    pub quiet: bool,
    /// The command (argv, after `--`), e.g. `mc-guest selftest`.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

fn state_dir(cmd: &ClusterCmd) -> StateDir {
    if let Some(d) = &cmd.state_dir {
        return StateDir(d.clone());
    }
    if let Some(d) = std::env::var_os("MC_CLUSTER_DIR").filter(|d| !d.is_empty()) {
        return StateDir(PathBuf::from(d));
    }
    // SAFETY: getuid(2) takes no arguments, touches no memory of ours and
    // cannot fail: it only returns this process's real user id.
    let uid = unsafe { libc::getuid() };
    StateDir(PathBuf::from(format!("/tmp/mc-cluster-{uid}")))
}

pub fn run(cmd: &ClusterCmd) -> Result<(), CliError> {
    let st = state_dir(cmd);
    match &cmd.action {
        ClusterAction::Up(a) => up(&st, a),
        ClusterAction::Run(a) => run_cmd(&st, a),
        ClusterAction::Status => status(&st),
        ClusterAction::Down => {
            let n = cluster::down(&st, &mut |l| println!("{l}"))?;
            println!(
                "cluster in {} is down ({n} processes stopped)",
                st.0.display()
            );
            Ok(())
        }
    }
}

fn up(st: &StateDir, a: &ClusterUpArgs) -> Result<(), CliError> {
    let cache = CacheDir::from_env()?;
    // What is missing, before anything starts.
    let qemu = find_qemu(a.image.qemu.as_deref(), &cache)?;
    let dir = a.image.image_dir(&cache);
    let guest = match &a.image.guest_binary {
        Some(g) => g.clone(),
        None => default_guest_binary(&dir, &mut |l| eprintln!("{l}")).map_err(QemuError::from)?,
    };
    let programs = a.image.programs(&dir);
    let img = build_image(
        &GuestInputs::from_cache(&cache, Some(&guest))?.with_programs(&programs)?,
        &dir,
    )?;
    let memory_mib =
        u32::try_from(a.memory >> 20).map_err(|_| CliError::MemoryTooLarge(a.memory))?;
    let exe = std::env::current_exe().map_err(CliError::CurrentExe)?;
    let mut backend = Command::new(exe);
    backend
        .arg("serve")
        .args(a.cluster.to_args())
        .arg("--socket-dir")
        .arg(st.socket_dir());
    let opts = UpOptions {
        state: st.clone(),
        nodes: u32::from(a.cluster.nodes),
        memory_mib,
        kernel: img.kernel,
        initrd: img.initrd,
        image_dir: dir,
        ready_timeout: Duration::from_secs(a.ready_timeout),
        quiet: !a.verbose_kernel,
    };
    let start = Instant::now();
    println!(
        "starting a {}-node cluster in {} (QEMU {})",
        opts.nodes,
        st.0.display(),
        qemu.version
    );
    cluster::up(&qemu, &opts, backend, &mut |l| {
        println!("{l}");
        let _ = std::io::stdout().flush();
    })?;
    println!(
        "cluster up after {:.2} s: run commands with `mc-host cluster run -- mc-guest selftest`, \
         stop it with `mc-host cluster down`",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn run_cmd(st: &StateDir, a: &ClusterRunArgs) -> Result<(), CliError> {
    let line = shell_join(&a.command);
    let start = Instant::now();
    let live = !a.quiet;
    let results = cluster::run(st, &line, Duration::from_secs(a.timeout), &|n, l| {
        if live {
            println!("[node {n}] {l}");
        }
    })?;
    let secs = start.elapsed().as_secs_f64();
    let mut failed = 0;
    for r in &results {
        if !live {
            println!("--- node {} ---", r.node);
            print!("{}", r.output);
        }
        match (r.status, &r.error) {
            (Some(0), _) => {}
            (Some(s), _) => {
                failed += 1;
                eprintln!("node {}: exit status {s}", r.node);
            }
            (None, e) => {
                failed += 1;
                match e {
                    Some(e) => eprintln!("node {}: {}", r.node, ErrorChain(e)),
                    None => eprintln!("node {}: no result", r.node),
                }
            }
        }
    }
    let statuses: Vec<String> = results
        .iter()
        .map(|r| {
            format!(
                "node {}: {}",
                r.node,
                r.status.map_or("-".into(), |s| s.to_string())
            )
        })
        .collect();
    println!("exit status: {} ({secs:.2} s)", statuses.join(", "));
    if failed > 0 {
        return Err(CliError::ClusterNodesFailed {
            failed,
            nodes: results.len(),
        });
    }
    Ok(())
}

fn status(st: &StateDir) -> Result<(), CliError> {
    let procs = cluster::status(st);
    if procs.is_empty() {
        println!("no cluster in {}", st.0.display());
        return Ok(());
    }
    if let Ok(cs) = st.load() {
        println!(
            "cluster in {}: {} nodes, {} MiB each, image {}",
            st.0.display(),
            cs.nodes,
            cs.memory_mib,
            cs.image_dir.display()
        );
    } else {
        println!(
            "cluster in {}: not fully up (no cluster.toml)",
            st.0.display()
        );
    }
    for p in &procs {
        println!(
            "  {:<8} pid {:<8} {}",
            p.what,
            p.pid.map_or("?".into(), |p| p.to_string()),
            if p.alive { "running" } else { "NOT RUNNING" }
        );
    }
    match request(&st.socket_dir(), "stats") {
        Ok(s) => print!("{s}"),
        Err(e) => println!("backend counters unavailable: {}", ErrorChain(&e)),
    }
    Ok(())
}
