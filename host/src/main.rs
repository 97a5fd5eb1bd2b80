//! `mc-host`: the command users run.

mod cluster_args;
mod demo;
mod run;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Memory Channel cluster emulator: host-side commands.
#[derive(Parser, Debug)]
#[command(name = "mc-host", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a virtual cluster on the firmware model and narrate what the hub does:
    /// broadcast, loopback, point-to-point, ACK-page error checks, faults.
    Demo(demo::DemoArgs),
    /// Serve one Memory Channel adapter per node on vhost-user sockets, all on
    /// one hub, for QEMU guests (vhost-user-test-device-pci) or virtual guests.
    Serve(serve::ServeArgs),
    /// Start the backend and one virtual guest per node (no QEMU), each running
    /// the given program (usually `mc-guest ...`); print their output by node.
    Run(run::RunArgs),
}

/// How a command failed: bad usage exits 2, anything else 1.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Runtime(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The server narrates connections; elsewhere the backend's log would drown
    // the guests' output, so only warnings show unless RUST_LOG says otherwise.
    let level = if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level)).init();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args).map_err(|e| CliError::Runtime(e.to_string())),
        Command::Serve(args) => serve::run(&args),
        Command::Run(args) => run::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Usage(e)) => {
            eprintln!("mc-host: error: {e}");
            ExitCode::from(2)
        }
        Err(CliError::Runtime(e)) => {
            eprintln!("mc-host: error: {e}");
            ExitCode::FAILURE
        }
    }
}
