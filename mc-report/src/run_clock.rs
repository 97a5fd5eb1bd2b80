//! Which clock `report run` runs the guests under (issue 29): by default
//! the virtual clock (`mc-host run --clock virtual`), so the records carry
//! predicted times for Memory Channel 2 hardware whatever the host;
//! `--clock wall` keeps the host's wall clock. What measures computing is
//! counted work by default (`--work counted`: the guests are
//! scripts/build-counted.sh's `mc-guest`), or this host's CPU time
//! (`--work cpu-time`). A CPU scale of `paper` charges computing at the
//! paper's 600 MHz Alpha 21164A speed and Cashmere's protocol work at one
//! scale for all applications:
//! - under counted work, from the committed rates of the paper's processor
//!   (`firmware_model::abi::reference::PAPER`: Table III's sequential time
//!   over the sequential program's count, and `PAPER_PROTOCOL_SCALE`),
//!   measured once, so nothing is measured for them on a run;
//! - under CPU time, per application the ratio of seed 000 Table III's
//!   sequential time to the sequential CPU time of the same program
//!   measured here (its baseline run), and for the protocol the paper's
//!   cost of Table II's operations that are one processor's work (a twin, a
//!   small and a large diff) over the same operations' cost here
//!   (docs/virtual-time.md s.1).

use std::str::FromStr;

use clap::ValueEnum;
use firmware_model::abi::reference;

/// A clock option the matrix cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    #[error("{0} only applies with --clock virtual")]
    NeedsVirtual(&'static str),
    #[error(
        "--cpu-scale paper needs --preset paper: it is Table III's sequential time over the \
         same program's here, and only the paper preset has Table III's sizes"
    )]
    PaperScale,
}

/// What measures the guests' computing on the virtual clock (`mc-host run
/// --work`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, ValueEnum)]
pub enum RunWork {
    /// Counted work (the default): the counted `mc-guest`, the same on
    /// every run.
    #[default]
    Counted,
    /// This host's CPU time: any build, moves with the host.
    CpuTime,
}

impl RunWork {
    /// Its name on `mc-host run`'s command line and in run keys.
    pub fn as_str(self) -> &'static str {
        match self {
            RunWork::Counted => "counted",
            RunWork::CpuTime => "cpu-time",
        }
    }
}

/// The clock of every run of a matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, ValueEnum)]
pub enum RunClock {
    /// Predicted time on Memory Channel 2 hardware (the default).
    #[default]
    Virtual,
    /// This host's wall clock: the times describe this host.
    Wall,
}

/// Virtual ns per ns of this host's CPU time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CpuScale {
    /// A fixed factor (1 = this host's processor).
    Fixed(f64),
    /// The paper's processor: under counted work its committed rates,
    /// under CPU time per application Table III's sequential time / its
    /// sequential CPU time here (only at the paper preset, where the sizes
    /// are Table III's).
    Paper,
}

impl Default for CpuScale {
    fn default() -> Self {
        CpuScale::Fixed(1.0)
    }
}

impl FromStr for CpuScale {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "paper" {
            return Ok(CpuScale::Paper);
        }
        match s.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 && x <= 1e6 => Ok(CpuScale::Fixed(x)),
            _ => Err(format!(
                "{s:?} is not a CPU scale: a positive number (virtual ns per ns of this \
                 host's CPU time) or `paper`"
            )),
        }
    }
}

impl std::fmt::Display for CpuScale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuScale::Fixed(x) => write!(f, "{x}"),
            CpuScale::Paper => f.write_str("paper"),
        }
    }
}

/// The clock, work measure, scale and quantum every run of a matrix gets.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct ClockSpec {
    pub clock: RunClock,
    pub work: RunWork,
    pub scale: CpuScale,
    /// `mc-host run --quantum-us` (its default when `None`).
    pub quantum_us: Option<u64>,
}

impl ClockSpec {
    /// Check the combination against the matrix's preset.
    pub fn check(&self, preset: Option<&str>) -> Result<(), ClockError> {
        match (self.clock, self.scale) {
            (RunClock::Wall, CpuScale::Fixed(x)) if x != 1.0 => {
                Err(ClockError::NeedsVirtual("--cpu-scale"))
            }
            (RunClock::Wall, CpuScale::Paper) => Err(ClockError::NeedsVirtual("--cpu-scale")),
            (RunClock::Wall, _) if self.quantum_us.is_some() => {
                Err(ClockError::NeedsVirtual("--quantum-us"))
            }
            (RunClock::Virtual, CpuScale::Paper) if preset != Some("paper") => {
                Err(ClockError::PaperScale)
            }
            _ => Ok(()),
        }
    }

    /// What the run key adds, so that runs on different clocks, work
    /// measures or scales are different runs (a wall-clock key, and a CPU
    /// time one, is as it always was).
    pub fn key_suffix(&self) -> String {
        match self.clock {
            RunClock::Wall => String::new(),
            RunClock::Virtual => {
                let q = self.quantum_us.map_or(String::new(), |q| format!("@q{q}"));
                let w = match self.work {
                    RunWork::Counted => "@counted",
                    RunWork::CpuTime => "",
                };
                format!("|virtual@{}{q}{w}", self.scale)
            }
        }
    }

    /// Whether an application's `paper` scales are the committed table's
    /// ([`committed_paper_scales`]) rather than measured by the matrix.
    pub fn paper_is_committed(&self) -> bool {
        self.scale == CpuScale::Paper && self.work == RunWork::Counted
    }

    /// `mc-host run` arguments; `resolved` is the application's scales when
    /// the scale is `paper` (1 before they are known: the baseline's CPU
    /// time does not depend on them).
    pub fn host_args(&self, resolved: Option<PaperScales>) -> Vec<String> {
        if self.clock == RunClock::Wall {
            return Vec::new();
        }
        let (scale, protocol) = match (self.scale, resolved) {
            (CpuScale::Fixed(x), _) => (x, None),
            (CpuScale::Paper, Some(r)) => (r.cpu, Some(r.protocol)),
            (CpuScale::Paper, None) => (1.0, None),
        };
        let mut a = vec![
            "--clock".to_string(),
            "virtual".into(),
            "--work".into(),
            self.work.as_str().into(),
            "--cpu-scale".into(),
            scale.to_string(),
        ];
        if let Some(p) = protocol {
            a.extend(["--protocol-scale".into(), p.to_string()]);
        }
        if let Some(q) = self.quantum_us {
            a.extend(["--quantum-us".into(), q.to_string()]);
        }
        a
    }
}

/// An application's scales at the `paper` scale: its computing's (Table
/// III) and the protocol's (Table II, the same for every application).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaperScales {
    pub cpu: f64,
    pub protocol: f64,
}

/// An application's `paper` scales under counted work: the committed
/// rates of the paper's processor (`firmware_model::abi::reference::
/// PAPER`, from `scripts/calibrate-work.sh --paper` and `--protocol`).
/// `None` when the table has no rate for `app`.
pub fn committed_paper_scales(app: &str) -> Option<PaperScales> {
    Some(PaperScales {
        cpu: reference::PAPER.cpu_scale(app)?,
        protocol: reference::PAPER.protocol_scale(),
    })
}

/// Table II's operations that are one processor's protocol work on both
/// machines (no network in them), whose costs give the protocol's scale.
pub const PROTOCOL_OPS: [&str; 3] = [
    "twin (8 KiB)",
    "diff, small (16 words)",
    "diff, large (whole page)",
];

/// The `paper` scale of the protocol's work from a Table II record (`mc-guest
/// bench csm` under CSM-DMS on the virtual clock at scale 1): the median,
/// over [`PROTOCOL_OPS`], of the paper's MC Direct cost over the cost
/// predicted here. `None` for another record or one without those rows.
pub fn protocol_scale(table2: &serde_json::Value) -> Option<f64> {
    if table2["variant"] != "dms" || table2["clock"] != "virtual" {
        return None;
    }
    let mut ratios: Vec<f64> = table2["rows"]
        .as_array()?
        .iter()
        .filter(|r| {
            r["operation"]
                .as_str()
                .is_some_and(|op| PROTOCOL_OPS.contains(&op))
        })
        .filter_map(|r| Some(r["mc_direct_us"].as_f64()? / r["predicted_us"].as_f64()?))
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    if ratios.len() != PROTOCOL_OPS.len() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    Some(ratios[ratios.len() / 2])
}

/// The `paper` scale of an application: Table III's sequential seconds over
/// the sequential CPU seconds measured here.
pub fn paper_scale(app: &str, sequential_cpu_s: f64) -> Option<f64> {
    let (_, paper_s) = crate::paper::table3(app)?;
    (sequential_cpu_s > 0.0 && sequential_cpu_s.is_finite()).then(|| paper_s / sequential_cpu_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_parse_and_bad_ones_say_why() {
        assert_eq!("2.5".parse::<CpuScale>(), Ok(CpuScale::Fixed(2.5)));
        assert_eq!("paper".parse::<CpuScale>(), Ok(CpuScale::Paper));
        for bad in ["0", "-1", "nan", "inf", "fast", ""] {
            let e = bad.parse::<CpuScale>().unwrap_err();
            assert!(e.contains("not a CPU scale"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_clock_is_virtual_by_default_and_keys_tell_clocks_apart() {
        let v = ClockSpec::default();
        assert_eq!(v.clock, RunClock::Virtual);
        assert_eq!(v.work, RunWork::Counted, "counted work by default");
        assert_eq!(v.key_suffix(), "|virtual@1@counted");
        assert_eq!(
            v.host_args(None),
            [
                "--clock",
                "virtual",
                "--work",
                "counted",
                "--cpu-scale",
                "1"
            ]
        );
        let cpu = ClockSpec {
            work: RunWork::CpuTime,
            ..v
        };
        assert_eq!(cpu.key_suffix(), "|virtual@1", "CPU-time keys as before");
        assert_eq!(
            cpu.host_args(None),
            [
                "--clock",
                "virtual",
                "--work",
                "cpu-time",
                "--cpu-scale",
                "1"
            ]
        );
        let w = ClockSpec {
            clock: RunClock::Wall,
            ..v
        };
        assert_eq!(w.key_suffix(), "");
        assert!(w.host_args(None).is_empty());
        let p = ClockSpec {
            scale: CpuScale::Paper,
            quantum_us: Some(50),
            ..v
        };
        assert_eq!(p.key_suffix(), "|virtual@paper@q50@counted");
        assert_eq!(
            p.host_args(Some(PaperScales {
                cpu: 12.5,
                protocol: 3.0
            })),
            [
                "--clock",
                "virtual",
                "--work",
                "counted",
                "--cpu-scale",
                "12.5",
                "--protocol-scale",
                "3",
                "--quantum-us",
                "50"
            ]
        );
    }

    #[test]
    fn options_that_need_the_virtual_clock_or_the_paper_preset_are_refused() {
        let wall = ClockSpec {
            clock: RunClock::Wall,
            ..ClockSpec::default()
        };
        assert!(wall.check(None).is_ok());
        let e = ClockSpec {
            scale: CpuScale::Fixed(2.0),
            ..wall
        };
        assert_eq!(e.check(None), Err(ClockError::NeedsVirtual("--cpu-scale")));
        let q = ClockSpec {
            quantum_us: Some(10),
            ..wall
        };
        assert_eq!(q.check(None), Err(ClockError::NeedsVirtual("--quantum-us")));
        let p = ClockSpec {
            scale: CpuScale::Paper,
            ..ClockSpec::default()
        };
        assert_eq!(p.check(Some("small")), Err(ClockError::PaperScale));
        assert!(p.check(Some("paper")).is_ok());
    }

    #[test]
    fn the_protocol_s_paper_scale_is_the_median_of_table_ii_s_processor_work() {
        let row = |op: &str, paper: f64, here: f64| serde_json::json!({"operation": op, "mc_direct_us": paper, "predicted_us": here});
        let rec = |variant: &str, clock: &str, rows: Vec<serde_json::Value>| serde_json::json!({"kind": "table2", "variant": variant, "clock": clock, "rows": rows});
        let rows = vec![
            row("null message round trip", 15.0, 1.0),
            row("twin (8 KiB)", 68.0, 2.0),
            row("diff, small (16 words)", 31.0, 3.1),
            row("diff, large (whole page)", 129.0, 4.3),
        ];
        // 34, 10 and 30: the median, 30 (the round trip is the network's).
        let s = protocol_scale(&rec("dms", "virtual", rows.clone())).unwrap();
        assert!((s - 30.0).abs() < 1e-9, "{s}");
        assert_eq!(protocol_scale(&rec("none", "virtual", rows.clone())), None);
        assert_eq!(protocol_scale(&rec("dms", "wall", rows.clone())), None);
        assert_eq!(
            protocol_scale(&rec("dms", "virtual", rows[..2].to_vec())),
            None
        );
        let zero = vec![
            row("twin (8 KiB)", 68.0, 0.0),
            row("diff, small (16 words)", 31.0, 3.1),
            row("diff, large (whole page)", 129.0, 4.3),
        ];
        assert_eq!(protocol_scale(&rec("dms", "virtual", zero)), None);
    }

    #[test]
    fn under_counted_work_the_paper_scales_are_the_committed_table_s() {
        let p = ClockSpec {
            scale: CpuScale::Paper,
            ..ClockSpec::default()
        };
        assert!(p.paper_is_committed());
        let cpu_time = ClockSpec {
            work: RunWork::CpuTime,
            ..p
        };
        assert!(!cpu_time.paper_is_committed(), "measured under CPU time");
        let table = &reference::PAPER;
        assert!(!table.app_ps_per_edge.is_empty(), "the committed rates");
        for (app, ps) in table.app_ps_per_edge {
            let s = committed_paper_scales(app).unwrap();
            assert!(
                (s.cpu - ps / reference::EDGE_PS as f64).abs() < 1e-12,
                "{app}"
            );
            assert!((s.protocol - reference::PAPER_PROTOCOL_SCALE).abs() < 1e-12);
            // Every committed application is one of Table III's.
            assert!(crate::paper::table3(app).is_some(), "{app}");
        }
        assert_eq!(committed_paper_scales("nonesuch"), None);
    }

    #[test]
    fn the_paper_scale_is_table_iii_over_the_time_here() {
        let s = paper_scale("sor", 3.62).unwrap();
        assert!((s - 10.0).abs() < 1e-9);
        assert_eq!(paper_scale("sor", 0.0), None);
        assert_eq!(paper_scale("nonesuch", 1.0), None);
    }
}
