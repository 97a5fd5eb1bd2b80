//! Running a program on this node: start Cashmere (one protocol node per
//! machine, or per thread at 1L), set the application up, run its threads,
//! verify, finish, and report the node's [`Outcome`].

use cashmere::Csm;
use dsm_core::{Dsm, Stats, TimeBreakdown};
use mc_api::MemoryChannel;

use super::app::App;
use super::error::AppError;
use super::params::{Params, MAX_TSP_CITIES};
use super::problem::Problem;
use super::sor::Grid;
use super::workload::Workload;
use super::{gauss, sor, subword, suite, tsp, verify, wtest};

/// One node's result.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub node: u32,
    /// Seconds of the timed computation (between the app's marks, after
    /// initialisation and before verification).
    pub seconds: f64,
    /// The sequential version's time on this node, when asked for.
    pub sequential_seconds: Option<f64>,
    /// ... and its CPU time (what a predicted speedup divides).
    pub sequential_cpu_seconds: Option<f64>,
    /// Predicted time (virtual time on): the timed part's window on the
    /// virtual clock, (earliest start, latest end) in ns over this node's
    /// processors (docs/virtual-time.md).
    pub virtual_window: Option<(u64, u64)>,
    /// Elements (or values) checked against the expected result.
    pub checked: u64,
    pub stats: Stats,
    /// The node's counters at the end of the computation, before
    /// verification, for the programs that keep them.
    pub compute_stats: Option<Stats>,
    /// Seconds from Cashmere's start to the end of `finish`.
    pub total_seconds: f64,
    pub problem: Problem,
    pub summary: String,
    /// Where each application thread's time went in the timed part, then
    /// the protocol thread's (when asked for: `Params::time_breakdown`).
    pub breakdown: Vec<TimeBreakdown>,
    /// Every page's home as this node knew it after the final barrier
    /// (`--record-homes`; Cashmere's, none under another protocol).
    pub homes: Option<cashmere::HomeAssignment>,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "csm {}: verified {} values; computed in {:.4} s{}{} on node {}\ncsm stats node {}: {}",
            self.summary,
            self.checked,
            self.seconds,
            match self.sequential_seconds {
                Some(s) => format!(" (sequential {s:.4} s, speedup {:.2})", s / self.seconds),
                None => String::new(),
            },
            match (self.predicted_seconds(), self.virtual_window) {
                (Some(p), Some((s, e))) => format!(
                    "; predicted {p:.4} s{}{} (virtual {:.6} s to {:.6} s)",
                    match mc_api::vclock::config().and_then(|c| c.reference) {
                        Some(r) => format!(" on the {} processor", r.name),
                        None => String::new(),
                    },
                    match self.predicted_speedup() {
                        Some(s) => format!(" (predicted speedup {s:.2})"),
                        None => String::new(),
                    },
                    s as f64 / 1e9,
                    e as f64 / 1e9
                ),
                _ => String::new(),
            },
            self.node,
            self.node,
            self.stats
        )?;
        for b in &self.breakdown {
            write!(f, "\ncsm time {b}")?;
        }
        Ok(())
    }
}

impl Outcome {
    /// This node's predicted time of the timed part, in seconds.
    pub fn predicted_seconds(&self) -> Option<f64> {
        self.virtual_window
            .map(|(s, e)| e.saturating_sub(s) as f64 / 1e9)
    }

    /// The sequential program's CPU time at the run's CPU scale over the
    /// predicted time.
    pub fn predicted_speedup(&self) -> Option<f64> {
        let scale = mc_api::vclock::config()?.cpu_scale;
        Some(self.sequential_cpu_seconds? * scale / self.predicted_seconds()?)
    }
}

/// Aborts the run (every node sees it) if the thread holding it unwinds.
struct AbortOnPanic<'a>(&'a Dsm);

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abort();
        }
    }
}

enum AppData {
    W(wtest::WtestData),
    B(subword::SubwordData),
    S(sor::SorData),
    G(gauss::GaussData),
    T(tsp::TspData),
    Suite(Box<dyn Workload>),
}

/// Run `p.app` on this node with `p.threads` threads; every node must call
/// this with the same parameters.
pub fn run(mc: &MemoryChannel, p: &Params) -> Result<Outcome, AppError> {
    let problem = p.problem()?;
    if let Problem::Tsp { cities } = problem {
        if !(3..=MAX_TSP_CITIES).contains(&cities) {
            // Branch and bound is exponential: 14 cities take seconds,
            // each city more several times as long.
            return Err(AppError::TspCities {
                cities,
                max: MAX_TSP_CITIES,
            });
        }
    }
    let procs = mc.nodes() as usize * p.threads as usize;
    if matches!(p.app, App::Wtest | App::Test) && procs > wtest::MAX_PROCESSORS {
        return Err(verify::SuiteError::Shape {
            app: p.app.name(),
            why: format!(
                "{procs} processors ({} nodes x {} threads): it sets one bit per processor \
                 in a 32-bit word, so at most {}",
                mc.nodes(),
                p.threads,
                wtest::MAX_PROCESSORS
            ),
        }
        .into());
    }
    let started = std::time::Instant::now();
    let summary = match problem {
        Problem::Wtest { elements, rounds } => format!(
            "{} ({elements} elements per thread, {rounds} rounds)",
            p.app.name()
        ),
        Problem::Sor { rows, cols, iters } => format!("sor ({rows}x{cols}, {iters} iterations)"),
        Problem::Gauss { n } => format!("gauss ({n}x{n})"),
        Problem::Tsp { cities } => format!("tsp ({cities} cities)"),
        other => format!("{} ({})", p.app.name(), other.describe()),
    };
    let (size, iters) = match problem {
        Problem::Wtest { elements, rounds } => (elements, rounds),
        Problem::Sor { rows, iters, .. } => (rows, iters),
        Problem::Gauss { n } => (n, 0),
        Problem::Tsp { cities } => (cities, 0),
        _ => (0, 0),
    };
    let cfg = p.config();
    let one_level = cfg.levels == cashmere::Levels::One && p.threads > 1;
    if one_level && !p.protocol.has_one_level() {
        return Err(AppError::OneLevel(p.protocol));
    }
    let mut o = if one_level {
        // 1L: each thread is a protocol node of its own, on this machine's
        // adapter; together they make this machine's outcome.
        let csms = Csm::start_one_level(mc, &cfg)?;
        let csms = csms.into_iter().map(|c| Dsm::new(std::sync::Arc::new(c)));
        let outcomes: Vec<Result<Outcome, AppError>> = std::thread::scope(|s| {
            let hs: Vec<_> = csms
                .map(|csm| {
                    let summary = &summary;
                    s.spawn(move || run_node(csm, p, problem, 1, (size, iters), summary, started))
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or(Err(AppError::Panicked)))
                .collect()
        });
        merge_processors(
            u32::try_from(mc.node_id().index()).expect("a node index fits u32"),
            outcomes,
        )?
    } else {
        let csm = p.protocol.start(mc, &cfg)?;
        run_node(csm, p, problem, p.threads, (size, iters), &summary, started)?
    };
    let procs = (mc.nodes() * p.threads) as usize;
    if let Some((wall, cpu)) = p
        .time_sequential
        .then(|| suite::time_sequential_cpu(p.app, problem, procs))
        .flatten()
    {
        o.sequential_seconds = Some(wall);
        o.sequential_cpu_seconds = Some(cpu);
    }
    Ok(o)
}

/// A machine's outcome from its processors' (1L): counts summed, the
/// longest times, every thread's breakdown, the homes as the first knew
/// them (every protocol node knows every home after the final barrier).
fn merge_processors(
    node: u32,
    outcomes: Vec<Result<Outcome, AppError>>,
) -> Result<Outcome, AppError> {
    let mut merged: Option<Outcome> = None;
    let mut first_err = None;
    for o in outcomes {
        match (o, &mut merged) {
            (Err(e), _) => {
                first_err.get_or_insert(e);
            }
            (Ok(o), None) => merged = Some(o),
            (Ok(o), Some(m)) => {
                m.seconds = m.seconds.max(o.seconds);
                m.total_seconds = m.total_seconds.max(o.total_seconds);
                m.checked += o.checked;
                m.stats += o.stats;
                m.compute_stats = match (m.compute_stats, o.compute_stats) {
                    (Some(mut a), Some(b)) => {
                        a += b;
                        Some(a)
                    }
                    _ => None,
                };
                m.breakdown.extend(o.breakdown);
                m.virtual_window = match (m.virtual_window, o.virtual_window) {
                    (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
                    (a, b) => a.or(b),
                };
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let mut m = merged.ok_or(AppError::Panicked)?;
    m.node = node;
    Ok(m)
}

/// Run the app on one protocol node with `threads` threads (its machine's
/// in 2L; one in 1L), then finish.
fn run_node(
    csm: Dsm,
    p: &Params,
    problem: Problem,
    threads: u32,
    (size, iters): (usize, u32),
    summary: &str,
    started: std::time::Instant,
) -> Result<Outcome, AppError> {
    let data = match (p.app, problem) {
        (App::Wtest | App::Test, _) => AppData::W(wtest::setup(&csm, size)?),
        (App::Subword, _) => AppData::B(subword::setup(&csm, size)?),
        (App::Sor, Problem::Sor { rows, cols, iters }) => {
            AppData::S(sor::setup(&csm, Grid { rows, cols }, iters)?)
        }
        (App::Gauss, _) => AppData::G(gauss::setup(&csm, size)?),
        (App::Tsp, _) => AppData::T(tsp::setup(&csm, size)?),
        (app, problem) => AppData::Suite(suite::setup(app, problem, &csm)?),
    };
    let data = std::sync::Arc::new(data);
    let app = p.app;
    let breakdown = p.time_breakdown;
    // A spawned thread starts at its spawner's virtual time.
    let spawned_at = mc_api::vclock::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let csm = csm.clone();
            let data = data.clone();
            let tid = (csm.node_id() * csm.threads() + t) as usize;
            std::thread::Builder::new()
                .name(format!("csm-app{tid}"))
                .spawn(move || {
                    // On the virtual clock (a predicted-time run) until
                    // the thread ends.
                    let _clock = match csm.join_clock(t, spawned_at) {
                        Ok(c) => c,
                        Err(e) => {
                            csm.abort();
                            return Err(AppError::from(e));
                        }
                    };
                    // A panic (a bug) must not leave the other threads,
                    // here and on other nodes, waiting for this one.
                    let _guard = AbortOnPanic(&csm);
                    let r = match (&*data, app) {
                        (AppData::W(d), App::Wtest) => wtest::wtest(&csm, d, tid, iters),
                        (AppData::W(d), _) => wtest::test(&csm, d, tid, iters),
                        (AppData::B(d), _) => subword::run(&csm, d, tid, iters),
                        (AppData::S(d), _) => sor::run(&csm, d, tid),
                        (AppData::G(d), _) => gauss::run(&csm, d, tid),
                        (AppData::T(d), _) => tsp::run(&csm, d, tid),
                        (AppData::Suite(w), _) => w.run(&csm, tid),
                    };
                    if r.is_err() {
                        // Nobody, here or elsewhere, waits for this thread.
                        csm.abort();
                    }
                    // The window ended at the app's mark_end; read what it
                    // holds now (verification comes after the mark).
                    let times = breakdown.then(|| csm.thread_breakdown(&format!("app{tid}")));
                    r.map(|c| (c, times))
                })
        })
        .collect::<Result<_, _>>()
        .map_err(AppError::Spawn)?;
    let mut checked = 0;
    let mut first_err = None;
    let mut times = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Ok((c, t))) => {
                checked += c;
                times.extend(t);
            }
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(AppError::Panicked);
            }
        }
    }
    if let Some(e) = first_err {
        csm.abort();
        return Err(e);
    }
    let stats = csm.finish()?;
    let seconds = csm.timed().unwrap_or(f64::NAN);
    let total_seconds = started.elapsed().as_secs_f64();
    let compute_stats = match &*data {
        AppData::G(d) => d.window.stats(),
        AppData::T(d) => d.window.stats(),
        AppData::S(d) => d.window.stats(),
        AppData::Suite(w) => w.window().stats(),
        AppData::W(_) | AppData::B(_) => None,
    };
    if p.time_breakdown {
        times.extend(csm.protocol_breakdown());
    }
    Ok(Outcome {
        node: csm.node_id(),
        seconds,
        sequential_seconds: None,
        sequential_cpu_seconds: None,
        virtual_window: csm.virtual_window(),
        checked,
        stats,
        compute_stats,
        total_seconds,
        problem,
        summary: summary.to_string(),
        breakdown: times,
        homes: csm.protocol::<Csm>().map(Csm::homes),
    })
}
