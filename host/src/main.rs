//! `mc-host`: the command users run.

mod cli_error;
mod clock_args;
mod cluster_args;
mod cluster_cmd;
mod control;
mod demo;
mod fault_cmd;
mod fault_plan;
mod launch;
mod mpirun;
mod mpirun_error;
mod pvm;
mod pvm_error;
mod qemu_cmd;
mod run;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cli_error::CliError;
use firmware_model::ErrorChain;

/// Memory Channel cluster emulator: host-side commands.
#[derive(Parser, Debug)]
#[command(name = "mc-host", version, about, long_about = None)]
struct McHostCli {
    #[command(subcommand)]
    command: McHostCommand,
}

#[derive(Subcommand, Debug)]
enum McHostCommand {
    /// Run a virtual cluster on the firmware model and narrate what the hub does:
    /// broadcast, loopback, point-to-point, ACK-page error checks, faults.
    Demo(demo::DemoArgs),
    /// Serve one Memory Channel adapter per node on vhost-user sockets, all on
    /// one hub, for QEMU guests (vhost-user-test-device-pci) or virtual guests.
    Serve(serve::ServeArgs),
    /// Start the backend and one virtual guest per node (no QEMU), each running
    /// the given program (usually `mc-guest ...`); print their output by node.
    Run(run::RunArgs),
    /// Run an MPI program on a virtual cluster, one node per rank, through Open
    /// MPI's mpirun and the `mc` libfabric provider (docs/mpi.md).
    Mpirun(mpirun::MpirunArgs),
    /// Run a PVM program built against libpvm-mc on a virtual cluster: its
    /// tasks on UMP, pvm_spawn and the task table served here (docs/pvm.md).
    Pvm(pvm::PvmArgs),
    /// Inject a fault into a running cluster, or show the faults in force
    /// (`status`).
    Fault(fault_cmd::FaultArgs),
    /// Per-node packets, bytes, drops, errors and membership of a running cluster.
    Stats(fault_cmd::StatsArgs),
    /// Build the guest boot image (kernel + initramfs with busybox, /init and
    /// the guest program) from the set-up cache; rebuilt only when inputs change.
    Image(qemu_cmd::ImageArgs),
    /// Say which QEMU, kernel and busybox the QEMU path would use, or what is
    /// missing and how to install it.
    QemuCheck(qemu_cmd::CheckArgs),
    /// Boot one guest under QEMU (TCG), optionally with the Memory Channel
    /// adapter on a vhost-user socket, run a command in it and report timings.
    QemuBoot(qemu_cmd::BootArgs),
    /// A cluster of QEMU guests on one backend: `up`, `run -- CMD`, `status`,
    /// `down`.
    Cluster(cluster_cmd::ClusterCmd),
    /// Seed 000's tables and charts from the emulator: `run` a matrix of
    /// applications x variants x configurations into a results file,
    /// `render` it into report.md and SVG charts.
    Report(mc_report::ReportArgs),
}

fn main() -> ExitCode {
    let cli = McHostCli::parse_from(mpirun::np_spelling(std::env::args_os()));
    // Server and QEMU commands narrate progress; in `run` and `demo` the
    // backend's log would drown the guests' output, so only warnings show there
    // unless RUST_LOG says otherwise.
    let level = if !matches!(
        cli.command,
        McHostCommand::Run(_)
            | McHostCommand::Mpirun(_)
            | McHostCommand::Pvm(_)
            | McHostCommand::Demo(_)
            | McHostCommand::Fault(_)
            | McHostCommand::Stats(_)
            | McHostCommand::Report(_)
    ) {
        "info"
    } else {
        "warn"
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level)).init();
    let result = match cli.command {
        McHostCommand::Demo(args) => demo::run(&args).map_err(CliError::from),
        McHostCommand::Serve(args) => serve::run(&args),
        McHostCommand::Run(args) => run::run(&args),
        McHostCommand::Mpirun(args) => mpirun::run(&args),
        McHostCommand::Pvm(args) => pvm::run(&args),
        McHostCommand::Fault(args) => fault_cmd::fault(&args),
        McHostCommand::Stats(args) => fault_cmd::stats(&args),
        McHostCommand::Image(args) => qemu_cmd::image(&args).map_err(CliError::from),
        McHostCommand::QemuCheck(args) => qemu_cmd::check(&args).map_err(CliError::from),
        McHostCommand::Cluster(args) => cluster_cmd::run(&args),
        McHostCommand::Report(args) => mc_report::run(&args).map_err(CliError::from),
        McHostCommand::QemuBoot(args) => match qemu_cmd::qemu_boot(&args) {
            Ok(0) => Ok(()),
            Ok(status) => Err(CliError::GuestCommand(status)),
            Err(e) => Err(e.into()),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mc-host: error: {}", ErrorChain(&e));
            ExitCode::from(e.exit_code())
        }
    }
}
