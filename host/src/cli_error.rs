//! How an `mc-host` command fails, and the exit status each failure gives:
//! 2 for a command line that asks for something impossible, 1 for anything
//! that went wrong while doing what it asked.
//!
//! A variant's message leaves out the cause it keeps (`#[source]`,
//! `#[from]`): `main` prints the error with
//! [`ErrorChain`](firmware_model::ErrorChain), which names each cause once.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;

use firmware_model::FaultSyntaxError;
use mc_device::DeviceError;
use mc_qemu::guest_build::GuestBuildError;
use mc_qemu::QemuError;
use mc_report::ReportError;

use crate::clock_args::ClockArgsError;
use crate::cluster_args::ClusterArgsError;
use crate::control::{ControlError, ControlServerError};
use crate::demo::DemoError;
use crate::mpirun_error::MpirunError;

/// Why an `mc-host` command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    // What the command line asked for cannot be done (exit status 2).
    #[error(transparent)]
    ClusterArgs(#[from] ClusterArgsError),
    #[error(transparent)]
    FaultSyntax(#[from] FaultSyntaxError),
    #[error(transparent)]
    ClockArgs(#[from] ClockArgsError),
    #[error("--watch needs an interval of at least 0.05 seconds")]
    WatchInterval,
    #[error("--memory {0} is too large")]
    MemoryTooLarge(u64),
    #[error(
        "cannot find {name:?} next to mc-host or on PATH (build it with `cargo build --release`)"
    )]
    ProgramNotFound { name: String },

    // What went wrong while doing it (exit status 1).
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error("control socket")]
    ControlServer(#[from] ControlServerError),
    #[error(transparent)]
    Qemu(#[from] QemuError),
    #[error(transparent)]
    Demo(#[from] DemoError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("cannot create a socket directory")]
    SocketDir(#[source] io::Error),
    #[error("cannot install the Ctrl-C handler")]
    CtrlC(#[from] ctrlc::Error),
    #[error("finding mc-host")]
    CurrentExe(#[source] io::Error),
    #[error("the backend has no socket for node {0}")]
    NoNodeSocket(u8),
    #[error("cannot start {}", program.display())]
    StartGuest {
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{0}; every guest was stopped")]
    Stopped(StopReason),
    #[error("guest program failed on {}", join(failed))]
    GuestsFailed { failed: Vec<GuestFailure> },
    #[error("{failed} of {nodes} nodes failed")]
    ClusterNodesFailed { failed: usize, nodes: usize },
    #[error("guest command exited with status {0}")]
    GuestCommand(i32),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    Mpirun(#[from] MpirunError),
    #[error(transparent)]
    Pvm(#[from] crate::pvm_error::PvmError),
}

impl CliError {
    /// The process exit status for this failure.
    pub fn exit_code(&self) -> u8 {
        // mpirun's own status is passed on.
        if let CliError::Mpirun(MpirunError::Exit(c)) = self {
            return u8::try_from(*c).unwrap_or(1);
        }
        if self.is_usage() {
            2
        } else {
            1
        }
    }

    /// True when the command line, not the run, is at fault.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            CliError::ClusterArgs(_)
                | CliError::ClockArgs(ClockArgsError::NeedsVirtual(_))
                | CliError::ClockArgs(ClockArgsError::NoCountedGuest { .. })
                | CliError::FaultSyntax(_)
                | CliError::WatchInterval
                | CliError::MemoryTooLarge(_)
                | CliError::ProgramNotFound { .. }
                | CliError::Qemu(QemuError::GuestBuild(GuestBuildError::NoSources { .. }))
        ) || matches!(self, CliError::Report(e) if e.is_usage())
    }
}

/// Why `mc-host run` stopped its guests before they finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Interrupted,
    TimedOut,
    /// Whatever read mc-host's output went away (`mc-host run ... | head`).
    OutputClosed,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopReason::Interrupted => "interrupted",
            StopReason::TimedOut => "timed out",
            StopReason::OutputClosed => "the output was closed",
        })
    }
}

/// A virtual guest that did not exit successfully.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestFailure {
    pub node: u8,
    /// None when it had to be stopped.
    pub status: Option<ExitStatus>,
}

impl fmt::Display for GuestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(s) => write!(f, "node{}: {s}", self.node),
            None => write!(f, "node{}: stopped before it finished", self.node),
        }
    }
}

fn join(failed: &[GuestFailure]) -> String {
    failed
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_and_runtime_errors_1() {
        assert_eq!(CliError::WatchInterval.exit_code(), 2);
        assert_eq!(
            CliError::FaultSyntax(FaultSyntaxError("x".into())).exit_code(),
            2
        );
        let no_sources = QemuError::GuestBuild(GuestBuildError::NoSources {
            tried: Vec::new(),
            image_dir: PathBuf::from("/i"),
        });
        assert_eq!(CliError::Qemu(no_sources).exit_code(), 2);
        assert_eq!(CliError::Qemu(QemuError::NoCacheDir).exit_code(), 1);
        assert_eq!(CliError::GuestCommand(3).exit_code(), 1);
        assert_eq!(
            CliError::Stopped(StopReason::TimedOut).to_string(),
            "timed out; every guest was stopped"
        );
    }

    #[test]
    fn failed_guests_are_listed_by_node() {
        use std::os::unix::process::ExitStatusExt;
        let e = CliError::GuestsFailed {
            failed: vec![
                GuestFailure {
                    node: 1,
                    status: Some(ExitStatus::from_raw(3 << 8)),
                },
                GuestFailure {
                    node: 2,
                    status: None,
                },
            ],
        };
        assert_eq!(
            e.to_string(),
            "guest program failed on node1: exit status: 3, node2: stopped before it finished"
        );
    }

    /// Every error of mc-host that keeps an I/O cause names it once under
    /// ErrorChain (the chain `main` prints), mpirun's included.
    #[test]
    fn each_cause_prints_once() {
        let cause = || io::Error::other("the distinctive cause");
        let program = PathBuf::from("/bin/guest");
        let errors = [
            CliError::SocketDir(cause()),
            CliError::CurrentExe(cause()),
            CliError::StartGuest {
                program: program.clone(),
                source: cause(),
            },
            CliError::Mpirun(MpirunError::ProviderDir(cause())),
            CliError::Mpirun(MpirunError::Start {
                program,
                source: cause(),
            }),
        ];
        for e in &errors {
            assert_eq!(firmware_model::doubled_cause(e), None);
            let line = firmware_model::ErrorChain(e).to_string();
            assert_eq!(line.matches("the distinctive cause").count(), 1, "{line}");
        }
    }
}
