//! How `mc-host pvm` fails before its program runs (its own module, as
//! `mpirun_error`, so that `cli_error` can name it without importing the
//! command).

use std::path::PathBuf;

/// Why `mc-host pvm` could not run the program.
#[derive(Debug, thiserror::Error)]
pub enum PvmError {
    #[error("cannot listen for the tasks at {}", path.display())]
    RelaySocket {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the task shell of host 0 did not come up (its adapter's or UMP's set-up failed, above){}",
        SetUpLosses(*lost)
    )]
    FirstShell { lost: u64 },
}

/// The packets the network lost while the task shells set up, said after
/// a set-up failure (nothing when none were lost). A shell names a loss
/// its own adapter counted; one counted elsewhere (a store of another
/// node's lost on its way to that node) shows here only: the set-up's
/// tables are replicated, so a loss anywhere can fail a shell anywhere.
pub struct SetUpLosses(pub u64);

impl std::fmt::Display for SetUpLosses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 > 0 {
            write!(
                f,
                "; {} packets were lost on the network meanwhile (Memory Channel does not retransmit), and a store of the set-up lost on its way (the region table, a lock, UMP's directory) fails it",
                self.0
            )?;
        }
        Ok(())
    }
}
