//! `mc-host`: the command users run.

mod demo;

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
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mc-host: error: {e}");
            ExitCode::FAILURE
        }
    }
}
