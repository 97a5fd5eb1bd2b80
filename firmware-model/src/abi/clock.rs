//! The virtual clock's configuration as `mc-host` hands it to its guests
//! (issue 38; docs/virtual-time.md): one typed value and the environment
//! variables that carry it, spelled here and nowhere else. The host turns a
//! [`ClockConfig`] into variables ([`ClockConfig::to_env`]); a guest parses
//! them once ([`ClockConfig::from_lookup`]) and keeps the value. Pure: the
//! caller passes the environment's lookup, so this module does no I/O.

use std::path::PathBuf;

use super::reference::ReferenceProcessor;

/// The default quantum: how far a running thread may get ahead of the
/// slowest, in virtual time.
pub const DEFAULT_QUANTUM_NS: u64 = 100_000;

/// The largest CPU or protocol scale (virtual ns per ns of CPU time).
const MAX_SCALE: f64 = 1e6;

/// The variables, private to this module: use [`ClockConfig`].
mod env {
    /// `virtual` for predicted time; `wall` (or unset) for the wall clock.
    pub const CLOCK: &str = "MC_CLOCK";
    /// CPU scale: virtual ns per ns of this host's CPU time (default 1,
    /// or the rates of the reference processor the guest's problem names).
    pub const CPU_SCALE: &str = "MC_CPU_SCALE";
    /// The scale of protocol work (default: the CPU scale).
    pub const PROTOCOL_SCALE: &str = "MC_PROTOCOL_SCALE";
    /// The clock board file every guest of the run shares.
    pub const BOARD: &str = "MC_CLOCK_BOARD";
    /// The quantum in ns, for the board a guest creates.
    pub const QUANTUM: &str = "MC_QUANTUM_NS";
    /// What measures computing: `cpu-time` (or unset) or `counted`.
    pub const WORK: &str = "MC_WORK";
}

/// What measures a thread's computing (issue 39; docs/virtual-time.md
/// s.10): the guest's `WorkMeter`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WorkMeasure {
    /// The thread's CPU time on this host (`CLOCK_THREAD_CPUTIME_ID`): needs
    /// no special build, but moves with the host's load and caches.
    #[default]
    CpuTime,
    /// Counted work: the edges and blocks the thread's instrumented code
    /// passed (compiler-inserted counters), at a committed rate, plus a
    /// stated model for the work the counters cannot see. The same on every
    /// run; needs an instrumented build (`scripts/build-counted.sh`).
    Counted,
}

impl WorkMeasure {
    /// Its name on command lines, in the variable and in records.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkMeasure::CpuTime => "cpu-time",
            WorkMeasure::Counted => "counted",
        }
    }

    /// The measure named `s` ([`WorkMeasure::as_str`]).
    pub fn from_name(s: &str) -> Option<WorkMeasure> {
        [WorkMeasure::CpuTime, WorkMeasure::Counted]
            .into_iter()
            .find(|w| w.as_str() == s)
    }
}

/// A virtual-time configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct ClockConfig {
    /// Virtual ns per ns of this host's thread CPU time (or of counted
    /// work at `reference::EDGE_PS`).
    pub cpu_scale: f64,
    /// Whether the run named the CPU scale (`--cpu-scale`, the variable
    /// set): a reference processor's rates then do not apply
    /// ([`ClockConfig::on_reference`]).
    pub cpu_scale_given: bool,
    /// The same for protocol work; `None`: the CPU scale. Computing and
    /// protocol code ran on the same processor, but this host is not faster
    /// than the paper's Alpha by the same factor at both
    /// (docs/virtual-time.md s.1).
    pub protocol_scale: Option<f64>,
    /// The board to join; `None`: one of the process's own.
    pub board: Option<PathBuf>,
    /// The quantum of a board the process makes.
    pub quantum_ns: u64,
    /// What measures computing: the scales above multiply its reading.
    pub work: WorkMeasure,
    /// The reference processor whose committed rates set the scales, when
    /// the guest chose one ([`ClockConfig::on_reference`]); never in the
    /// environment: the guest knows its problem, the host does not.
    pub reference: Option<&'static ReferenceProcessor>,
}

/// A clock variable that does not say what it must.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{var}={value:?}: {why}")]
pub struct ClockEnvError {
    pub var: &'static str,
    pub value: String,
    pub why: &'static str,
}

/// Whether `s` is a usable scale.
pub fn valid_scale(s: f64) -> bool {
    s.is_finite() && s > 0.0 && s <= MAX_SCALE
}

impl ClockConfig {
    /// Predicted time at `cpu_scale` with the defaults for the rest.
    pub fn new(cpu_scale: f64) -> ClockConfig {
        ClockConfig {
            cpu_scale,
            cpu_scale_given: true,
            protocol_scale: None,
            board: None,
            quantum_ns: DEFAULT_QUANTUM_NS,
            work: WorkMeasure::CpuTime,
            reference: None,
        }
    }

    /// This configuration on `reference`'s processor for application
    /// `app`: under counted work, and unless the run named the CPU scale,
    /// `app`'s committed rate as the CPU scale and the processor's protocol
    /// rate as the protocol scale (unless the run named that). Unchanged
    /// under CPU time (the rates are per counted edge), with a named CPU
    /// scale, or when `reference` has no rate for `app`.
    pub fn on_reference(mut self, reference: &'static ReferenceProcessor, app: &str) -> Self {
        if self.work != WorkMeasure::Counted || self.cpu_scale_given {
            return self;
        }
        let Some(cpu) = reference.cpu_scale(app) else {
            return self;
        };
        self.cpu_scale = cpu;
        self.protocol_scale = Some(
            self.protocol_scale
                .unwrap_or_else(|| reference.protocol_scale()),
        );
        self.reference = Some(reference);
        self
    }

    /// The variables that give a guest this configuration.
    pub fn to_env(&self) -> Vec<(&'static str, String)> {
        let mut vars = vec![
            (env::CLOCK, "virtual".to_string()),
            (env::QUANTUM, self.quantum_ns.to_string()),
            (env::WORK, self.work.as_str().to_string()),
        ];
        if self.cpu_scale_given {
            vars.push((env::CPU_SCALE, self.cpu_scale.to_string()));
        }
        if let Some(b) = &self.board {
            vars.push((env::BOARD, b.display().to_string()));
        }
        if let Some(p) = self.protocol_scale {
            vars.push((env::PROTOCOL_SCALE, p.to_string()));
        }
        vars
    }

    /// The variables that give a guest the wall clock.
    pub fn wall_env() -> Vec<(&'static str, String)> {
        vec![(env::CLOCK, "wall".to_string())]
    }

    /// What [`ClockConfig::to_env`] or [`ClockConfig::wall_env`] set, read
    /// back through `var`: `None` for the wall clock (the variable unset,
    /// empty or `wall`).
    pub fn from_lookup(
        var: impl Fn(&'static str) -> Option<String>,
    ) -> Result<Option<ClockConfig>, ClockEnvError> {
        let bad = |var: &'static str, value: String, why| ClockEnvError { var, value, why };
        match var(env::CLOCK) {
            Some(v) if v == "virtual" => {}
            None => return Ok(None),
            Some(v) if v.is_empty() || v == "wall" => return Ok(None),
            Some(v) => return Err(bad(env::CLOCK, v, "expected `virtual` or `wall`")),
        }
        let scale = |name: &'static str| match var(name) {
            Some(v) => match v.parse::<f64>() {
                Ok(s) if valid_scale(s) => Ok(Some(s)),
                _ => Err(bad(
                    name,
                    v,
                    "expected a positive number (virtual ns per ns of CPU time)",
                )),
            },
            None => Ok(None),
        };
        let given_scale = scale(env::CPU_SCALE)?;
        let protocol_scale = scale(env::PROTOCOL_SCALE)?;
        let quantum_ns = match var(env::QUANTUM) {
            Some(v) => match v.parse::<u64>() {
                Ok(q) if (1..=1_000_000_000_000).contains(&q) => q,
                _ => return Err(bad(env::QUANTUM, v, "expected nanoseconds, 1 to 10^12")),
            },
            None => DEFAULT_QUANTUM_NS,
        };
        let board = var(env::BOARD).filter(|b| !b.is_empty()).map(PathBuf::from);
        let work = match var(env::WORK) {
            None => WorkMeasure::CpuTime,
            Some(v) if v.is_empty() => WorkMeasure::CpuTime,
            Some(v) => match WorkMeasure::from_name(&v) {
                Some(w) => w,
                None => return Err(bad(env::WORK, v, "expected `cpu-time` or `counted`")),
            },
        };
        Ok(Some(ClockConfig {
            cpu_scale: given_scale.unwrap_or(1.0),
            cpu_scale_given: given_scale.is_some(),
            protocol_scale,
            board,
            quantum_ns,
            work,
            reference: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(
        vars: &'a [(&'static str, String)],
    ) -> impl Fn(&'static str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
    }

    fn raw(vars: &[(&'static str, &'static str)]) -> Vec<(&'static str, String)> {
        vars.iter().map(|(k, v)| (*k, v.to_string())).collect()
    }

    #[test]
    fn what_the_host_sets_the_guest_reads_back() {
        let mut c = ClockConfig::new(2.5);
        c.protocol_scale = Some(27.5);
        c.board = Some(PathBuf::from("/tmp/b"));
        c.quantum_ns = 50_000;
        assert_eq!(
            ClockConfig::from_lookup(lookup(&c.to_env())),
            Ok(Some(c.clone()))
        );
        c.work = WorkMeasure::Counted;
        assert_eq!(ClockConfig::from_lookup(lookup(&c.to_env())), Ok(Some(c)));
        let plain = ClockConfig::new(1.0);
        assert_eq!(
            ClockConfig::from_lookup(lookup(&plain.to_env())),
            Ok(Some(plain))
        );
        assert_eq!(
            ClockConfig::from_lookup(lookup(&ClockConfig::wall_env())),
            Ok(None)
        );
        assert_eq!(ClockConfig::from_lookup(lookup(&[])), Ok(None));
    }

    static TEST_PROCESSOR: ReferenceProcessor = ReferenceProcessor {
        name: "test",
        description: "a processor for this test",
        app_ps_per_edge: &[("sor", 3616.0)],
        protocol_ps_per_edge: 904.0,
    };

    #[test]
    fn a_reference_processor_applies_to_counted_work_without_a_named_scale() {
        let env = [
            (env::CLOCK, "virtual".to_string()),
            (env::WORK, "counted".to_string()),
        ];
        let unnamed = ClockConfig::from_lookup(lookup(&env)).unwrap().unwrap();
        assert!(!unnamed.cpu_scale_given);
        assert_eq!(unnamed.cpu_scale, 1.0, "this host's processor by default");
        let on = unnamed.clone().on_reference(&TEST_PROCESSOR, "sor");
        assert_eq!(on.cpu_scale, 2.0, "3616 ps an edge over EDGE_PS");
        assert_eq!(on.protocol_scale, Some(0.5));
        assert_eq!(on.reference.map(|r| r.name), Some("test"));
        // No rate for the application: this host's, and no reference named.
        assert_eq!(
            unnamed.clone().on_reference(&TEST_PROCESSOR, "tsp"),
            unnamed
        );
        // A named protocol scale wins over the processor's.
        let mut p = unnamed.clone();
        p.protocol_scale = Some(3.0);
        let on = p.on_reference(&TEST_PROCESSOR, "sor");
        assert_eq!((on.cpu_scale, on.protocol_scale), (2.0, Some(3.0)));
        // A named CPU scale wins, and CPU time has no per-edge rate.
        let mut named = ClockConfig::new(4.0);
        named.work = WorkMeasure::Counted;
        assert_eq!(named.clone().on_reference(&TEST_PROCESSOR, "sor"), named);
        let cpu = ClockConfig {
            cpu_scale_given: false,
            ..ClockConfig::new(1.0)
        };
        assert_eq!(cpu.clone().on_reference(&TEST_PROCESSOR, "sor"), cpu);
        // An unnamed scale goes through the environment unnamed.
        let back = ClockConfig::from_lookup(lookup(&unnamed.to_env())).unwrap();
        assert_eq!(back, Some(unnamed));
    }

    #[test]
    fn a_bad_variable_is_refused_naming_it() {
        for (bad, name) in [
            (vec![(env::CLOCK, "virtaul")], env::CLOCK),
            (
                vec![(env::CLOCK, "virtual"), (env::CPU_SCALE, "0")],
                env::CPU_SCALE,
            ),
            (
                vec![(env::CLOCK, "virtual"), (env::CPU_SCALE, "-1")],
                env::CPU_SCALE,
            ),
            (
                vec![(env::CLOCK, "virtual"), (env::CPU_SCALE, "NaN")],
                env::CPU_SCALE,
            ),
            (
                vec![(env::CLOCK, "virtual"), (env::PROTOCOL_SCALE, "0")],
                env::PROTOCOL_SCALE,
            ),
            (
                vec![(env::CLOCK, "virtual"), (env::PROTOCOL_SCALE, "fast")],
                env::PROTOCOL_SCALE,
            ),
            (
                vec![(env::CLOCK, "virtual"), (env::QUANTUM, "0")],
                env::QUANTUM,
            ),
            (
                vec![(env::CLOCK, "virtual"), (env::QUANTUM, "ten")],
                env::QUANTUM,
            ),
            (
                vec![(env::CLOCK, "virtual"), (env::WORK, "cycles")],
                env::WORK,
            ),
        ] {
            let e = ClockConfig::from_lookup(lookup(&raw(&bad))).unwrap_err();
            assert_eq!(e.var, name);
            assert!(e.to_string().starts_with(name), "{e}");
        }
    }
}
