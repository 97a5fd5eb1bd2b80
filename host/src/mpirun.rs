//! `mc-host mpirun -np N [cluster options] -- PROGRAM ARGS`: an MPI program
//! on a virtual cluster, one node per rank, through Open MPI's launcher and
//! this project's libfabric provider (`mc`, libmc-fi.so; docs/mpi.md).
//!
//! Starts the backend with N nodes, then Open MPI's `mpirun` with the `cm`
//! PML and the `ofi` MTL on the `mc` provider. Each rank finds its node's
//! adapter from `MC_SOCKET_DIR` and its rank (`node<rank>.sock`), so rank
//! r is node r. Output goes straight through; mpirun's exit status is
//! passed on. As root it adds `--allow-run-as-root`; with more ranks than
//! cores, `--oversubscribe`. When the ranks and the backend's hub do not
//! each have a core, ranks yield between polls (`mpi_yield_when_idle 1`)
//! and the provider's completion queue, which Open MPI then polls between
//! yields, yields itself only after 2000 empty reads (`MC_FI_SPIN`); when
//! they do, ranks spin (`mpi_yield_when_idle 0`) and the provider spins
//! longer before it yields. Either way it sleeps in short steps at last.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use clap::Args;
use firmware_model::LinkTiming;
use mc_device::ClusterOptions;

use crate::cli_error::{CliError, StopReason};
use crate::cluster_args::{ClusterArgs, DeliveryChoice};
use crate::launch::Launch;
use crate::mpirun_error::{MpirunError, PROVIDER_BUILT, PROVIDER_LOADED};

#[derive(Args, Debug)]
pub struct MpirunArgs {
    /// MPI ranks; each gets a node of its own.
    #[arg(long = "np", short = 'n', value_parser = clap::value_parser!(u8).range(1..=64))]
    pub np: u8,
    /// When receivers see a store: `eager` or `skewed` (see `mc-host run`).
    #[arg(long, value_enum, default_value_t = DeliveryChoice::Eager)]
    pub delivery: DeliveryChoice,
    /// Seed of the fault injector and of skewed delivery.
    #[arg(long)]
    pub seed: Option<u64>,
    /// A fault plan (TOML) to replay during the run.
    #[arg(long, value_name = "FILE")]
    pub fault_plan: Option<PathBuf>,
    /// Link timing: `unthrottled`, `mc1`, `mc2` or `clan` (seed 001's cLAN VIA,
    /// which virtual time then follows too).
    #[arg(long, default_value = "unthrottled")]
    pub link: LinkTiming,
    /// Give up (and stop every rank) after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Socket directory (default: a fresh temporary one).
    #[arg(long)]
    pub socket_dir: Option<PathBuf>,
    /// Open MPI's launcher.
    #[arg(long, default_value = "mpirun")]
    pub mpirun: String,
    /// More options for Open MPI's mpirun, as one argument each
    /// (`--mpirun-arg=--mca --mpirun-arg=coll_tuned_use_dynamic_rules`).
    #[arg(long = "mpirun-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub mpirun_args: Vec<String>,
    /// The MPI program and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// Accept Open MPI's one-dash `-np N` (clap knows `--np` and `-n`), up to
/// the `--` that starts the program's own arguments.
pub fn np_spelling(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut program = false;
    args.map(|a| {
        if a == "--" {
            program = true;
        }
        if !program && a == "-np" {
            "--np".into()
        } else {
            a
        }
    })
    .collect()
}

/// The provider library: `MC_FI_LIB`, else next to this executable.
fn provider_library() -> Result<PathBuf, MpirunError> {
    if let Some(p) = std::env::var_os("MC_FI_LIB").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(MpirunError::NoProvider)
        };
    }
    let exe = std::env::current_exe().map_err(|_| MpirunError::NoProvider)?;
    let dir = exe.parent().ok_or(MpirunError::NoProvider)?;
    // `cargo test` runs mc-host from target/<profile>/; the library is there.
    [
        dir.join(PROVIDER_BUILT),
        dir.join("..").join(PROVIDER_BUILT),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .ok_or(MpirunError::NoProvider)
}

fn on_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| p.is_file());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A directory holding the provider under the name libfabric loads.
fn provider_dir(lib: &Path, under: &Path) -> Result<PathBuf, MpirunError> {
    let bytes = std::fs::read(lib).map_err(MpirunError::ProviderDir)?;
    if !bytes.windows(12).any(|w| w == b"fi_prov_ini\0") {
        return Err(MpirunError::ProviderWithoutEntry {
            path: lib.to_path_buf(),
        });
    }
    let dir = under.join("fi-providers");
    std::fs::create_dir_all(&dir).map_err(MpirunError::ProviderDir)?;
    let link = dir.join(PROVIDER_LOADED);
    let _ = std::fs::remove_file(&link);
    let target = lib.canonicalize().map_err(MpirunError::ProviderDir)?;
    std::os::unix::fs::symlink(target, &link).map_err(MpirunError::ProviderDir)?;
    Ok(dir)
}

/// If libfabric's `fi_info` is installed, check that it loads the provider.
fn check_loads(dir: &Path, lib: &Path) -> Result<(), MpirunError> {
    let Some(fi_info) = on_path("fi_info") else {
        return Ok(());
    };
    let out = Command::new(fi_info)
        .arg("-l")
        .env("FI_PROVIDER_PATH", dir)
        .env_remove("FI_PROVIDER")
        .output();
    match out {
        Ok(o)
            if String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == "mc:") =>
        {
            Ok(())
        }
        Ok(o) => Err(MpirunError::NotLoaded {
            path: lib.to_path_buf(),
            why: format!(
                "fi_info -l does not list it{}",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .next()
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default()
            ),
        }),
        Err(_) => Ok(()),
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Ask mpirun to stop (it stops its ranks), then make sure it did.
fn stop(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: sends a signal to our own child process, still unreaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn status_error(s: ExitStatus) -> Option<MpirunError> {
    use std::os::unix::process::ExitStatusExt;
    if s.success() {
        None
    } else if let Some(c) = s.code() {
        Some(MpirunError::Exit(c))
    } else {
        Some(MpirunError::Signal(s.signal().unwrap_or(0)))
    }
}

pub fn run(args: &MpirunArgs) -> Result<(), CliError> {
    let mpirun = on_path(&args.mpirun).ok_or(MpirunError::NoOpenMpi)?;
    let lib = provider_library()?;
    let cluster_args = ClusterArgs {
        nodes: args.np,
        link: args.link,
        page_size: 8192,
        address_space: 512 << 20,
        max_payload: 32,
        hub_ports: None,
        delivery: args.delivery,
        seed: args.seed,
        fault_plan: args.fault_plan.clone(),
    };
    let plan = cluster_args.plan()?;
    let config = cluster_args.config(plan.as_ref())?;
    let tmp = tempfile::Builder::new()
        .prefix("mc-mpirun-")
        .tempdir()
        .map_err(CliError::SocketDir)?;
    let dir: &Path = args.socket_dir.as_deref().unwrap_or(tmp.path());
    let fi_dir = provider_dir(&lib, tmp.path())?;
    check_loads(&fi_dir, &lib)?;

    let launch = Launch::start(ClusterOptions::new(config.clone(), dir), plan.as_ref())?;

    let mut cmd = Command::new(&mpirun);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--allow-run-as-root");
    }
    if usize::from(args.np) > cores() {
        cmd.arg("--oversubscribe");
    }
    // The ranks and the hub: one core each, or not.
    let crowded = usize::from(args.np) + 1 > cores();
    if crowded && std::env::var_os("MC_FI_SPIN").is_none() {
        cmd.env("MC_FI_SPIN", "2000");
    }
    let delivery = match args.delivery {
        DeliveryChoice::Eager => "eager",
        DeliveryChoice::Skewed => "skewed",
    };
    cmd.args(["-np", &args.np.to_string(), "--bind-to", "none"])
        .args(["--mca", "pml", "cm", "--mca", "mtl", "ofi"])
        .args(["--mca", "mtl_ofi_provider_include", "mc"])
        .args([
            "--mca",
            "mpi_yield_when_idle",
            if crowded { "1" } else { "0" },
        ])
        .args(&args.mpirun_args)
        .args([
            "-x",
            "FI_PROVIDER_PATH",
            "-x",
            "FI_PROVIDER",
            "-x",
            "MC_SOCKET_DIR",
        ])
        .args(["-x", "MC_NODES", "-x", "MC_DELIVERY", "-x", "MC_SEED"])
        .args(if crowded || std::env::var_os("MC_FI_SPIN").is_some() {
            &["-x", "MC_FI_SPIN"][..]
        } else {
            &[]
        })
        .args(&args.command)
        .env("FI_PROVIDER_PATH", &fi_dir)
        .env("FI_PROVIDER", "mc")
        .env("MC_SOCKET_DIR", dir)
        .env("MC_NODES", args.np.to_string())
        .env("MC_DELIVERY", delivery)
        .env("MC_SEED", config.fault_seed.to_string())
        // Every rank finds its own socket; one inherited MC_SOCKET would
        // send them all to the same node.
        .env_remove("MC_SOCKET")
        .env_remove("MC_NODE");
    let mut child = cmd.spawn().map_err(|source| MpirunError::Start {
        program: mpirun.clone(),
        source,
    })?;
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let mut stopped = None;
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if launch.interrupted() {
            stopped = Some(StopReason::Interrupted);
        } else if Instant::now() > deadline {
            stopped = Some(StopReason::TimedOut);
        }
        if let Some(why) = stopped {
            log::warn!("{why}: stopping mpirun and its ranks");
            stop(&mut child);
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    launch.finish();
    if let Some(why) = stopped {
        return Err(CliError::Stopped(why));
    }
    match status.and_then(status_error) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
