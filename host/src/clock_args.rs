//! `mc-host run --clock wall|virtual [--cpu-scale X] [--quantum-us N]`: which
//! clock the guests' times come from (issue 29; docs/virtual-time.md).
//!
//! With `--clock virtual` every guest thread keeps a virtual time (its own
//! CPU time times the CPU scale, plus the network's modelled time when it
//! waits) and the guests predict how long the run would take on Memory
//! Channel 2 hardware. The guests of one run share a clock board, a small
//! file in the socket directory (`clock-board`), through which no running
//! thread gets more than a quantum ahead of the slowest.
//!
//! `--work counted|cpu-time` says what measures a thread's computing
//! (issue 39; docs/virtual-time.md s.9): the work its instrumented code
//! counted (`counted`, the default: deterministic, needs the guest program
//! built with counters, `scripts/build-counted.sh`; a plain build is
//! refused by the guest, and a bare `mc-guest` is that build's,
//! [`counted_guest`]), or its CPU time on this host (`cpu-time`, any
//! build).

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Args, ValueEnum};
use firmware_model::abi::clock::{valid_scale, ClockConfig, WorkMeasure, DEFAULT_QUANTUM_NS};

/// The clock board's file name in the socket directory.
pub const BOARD_FILE: &str = "clock-board";

/// Which clock the guests' times come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ClockChoice {
    /// The host's wall clock: the times describe this host.
    Wall,
    /// Predicted time on Memory Channel 2 hardware, whatever the host.
    Virtual,
}

/// What measures a thread's computing in virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WorkChoice {
    /// The thread's CPU time on this host.
    CpuTime,
    /// Counted work (an instrumented build: scripts/build-counted.sh,
    /// scripts/mc-cc --counted); the default.
    Counted,
}

/// The work measure of `--clock virtual` when `--work` is not given.
pub const DEFAULT_WORK: WorkChoice = WorkChoice::Counted;

/// Where `scripts/build-counted.sh` puts the counted `mc-guest`, from the
/// directory of a cargo-built `mc-host` (`TARGET/release` or
/// `TARGET/debug`): `TARGET/counted/x86_64-unknown-linux-gnu/release`.
pub const COUNTED_GUEST: &str = "counted/x86_64-unknown-linux-gnu/release/mc-guest";

impl From<WorkChoice> for WorkMeasure {
    fn from(w: WorkChoice) -> WorkMeasure {
        match w {
            WorkChoice::CpuTime => WorkMeasure::CpuTime,
            WorkChoice::Counted => WorkMeasure::Counted,
        }
    }
}

/// Why the clock options cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClockArgsError {
    #[error("{0} only applies with --clock virtual")]
    NeedsVirtual(&'static str),
    #[error(
        "counted work (the default of --clock virtual) needs mc-guest built with work \
         counters, and there is none at {}: build it with scripts/build-counted.sh, or run \
         with --work cpu-time (this host's CPU time, any build)",
        looked.display()
    )]
    NoCountedGuest { looked: PathBuf },
    #[error("cannot remove the stale clock board {}", path.display())]
    StaleBoard {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn parse_scale(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if valid_scale(x) => Ok(x),
        _ => Err(format!(
            "{s:?} is not a CPU scale (a positive number: virtual ns per ns of this host's CPU time)"
        )),
    }
}

#[derive(Args, Debug, Clone)]
pub struct ClockArgs {
    /// Where the guests' times come from: `wall` (this host's clock) or
    /// `virtual` (predicted time on Memory Channel 2 hardware,
    /// docs/virtual-time.md).
    #[arg(long, value_enum, default_value_t = ClockChoice::Wall)]
    pub clock: ClockChoice,
    /// With --clock virtual: virtual ns per ns of this host's CPU time
    /// (1 = this host's processor). Default: 1, except that under counted
    /// work a guest problem whose preset names a reference processor
    /// (`mc-guest csm --preset paper`: the paper's) runs at its committed
    /// rates.
    #[arg(long, value_name = "X", value_parser = parse_scale)]
    pub cpu_scale: Option<f64>,
    /// With --clock virtual: the same for Cashmere's protocol work (page
    /// faults, twins, diffs, serving requests); default: --cpu-scale.
    /// `mc-host report run --cpu-scale paper` sets it (the paper's).
    #[arg(long, value_name = "X", value_parser = parse_scale)]
    pub protocol_scale: Option<f64>,
    /// With --clock virtual: how far (us of virtual time) a running thread
    /// may get ahead of the slowest (default 100).
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub quantum_us: Option<u64>,
    /// With --clock virtual: what measures computing, `counted` (the
    /// default: the work an instrumented guest counts, the same on every
    /// run; the guest program must be built by scripts/build-counted.sh or
    /// scripts/mc-cc --counted, and a bare `mc-guest` is
    /// scripts/build-counted.sh's) or `cpu-time` (this host's CPU time,
    /// any build).
    #[arg(long, value_enum)]
    pub work: Option<WorkChoice>,
}

impl ClockArgs {
    /// The work measure of a virtual-time run (`None` on the wall clock).
    pub fn work(&self) -> Option<WorkChoice> {
        (self.clock == ClockChoice::Virtual).then(|| self.work.unwrap_or(DEFAULT_WORK))
    }

    /// Check the options and, in virtual time, make room for a fresh clock
    /// board in `dir`. Returns the clock every guest keeps: `None` for the
    /// wall clock.
    pub fn config(&self, dir: &Path) -> Result<Option<ClockConfig>, ClockArgsError> {
        if self.clock == ClockChoice::Wall {
            if self.cpu_scale.is_some() {
                return Err(ClockArgsError::NeedsVirtual("--cpu-scale"));
            }
            if self.protocol_scale.is_some() {
                return Err(ClockArgsError::NeedsVirtual("--protocol-scale"));
            }
            if self.quantum_us.is_some() {
                return Err(ClockArgsError::NeedsVirtual("--quantum-us"));
            }
            if self.work.is_some() {
                return Err(ClockArgsError::NeedsVirtual("--work"));
            }
            return Ok(None);
        }
        let board = dir.join(BOARD_FILE);
        match std::fs::remove_file(&board) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(ClockArgsError::StaleBoard {
                    path: board,
                    source,
                })
            }
        }
        Ok(Some(ClockConfig {
            cpu_scale: self.cpu_scale.unwrap_or(1.0),
            cpu_scale_given: self.cpu_scale.is_some(),
            protocol_scale: self.protocol_scale,
            board: Some(board),
            quantum_ns: self.quantum_us.map_or(DEFAULT_QUANTUM_NS, |q| q * 1000),
            work: WorkMeasure::from(self.work.unwrap_or(DEFAULT_WORK)),
            reference: None,
        }))
    }

    /// [`ClockArgs::config`] as the environment every guest gets.
    pub fn guest_env(&self, dir: &Path) -> Result<Vec<(&'static str, String)>, ClockArgsError> {
        Ok(match self.config(dir)? {
            Some(c) => c.to_env(),
            None => ClockConfig::wall_env(),
        })
    }
}

/// The program a guest runs when its command names `name`: under counted
/// work a bare `mc-guest` is the counted build of this `mc-host`'s
/// workspace ([`COUNTED_GUEST`] from `exe_dir`, the directory `mc-host`
/// runs from), and an error naming the script and `--work cpu-time` when
/// there is none; `None`: resolve `name` as any other program.
pub fn counted_guest(
    name: &str,
    work: Option<WorkChoice>,
    exe_dir: &Path,
) -> Option<Result<PathBuf, ClockArgsError>> {
    if name != "mc-guest" || work != Some(WorkChoice::Counted) {
        return None;
    }
    let target = exe_dir.parent().unwrap_or(exe_dir);
    let path = target.join(COUNTED_GUEST);
    Some(if path.is_file() {
        Ok(path)
    } else {
        Err(ClockArgsError::NoCountedGuest { looked: path })
    })
}

/// Set `vars` on a guest's command.
pub fn apply(cmd: &mut Command, vars: &[(&'static str, String)]) {
    for (k, v) in vars {
        cmd.env(k, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(clock: ClockChoice, scale: Option<f64>, q: Option<u64>) -> ClockArgs {
        ClockArgs {
            clock,
            cpu_scale: scale,
            protocol_scale: None,
            quantum_us: q,
            work: None,
        }
    }

    /// What a guest reads back from the variables.
    fn guest_reads(vars: &[(&'static str, String)]) -> Option<ClockConfig> {
        let get = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        ClockConfig::from_lookup(get).expect("the guest accepts what the host sets")
    }

    #[test]
    fn virtual_time_sets_every_variable_and_removes_a_stale_board() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(BOARD_FILE), b"old").unwrap();
        let vars = args(ClockChoice::Virtual, Some(2.5), Some(50))
            .guest_env(dir.path())
            .unwrap();
        let c = guest_reads(&vars).expect("virtual time");
        assert_eq!(c.cpu_scale, 2.5);
        assert_eq!(c.quantum_ns, 50_000);
        assert!(c.board.unwrap().ends_with(BOARD_FILE));
        assert!(!dir.path().join(BOARD_FILE).exists());
        assert_eq!(c.protocol_scale, None, "protocol work at --cpu-scale");
        assert!(c.cpu_scale_given);
        assert_eq!(c.work, WorkMeasure::Counted, "counted work unless asked");
        let split = ClockArgs {
            protocol_scale: Some(27.0),
            ..args(ClockChoice::Virtual, Some(100.0), None)
        }
        .guest_env(dir.path())
        .unwrap();
        let c = guest_reads(&split).expect("virtual time");
        assert_eq!(c.protocol_scale, Some(27.0));
        assert_eq!(c.quantum_ns, DEFAULT_QUANTUM_NS);
        let cpu = ClockArgs {
            work: Some(WorkChoice::CpuTime),
            ..args(ClockChoice::Virtual, None, None)
        }
        .guest_env(dir.path())
        .unwrap();
        assert_eq!(guest_reads(&cpu).unwrap().work, WorkMeasure::CpuTime);
    }

    #[test]
    fn counted_work_is_the_default_and_leaves_the_scale_to_the_guest() {
        let dir = tempfile::tempdir().unwrap();
        let plain = args(ClockChoice::Virtual, None, None);
        assert_eq!(plain.work(), Some(WorkChoice::Counted));
        let c = guest_reads(&plain.guest_env(dir.path()).unwrap()).unwrap();
        assert_eq!(c.work, WorkMeasure::Counted);
        assert_eq!(c.cpu_scale, 1.0);
        assert!(
            !c.cpu_scale_given,
            "no --cpu-scale: a reference processor the guest's preset names may apply"
        );
        assert_eq!(args(ClockChoice::Wall, None, None).work(), None);
    }

    #[test]
    fn a_bare_mc_guest_under_counted_work_is_the_counted_build_or_a_clear_error() {
        let target = tempfile::tempdir().unwrap();
        let release = target.path().join("release");
        std::fs::create_dir(&release).unwrap();
        let counted = Some(WorkChoice::Counted);
        let e = counted_guest("mc-guest", counted, &release)
            .expect("a bare mc-guest under counted work")
            .unwrap_err();
        let msg = e.to_string();
        for what in ["scripts/build-counted.sh", "--work cpu-time", COUNTED_GUEST] {
            assert!(msg.contains(what), "{what}: {msg}");
        }
        let built = target.path().join(COUNTED_GUEST);
        std::fs::create_dir_all(built.parent().unwrap()).unwrap();
        std::fs::write(&built, b"").unwrap();
        assert_eq!(
            counted_guest("mc-guest", counted, &release)
                .unwrap()
                .unwrap(),
            built
        );
        // Anything else resolves as before.
        assert!(counted_guest("./mc-guest", counted, &release).is_none());
        assert!(counted_guest("sor", counted, &release).is_none());
        assert!(counted_guest("mc-guest", Some(WorkChoice::CpuTime), &release).is_none());
        assert!(counted_guest("mc-guest", None, &release).is_none());
    }

    #[test]
    fn virtual_options_need_the_virtual_clock() {
        let dir = tempfile::tempdir().unwrap();
        assert!(args(ClockChoice::Wall, Some(2.0), None)
            .guest_env(dir.path())
            .is_err());
        assert!(args(ClockChoice::Wall, None, Some(10))
            .guest_env(dir.path())
            .is_err());
        let e = ClockArgs {
            protocol_scale: Some(2.0),
            ..args(ClockChoice::Wall, None, None)
        }
        .guest_env(dir.path())
        .unwrap_err();
        assert!(e.to_string().contains("--protocol-scale"), "{e}");
        let e = ClockArgs {
            work: Some(WorkChoice::Counted),
            ..args(ClockChoice::Wall, None, None)
        }
        .guest_env(dir.path())
        .unwrap_err();
        assert!(e.to_string().contains("--work"), "{e}");
        let wall = args(ClockChoice::Wall, None, None)
            .guest_env(dir.path())
            .unwrap();
        assert_eq!(guest_reads(&wall), None);
        assert!(parse_scale("0").is_err() && parse_scale("nan").is_err());
        assert_eq!(parse_scale("0.5"), Ok(0.5));
    }
}
