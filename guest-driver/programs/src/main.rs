//! `mc-guest`: the program that runs in every guest of a Memory Channel cluster.
//!
//! In a virtual guest (`mc-host run --nodes N -- mc-guest ...`) it reaches its
//! adapter over vhost-user on the socket named by `--socket` or `MC_SOCKET`.
//! Without either it drives the adapter's PCI function directly: as root inside
//! a QEMU guest (`mc-host qemu-boot`, `mc-host cluster`), no kernel module.
//!
//! This file parses the command line and dispatches; `cmd` does the work.

#![forbid(unsafe_code)]

mod cmd;

use std::process::ExitCode;

use clap::Parser;
use firmware_model::ErrorChain;
use mc_guest::{bench, csm, selftest};

use cmd::cli::{GuestCli, GuestCommand};
use cmd::connect::open;
use cmd::error::GuestError;

/// Turn the virtual clock on when the run asks for it (the configuration
/// `mc-host run --clock virtual` hands its guests,
/// `firmware_model::abi::clock`). Only a virtual guest can: the clock board
/// the guests share is a file on the host.
fn init_clock(cli: &GuestCli) -> Result<(), GuestError> {
    let config = mc_api::vclock::config_from_env().map_err(mc_api::vclock::VclockError::from)?;
    let Some(config) = config else {
        return Ok(());
    };
    if mc_driver::TransportChoice::socket_or_env(cli.socket.clone()).is_none() {
        return Err(GuestError::VirtualClockInQemu);
    }
    // A Cashmere program's preset may name the processor it predicts on.
    let config = match &cli.command {
        GuestCommand::Csm(args) => csm::clock_for(args.app, args.preset, config),
        _ => config,
    };
    mc_api::vclock::init(config)?;
    Ok(())
}

fn run(cli: &GuestCli) -> Result<(), GuestError> {
    init_clock(cli)?;
    dispatch(cli)?;
    // A thread's work count that went wrong (it wrapped, or a thread never
    // counted: counted work on code without counters) left the run without
    // a prediction: say why, and fail.
    mc_api::vclock::check()?;
    Ok(())
}

fn dispatch(cli: &GuestCli) -> Result<(), GuestError> {
    match &cli.command {
        GuestCommand::Info => cmd::info::info(cli),
        GuestCommand::Selftest { iterations } => {
            let mc = open(cli)?;
            let n = selftest::run(&mc, *iterations, &mut |l| println!("{l}"))?;
            println!("selftest: {n} checks passed on node {}", mc.node_id().0);
            Ok(())
        }
        GuestCommand::Bench {
            which: bench::Which::Ump,
            iters,
            json,
            ..
        } => {
            let mc = open(cli)?;
            if let Some(r) = mc_guest::bench_ump::run(&mc, *iters, json.as_deref())? {
                print!("{}", mc_guest::bench_ump::format(&r));
            }
            Ok(())
        }
        GuestCommand::Bench {
            which: bench::Which::Csm,
            iters,
            variant,
            detection,
            json,
        } => {
            let mc = open(cli)?;
            let rows = csm::bench::run(&mc, *iters, *variant, *detection)?;
            if mc.node_id().0 == 0 {
                print!(
                    "{}",
                    csm::bench::format(&rows, mc.nodes(), *variant, *detection)
                );
                if let Some(path) = json {
                    let r = csm::bench::record(&rows, mc.nodes(), *variant, *detection, *iters);
                    csm::record::append(path, &r)?;
                }
            }
            Ok(())
        }
        GuestCommand::Bench {
            which: bench::Which::Hlrc,
            iters,
            ..
        } => {
            let mc = open(cli)?;
            let rows = csm::bench_hlrc::run(&mc, *iters)?;
            if mc.node_id().0 == 0 {
                print!("{}", csm::bench_hlrc::format(&rows, mc.nodes()));
            }
            Ok(())
        }
        GuestCommand::Bench { which, iters, .. } => {
            let mc = open(cli)?;
            let report = bench::run(&mc, *which, *iters)?;
            if mc.node_id().0 == 0 {
                print!("{}", bench::format(&report));
            }
            Ok(())
        }
        GuestCommand::Csm(args) => cmd::csm::main(cli, args),
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = GuestCli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mc-guest: error: {}", ErrorChain(&e));
            ExitCode::FAILURE
        }
    }
}
