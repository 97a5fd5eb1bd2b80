//! `mc-host run --nodes N -- PROGRAM ARGS`: a virtual cluster, no QEMU.
//!
//! Starts the backend in this process and one virtual guest per node: a process
//! running PROGRAM, told its node and socket through the environment
//! (`MC_NODE`, `MC_NODES`, `MC_SOCKET`), which `mc-guest` and libimc (the C
//! library) read alike; `MC_DELIVERY` and `MC_SEED` say how deliveries are
//! scheduled, for the guest's records. Output is printed line by line,
//! prefixed by node.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args;
use firmware_model::NodeId;
use log::warn;
use mc_device::ClusterOptions;

use crate::cli_error::CliError;
use crate::cli_error::{GuestFailure, StopReason};
use crate::clock_args::{self, ClockArgs};
use crate::cluster_args::ClusterArgs;
use crate::control::format_snapshot;
use crate::launch::Launch;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub clock: ClockArgs,
    /// Give up (and stop every guest) after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Once a guest has failed, stop the others if they have not finished
    /// this many seconds later (as mpirun ends a job when a rank fails): a
    /// program waiting for a node that is gone would otherwise hold the run
    /// until --timeout. 0 waits for every guest.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub after_failure: u64,
    /// Socket directory (default: a fresh temporary one). Give one to reach the
    /// cluster with `mc-host fault` or `mc-host stats` while it runs.
    #[arg(long)]
    pub socket_dir: Option<PathBuf>,
    /// Application threads per guest, passed to each guest program as
    /// MC_THREADS (`mc-guest csm` reads it).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub threads: Option<u32>,
    /// Print the cluster's counters when the run ends.
    #[arg(long)]
    pub stats: bool,
    /// Microseconds the hub keeps polling after traffic stops before it sleeps.
    #[arg(long, default_value_t = 200)]
    pub spin_us: u64,
    /// The program each virtual guest runs, and its arguments (`mc-guest ...`,
    /// or a C program linked with libimc: docs/c-api.md).
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// Find `name`: next to this executable first (a cargo build puts `mc-guest`
/// there), then on PATH; anything with a slash is used as given.
pub fn resolve_program(name: &str) -> Result<PathBuf, CliError> {
    if name.contains('/') {
        return Ok(PathBuf::from(name));
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
    {
        let p = dir.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(CliError::ProgramNotFound {
        name: name.to_string(),
    })
}

/// The program the guests run: under counted work a bare `mc-guest` is
/// the counted build beside this `mc-host`'s target directory
/// (`clock_args::counted_guest`), else [`resolve_program`].
fn guest_program(name: &str, clock: &ClockArgs) -> Result<PathBuf, CliError> {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from));
    let Some(counted) = exe_dir
        .as_deref()
        .and_then(|d| clock_args::counted_guest(name, clock.work(), d))
    else {
        return resolve_program(name);
    };
    let counted = counted?;
    // A counted build older than the plain one beside mc-host is likely
    // stale: say so (it still runs, as asked).
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let plain = exe_dir.map(|d| d.join(name));
    if let (Some(c), Some(p)) = (modified(&counted), plain.as_deref().and_then(modified)) {
        if p > c {
            warn!(
                "{} is older than {}: rebuild it with scripts/build-counted.sh",
                counted.display(),
                plain.as_deref().unwrap_or(Path::new(name)).display()
            );
        }
    }
    log::info!("counted work: the guests run {}", counted.display());
    Ok(counted)
}

fn delivery_name(d: crate::cluster_args::DeliveryChoice) -> &'static str {
    match d {
        crate::cluster_args::DeliveryChoice::Eager => "eager",
        crate::cluster_args::DeliveryChoice::Skewed => "skewed",
    }
}

struct NodeOutputLine(u8, String);

/// How long the output of guests that have exited may still take to arrive.
const OUTPUT_DRAIN: Duration = Duration::from_secs(10);

fn pump(node: u8, stream: impl Read + Send + 'static, tx: mpsc::Sender<NodeOutputLine>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            match line {
                Ok(l) => {
                    if tx.send(NodeOutputLine(node, l)).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    });
}

pub fn run(args: &RunArgs) -> Result<(), CliError> {
    let plan = args.cluster.plan()?;
    let config = args.cluster.config(plan.as_ref())?;
    let program = guest_program(&args.command[0], &args.clock)?;
    let tmp;
    let dir: &Path = match &args.socket_dir {
        Some(d) => d,
        None => {
            tmp = tempfile::Builder::new()
                .prefix("mc-run-")
                .tempdir()
                .map_err(CliError::SocketDir)?;
            tmp.path()
        }
    };
    let clock_env = args.clock.guest_env(dir)?;
    let mut opts = ClusterOptions::new(config.clone(), dir);
    opts.spin = Duration::from_micros(args.spin_us);
    let launch = Launch::start(opts, plan.as_ref())?;

    let (tx, rx) = mpsc::channel();
    let mut children: Vec<Option<Child>> = Vec::new();
    for n in 0..config.nodes {
        let socket = launch
            .cluster()
            .socket_path(NodeId(n))
            .ok_or(CliError::NoNodeSocket(n))?;
        let mut cmd = Command::new(&program);
        if let Some(t) = args.threads {
            cmd.env("MC_THREADS", t.to_string());
        }
        clock_args::apply(&mut cmd, &clock_env);
        die_with_parent(&mut cmd);
        let child = cmd
            .args(&args.command[1..])
            // What the guest cannot see from its adapter, for its records.
            .env("MC_DELIVERY", delivery_name(args.cluster.delivery))
            .env("MC_SEED", config.fault_seed.to_string())
            .env("MC_NODE", n.to_string())
            .env("MC_NODES", config.nodes.to_string())
            .env("MC_SOCKET", socket)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| CliError::StartGuest {
                program: program.clone(),
                source,
            })?;
        children.push(Some(child));
    }
    for (n, c) in children.iter_mut().enumerate() {
        if let Some(c) = c.as_mut() {
            if let Some(o) = c.stdout.take() {
                pump(guest_node(n), o, tx.clone());
            }
            if let Some(e) = c.stderr.take() {
                pump(guest_node(n), e, tx.clone());
            }
        }
    }

    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let mut statuses: Vec<Option<std::process::ExitStatus>> = vec![None; children.len()];
    let mut stop_reason = None;
    let mut first_failure: Option<(usize, Instant)> = None;
    let mut output_closed = false;
    while statuses.iter().any(Option::is_none) {
        while let Ok(NodeOutputLine(n, l)) = rx.recv_timeout(Duration::from_millis(20)) {
            output_closed |= !relay(n, &l);
        }
        for (n, c) in children.iter_mut().enumerate() {
            if let Some(child) = c.as_mut() {
                if let Ok(Some(s)) = child.try_wait() {
                    statuses[n] = Some(s);
                    *c = None;
                    if !s.success() && first_failure.is_none() {
                        first_failure = Some((n, Instant::now()));
                    }
                }
            }
        }
        if launch.interrupted() {
            stop_reason = Some(StopReason::Interrupted);
        } else if output_closed {
            stop_reason = Some(StopReason::OutputClosed);
        } else if Instant::now() > deadline {
            stop_reason = Some(StopReason::TimedOut);
        } else if let Some((n, at)) = first_failure {
            if args.after_failure > 0 && at.elapsed() >= Duration::from_secs(args.after_failure) {
                // Not a stop of the whole run: the guests that were still
                // running are reported as stopped before they finished.
                warn!(
                    "node{n} failed {} s ago: stopping the guests still running",
                    args.after_failure
                );
                stop_guests(&mut children);
                break;
            }
        }
        if let Some(why) = stop_reason {
            warn!("{why}: stopping every guest");
            stop_guests(&mut children);
            break;
        }
    }
    // Drain what is left of the output: until every reader has seen its
    // pipe close (a guest's last lines can still be in flight on a loaded
    // host long after it exited), or a pipe that a process the guest left
    // behind still holds open has had OUTPUT_DRAIN to finish.
    drop(tx);
    let drain_until = Instant::now() + OUTPUT_DRAIN;
    while let Ok(NodeOutputLine(n, l)) =
        rx.recv_timeout(drain_until.saturating_duration_since(Instant::now()))
    {
        if !output_closed {
            output_closed = !relay(n, &l);
        }
    }
    let snap = launch.cluster().snapshot();
    launch.finish();
    if args.stats {
        print!("{}", format_snapshot(&snap));
    }
    if let Some(why) = stop_reason {
        return Err(CliError::Stopped(why));
    }
    let failed: Vec<GuestFailure> = statuses
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_some_and(|s| s.success()))
        .map(|(n, s)| GuestFailure {
            node: guest_node(n),
            status: *s,
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::GuestsFailed { failed })
    }
}

/// Print a guest's line as `[nodeN] line`; false when stdout is gone (a
/// closed pipe: `println!` would panic and leave the guests running).
fn relay(n: u8, line: &str) -> bool {
    use std::io::Write;
    writeln!(std::io::stdout().lock(), "[node{n}] {line}").is_ok()
}

/// A guest gets SIGKILL when mc-host dies, whatever kills it: guests left
/// running would hold their cores and their waits would never end.
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls prctl, which is async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Kill and reap every guest still running.
fn stop_guests(children: &mut [Option<Child>]) {
    for mut child in children.iter_mut().filter_map(Option::take) {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The node of the `n`th guest: one guest per node, and a cluster has at
/// most 64 nodes.
fn guest_node(n: usize) -> u8 {
    u8::try_from(n).expect("at most 64 guests")
}
