//! Programs on Cashmere (`mc-guest csm APP`): the seed's debugging programs
//! `wtest` and `test`, and the applications of seed 000 Table III (SOR,
//! Gauss, TSP here; Barnes, CLU, LU, EM3D, Ilink, Water-Nsquared and
//! Water-Spatial through `suite`), each verified; their presets (`problem`);
//! the JSON record of a run (`record`, `gather`); plus the Table II
//! benchmark (`mc-guest bench csm`).

pub mod barnes;
pub mod bench;
pub mod blocked_lu;
pub mod clu;
pub mod em3d;
pub mod gather;
pub mod gauss;
pub mod ilink;
pub mod lu;
pub mod problem;
pub mod record;
pub mod sor;
pub mod suite;
pub mod tsp;
pub mod variant;
pub mod verify;
pub mod water;
pub mod water_nsquared;
pub mod water_spatial;
pub mod wtest;

use cashmere::{Config, Csm, CsmError, Stats, TimeBreakdown};
use mc_api::MemoryChannel;

pub use problem::{Preset, Problem};
pub use sor::Grid;
pub use variant::{Detection, ProtocolVariant};

/// Why a Cashmere program failed: Cashmere did, or the result is wrong (each
/// check names where and what it expected), or it was asked for too much.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Csm(#[from] CsmError),
    #[error("cannot start an application thread: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("an application thread panicked")]
    Panicked,
    #[error(
        "tsp of {0} cities: 3 to {MAX_TSP_CITIES} (each city more multiplies the time by 4-7)"
    )]
    TspCities(usize),
    /// wtest or test read a wrong value.
    #[error("{check}: element {element} is {got:#x}, expected {want:#x}")]
    Wtest {
        check: &'static str,
        element: usize,
        got: u64,
        want: u64,
    },
    #[error("sor: element ({row}, {col}) is {got}, sequential run has {want}")]
    Sor {
        row: usize,
        col: usize,
        got: f64,
        want: f64,
    },
    #[error("gauss: x[{index}] is {got}, sequential run has {want}")]
    Gauss { index: usize, got: f64, want: f64 },
    #[error("tsp: best tour {best}, sequential branch and bound finds {want}")]
    TspBest { best: u32, want: u32 },
    #[error(transparent)]
    Suite(#[from] verify::SuiteError),
    #[error("tsp: {path:?} is not a tour")]
    TspNotATour { path: Vec<usize> },
    #[error("tsp: tour {path:?} has length {len}, recorded as {best}")]
    TspLength {
        path: Vec<usize>,
        len: u32,
        best: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum App {
    Wtest,
    Test,
    Sor,
    Gauss,
    Tsp,
    Barnes,
    Clu,
    Lu,
    Em3d,
    Ilink,
    WaterNsquared,
    WaterSpatial,
}

impl App {
    /// Seed 000's application suite (Table III), in the table's order: every
    /// app but the debugging programs wtest and test.
    pub const SUITE: [App; 10] = [
        App::Barnes,
        App::Clu,
        App::Lu,
        App::Em3d,
        App::Gauss,
        App::Ilink,
        App::Sor,
        App::Tsp,
        App::WaterNsquared,
        App::WaterSpatial,
    ];

    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            App::Wtest => "wtest",
            App::Test => "test",
            App::Sor => "sor",
            App::Gauss => "gauss",
            App::Tsp => "tsp",
            App::Barnes => "barnes",
            App::Clu => "clu",
            App::Lu => "lu",
            App::Em3d => "em3d",
            App::Ilink => "ilink",
            App::WaterNsquared => "water-nsquared",
            App::WaterSpatial => "water-spatial",
        }
    }
}

/// What to run: `size` and `iters` mean what each app says (0: its default).
#[derive(Clone, Debug)]
pub struct Params {
    pub app: App,
    pub threads: u32,
    pub size: usize,
    /// SOR's grid when not square (`size`): rows and columns, both or
    /// neither (0).
    pub rows: usize,
    pub cols: usize,
    pub iters: u32,
    pub page_size: u32,
    /// The shared heap: at least this, and at least what the app's data
    /// needs ([`Params::heap_needed`]).
    pub heap_bytes: usize,
    pub exclusive_mode: bool,
    /// Update write-noticed pages with local writers by incoming diffs (2L).
    pub incoming_diffs: bool,
    /// A home writes its master copy directly (seed 000 s.2.3.2); off, it
    /// diffs its writes into it (`--home-diffs`).
    pub home_direct: bool,
    /// Homes imposed from an earlier run (`--homes`); first touch without.
    pub homes: Option<std::sync::Arc<cashmere::HomeAssignment>>,
    /// Also time the app's sequential version on this node (sor, gauss, tsp).
    pub time_sequential: bool,
    /// Named problem size; `size` and `iters` override parts of it.
    pub preset: Option<Preset>,
    /// The protocol variant (seed 000 Table I; `ProtocolVariant` lists those built).
    pub variant: ProtocolVariant,
    /// Report where each thread's time went ([`Outcome::breakdown`]).
    pub time_breakdown: bool,
    /// How requests are noticed (`--detection`).
    pub detection: Detection,
    /// 2L (the node's threads share its frames and protocol state) or 1L
    /// (each thread its own protocol node): `--levels`.
    pub levels: cashmere::Levels,
}

impl Params {
    pub fn new(app: App, threads: u32) -> Params {
        Params {
            app,
            threads,
            size: 0,
            rows: 0,
            cols: 0,
            iters: 0,
            page_size: 8192,
            heap_bytes: 1 << 20,
            exclusive_mode: true,
            incoming_diffs: true,
            home_direct: true,
            homes: None,
            time_sequential: false,
            time_breakdown: false,
            preset: None,
            variant: ProtocolVariant::default(),
            detection: Detection::default(),
            levels: cashmere::Levels::Two,
        }
    }

    /// The problem this run computes: the preset's (default `small`), with
    /// `size` and `iters` applied.
    pub fn problem(&self) -> Result<Problem, AppError> {
        if matches!(self.app, App::Wtest | App::Test) && self.preset.is_some() {
            return Err(verify::SuiteError::NoPresets {
                app: self.app.name(),
            }
            .into());
        }
        // Bounded before any size arithmetic: far past what a heap of
        // cashmere::MAX_HEAP_BYTES holds, so a size that passes cannot
        // overflow the footprint sums (which then refuse it by bytes).
        for (what, v) in [
            ("--size", self.size),
            ("--rows", self.rows),
            ("--cols", self.cols),
        ] {
            if v > problem::MAX_DIMENSION {
                return Err(verify::SuiteError::Shape {
                    app: self.app.name(),
                    why: format!(
                        "{what} {v} is past any Memory Channel heap (at most {})",
                        problem::MAX_DIMENSION
                    ),
                }
                .into());
            }
        }
        let mut p = problem::preset(self.app, self.preset.unwrap_or_default())
            .with_overrides(self.size, self.iters);
        if let Problem::Sor { rows, cols, .. } = &mut p {
            if self.rows > 0 && self.cols > 0 {
                *rows = self.rows;
                *cols = self.cols;
            }
        }
        if let Problem::Em3d { nodes, .. } = p {
            if nodes < 2 {
                return Err(verify::SuiteError::Shape {
                    app: self.app.name(),
                    why: format!("a graph of {nodes} node: at least 2 (an E and an H node)"),
                }
                .into());
            }
        }
        Ok(p)
    }

    /// Shared heap bytes this run needs on `nodes` nodes: refused past
    /// [`cashmere::MAX_HEAP_BYTES`], which no cluster holds.
    pub fn heap_needed(&self, nodes: u32) -> Result<usize, AppError> {
        let procs = nodes as usize * self.threads as usize;
        let problem = self.problem()?;
        let bytes = suite::heap_bytes(self.app, problem, self.page_size, procs);
        if bytes > cashmere::MAX_HEAP_BYTES {
            return Err(verify::SuiteError::Shape {
                app: self.app.name(),
                why: format!(
                    "{} on {procs} processors needs {} MiB of shared heap; \
                     a Memory Channel address space holds at most {} MiB",
                    problem.describe(),
                    bytes >> 20,
                    cashmere::MAX_HEAP_BYTES >> 20
                ),
            }
            .into());
        }
        Ok(bytes)
    }

    pub fn config(&self) -> Config {
        // Gauss sets a flag per row.
        let rows = match self.problem() {
            Ok(Problem::Gauss { n }) => n,
            _ => self.size,
        };
        Config {
            heap_bytes: self.heap_bytes,
            page_size: self.page_size,
            threads: self.threads,
            locks: suite::locks(self.app),
            flags: 64.max(rows as u32),
            exclusive_mode: self.exclusive_mode,
            incoming_diffs: self.incoming_diffs,
            home_direct: self.home_direct,
            homes: self.homes.clone(),
            variant: self.variant.protocol(),
            detection: self.detection.protocol(),
            levels: self.levels,
            heap_base: None,
        }
    }

    /// Protocol levels as a number (1 or 2), for output and records: one
    /// thread per node is both.
    pub fn levels_number(&self) -> u32 {
        match self.levels {
            cashmere::Levels::One => 1,
            cashmere::Levels::Two if self.threads > 1 => 2,
            cashmere::Levels::Two => 1,
        }
    }
}

/// The largest TSP accepted: the paper's 17 cities (seed 000 Table III;
/// 16 cities took about 5 minutes on one node here).
pub const MAX_TSP_CITIES: usize = 17;

/// One node's result.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub node: u32,
    /// Seconds of the timed computation (between the app's marks, after
    /// initialisation and before verification).
    pub seconds: f64,
    /// The sequential version's time on this node, when asked for.
    pub sequential_seconds: Option<f64>,
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
    /// (`--record-homes`).
    pub homes: cashmere::HomeAssignment,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "csm {}: verified {} values; computed in {:.4} s{} on node {}\ncsm stats node {}: {}",
            self.summary,
            self.checked,
            self.seconds,
            match self.sequential_seconds {
                Some(s) => format!(" (sequential {s:.4} s, speedup {:.2})", s / self.seconds),
                None => String::new(),
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

/// Aborts the run (every node sees it) if the thread holding it unwinds.
struct AbortOnPanic<'a>(&'a Csm);

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abort();
        }
    }
}

enum AppData {
    W(wtest::WtestData),
    S(sor::SorData),
    G(gauss::GaussData),
    T(tsp::TspData),
    Suite(Box<dyn suite::Workload>),
}

/// Run `p.app` on this node with `p.threads` threads; every node must call
/// this with the same parameters.
pub fn run(mc: &MemoryChannel, p: &Params) -> Result<Outcome, AppError> {
    let problem = p.problem()?;
    if let Problem::Tsp { cities } = problem {
        if !(3..=MAX_TSP_CITIES).contains(&cities) {
            // Branch and bound is exponential: 14 cities take seconds,
            // each city more several times as long.
            return Err(AppError::TspCities(cities));
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
    let mut o = if cfg.levels == cashmere::Levels::One && p.threads > 1 {
        // 1L: each thread is a protocol node of its own, on this machine's
        // adapter; together they make this machine's outcome.
        let csms = Csm::start_one_level(mc, &cfg)?;
        let outcomes: Vec<Result<Outcome, AppError>> = std::thread::scope(|s| {
            let hs: Vec<_> = csms
                .into_iter()
                .map(|csm| {
                    let summary = &summary;
                    s.spawn(move || run_node(csm, p, problem, 1, (size, iters), summary, started))
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or(Err(AppError::Panicked)))
                .collect()
        });
        merge_processors(mc.node_id().index() as u32, outcomes)?
    } else {
        let csm = Csm::start(mc, &cfg)?;
        run_node(csm, p, problem, p.threads, (size, iters), &summary, started)?
    };
    let procs = (mc.nodes() * p.threads) as usize;
    o.sequential_seconds = p
        .time_sequential
        .then(|| suite::time_sequential(p.app, problem, procs))
        .flatten();
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
    csm: Csm,
    p: &Params,
    problem: Problem,
    threads: u32,
    (size, iters): (usize, u32),
    summary: &str,
    started: std::time::Instant,
) -> Result<Outcome, AppError> {
    let data = match (p.app, problem) {
        (App::Wtest | App::Test, _) => AppData::W(wtest::setup(&csm, size)?),
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
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let csm = csm.clone();
            let data = data.clone();
            let tid = (csm.node_id() * csm.threads() + t) as usize;
            std::thread::Builder::new()
                .name(format!("csm-app{tid}"))
                .spawn(move || {
                    // A panic (a bug) must not leave the other threads,
                    // here and on other nodes, waiting for this one.
                    let _guard = AbortOnPanic(&csm);
                    let r = match (&*data, app) {
                        (AppData::W(d), App::Wtest) => wtest::wtest(&csm, d, tid, iters),
                        (AppData::W(d), _) => wtest::test(&csm, d, tid, iters),
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
        AppData::Suite(w) => w.window().stats(),
        AppData::W(_) | AppData::S(_) => None,
    };
    if p.time_breakdown {
        times.extend(csm.protocol_breakdown());
    }
    Ok(Outcome {
        node: csm.node_id(),
        seconds,
        sequential_seconds: None,
        checked,
        stats,
        compute_stats,
        total_seconds,
        problem,
        summary: summary.to_string(),
        breakdown: times,
        homes: csm.homes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_limit_is_the_largest_address_space() {
        assert_eq!(
            cashmere::MAX_HEAP_BYTES as u64,
            firmware_model::config::MAX_ADDRESS_SPACE
        );
    }

    #[test]
    fn sizes_past_any_heap_are_refused_without_overflow() {
        for app in [
            App::Wtest,
            App::Sor,
            App::Gauss,
            App::Clu,
            App::Lu,
            App::Em3d,
        ] {
            let mut p = Params::new(app, 64);
            p.size = problem::MAX_DIMENSION + 1;
            let e = p.problem().unwrap_err().to_string();
            assert!(e.contains("past any Memory Channel heap"), "{e}");
            p.size = problem::MAX_DIMENSION;
            let e = p.heap_needed(64).unwrap_err().to_string();
            assert!(e.contains("MiB of shared heap"), "{app:?}: {e}");
        }
        let mut p = Params::new(App::Sor, 1);
        (p.rows, p.cols) = (usize::MAX, 4);
        assert!(p.problem().is_err());
    }

    #[test]
    fn fitting_sizes_are_sized_as_before() {
        let mut p = Params::new(App::Wtest, 1);
        p.size = 1 << 20;
        // 4 MiB of elements and a page-aligned counter.
        let bytes = p.heap_needed(1).unwrap();
        assert!(
            ((4 << 20) + 8..=(4 << 20) + 8192).contains(&bytes),
            "{bytes}"
        );
    }

    #[test]
    fn an_em3d_graph_needs_both_sides() {
        let mut p = Params::new(App::Em3d, 1);
        p.size = 1;
        assert!(p.problem().is_err());
        p.size = 2;
        assert!(p.problem().is_ok());
    }
}
