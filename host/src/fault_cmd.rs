//! `mc-host fault` and `mc-host stats`: talk to a running cluster.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::cli_error::CliError;
use crate::control::request;

#[derive(Args, Debug)]
pub struct FaultArgs {
    /// The cluster's socket directory (as given to `mc-host serve` or `run`).
    #[arg(long)]
    pub socket_dir: PathBuf,
    /// `status`, or a fault: `drop RATE [everywhere|node N|link A B]`,
    /// `corrupt RATE [...]`, `clear`, `link-down N`, `link-up N`, `crash N`,
    /// `rejoin N`, `stall DURATION`. RATE is 0.01 or 1%; DURATION like 5ms.
    #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The cluster's socket directory.
    #[arg(long)]
    pub socket_dir: PathBuf,
    /// Refresh every this many seconds until interrupted.
    #[arg(long, value_name = "SECS")]
    pub watch: Option<f64>,
}

pub fn fault(args: &FaultArgs) -> Result<(), CliError> {
    let line = args.command.join(" ");
    let req = if line == "status" {
        "status".to_string()
    } else {
        // Check the syntax here too, so a typo is a usage error with exit code 2.
        line.parse::<firmware_model::FaultCommand>()?;
        format!("fault {line}")
    };
    let out = request(&args.socket_dir, &req)?;
    print!("{out}");
    Ok(())
}

pub fn stats(args: &StatsArgs) -> Result<(), CliError> {
    let Some(secs) = args.watch else {
        print!("{}", request(&args.socket_dir, "stats")?);
        return Ok(());
    };
    if !(secs.is_finite() && secs >= 0.05) {
        return Err(CliError::WatchInterval);
    }
    loop {
        let out = request(&args.socket_dir, "stats")?;
        // Clear the screen and redraw, like watch(1).
        print!("\x1b[2J\x1b[H{out}");
        std::thread::sleep(Duration::from_secs_f64(secs));
    }
}
