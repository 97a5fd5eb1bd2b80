//! `mc-host`: the command users run.

mod demo;
mod qemu_cmd;

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
    /// Build the guest boot image (kernel + initramfs with busybox, /init and
    /// the guest program) from the set-up cache; rebuilt only when inputs change.
    Image(qemu_cmd::ImageArgs),
    /// Say which QEMU, kernel and busybox the QEMU path would use, or what is
    /// missing and how to install it.
    QemuCheck(qemu_cmd::CheckArgs),
    /// Boot one guest under QEMU (TCG), optionally with the Memory Channel
    /// adapter on a vhost-user socket, run a command in it and report timings.
    QemuBoot(qemu_cmd::BootArgs),
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let result: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::Demo(args) => demo::run(&args).map_err(Into::into),
        Command::Image(args) => qemu_cmd::image(&args).map_err(Into::into),
        Command::QemuCheck(args) => qemu_cmd::check(&args).map_err(Into::into),
        Command::QemuBoot(args) => match qemu_cmd::qemu_boot(&args) {
            Ok(0) => Ok(()),
            Ok(status) => Err(format!("guest command exited with status {status}").into()),
            Err(e) => Err(e.into()),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mc-host: error: {e}");
            ExitCode::FAILURE
        }
    }
}
