//! Programs on Cashmere (`mc-guest csm APP`): the seed's debugging programs
//! `wtest` and `test`, and SOR, Gauss and TSP, each verified; plus the
//! Table II benchmark (`mc-guest bench csm`).

pub mod bench;
pub mod gauss;
pub mod sor;
pub mod tsp;
pub mod wtest;

use cashmere::{Config, Csm, CsmError, Stats};
use mc_api::MemoryChannel;

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
}

/// What to run: `size` and `iters` mean what each app says (0: its default).
#[derive(Clone, Debug)]
pub struct Params {
    pub app: App,
    pub threads: u32,
    pub size: usize,
    pub iters: u32,
    pub page_size: u32,
    pub heap_bytes: usize,
    pub exclusive_mode: bool,
    /// Update write-noticed pages with local writers by incoming diffs (2L).
    pub incoming_diffs: bool,
    /// Also time the app's sequential version on this node (sor, gauss, tsp).
    pub time_sequential: bool,
}

impl Params {
    pub fn new(app: App, threads: u32) -> Params {
        Params {
            app,
            threads,
            size: 0,
            iters: 0,
            page_size: 8192,
            heap_bytes: 1 << 20,
            exclusive_mode: true,
            incoming_diffs: true,
            time_sequential: false,
        }
    }

    pub fn config(&self) -> Config {
        Config {
            heap_bytes: self.heap_bytes,
            page_size: self.page_size,
            threads: self.threads,
            locks: 64,
            flags: 64.max(self.size as u32),
            exclusive_mode: self.exclusive_mode,
            incoming_diffs: self.incoming_diffs,
        }
    }
}

/// The largest TSP accepted (about 5 minutes on one node here).
pub const MAX_TSP_CITIES: usize = 16;

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
    pub summary: String,
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
        )
    }
}

enum AppData {
    W(wtest::WtestData),
    S(sor::SorData),
    G(gauss::GaussData),
    T(tsp::TspData),
}

/// Run `p.app` on this node with `p.threads` threads; every node must call
/// this with the same parameters.
pub fn run(mc: &MemoryChannel, p: &Params) -> Result<Outcome, AppError> {
    let csm = Csm::start(mc, &p.config())?;
    let (size, iters, summary) = match p.app {
        App::Wtest | App::Test => {
            let s = if p.size == 0 { 256 } else { p.size };
            let i = if p.iters == 0 { 3 } else { p.iters };
            (
                s,
                i,
                format!("{:?} ({s} elements per thread, {i} rounds)", p.app).to_lowercase(),
            )
        }
        App::Sor => {
            let s = if p.size == 0 { 64 } else { p.size };
            let i = if p.iters == 0 { 10 } else { p.iters };
            (s, i, format!("sor ({s}x{s}, {i} iterations)"))
        }
        App::Gauss => {
            let s = if p.size == 0 { 48 } else { p.size };
            (s, 0, format!("gauss ({s}x{s})"))
        }
        App::Tsp => {
            let s = if p.size == 0 { 9 } else { p.size };
            if !(3..=MAX_TSP_CITIES).contains(&s) {
                // Branch and bound is exponential: 14 cities take seconds,
                // each city more several times as long.
                return Err(AppError::TspCities(s));
            }
            (s, 0, format!("tsp ({s} cities)"))
        }
    };
    let data = match p.app {
        App::Wtest | App::Test => AppData::W(wtest::setup(&csm, size)?),
        App::Sor => AppData::S(sor::setup(&csm, size, size)?),
        App::Gauss => AppData::G(gauss::setup(&csm, size)?),
        App::Tsp => AppData::T(tsp::setup(&csm, size)?),
    };
    let data = std::sync::Arc::new(data);
    let app = p.app;
    let handles: Vec<_> = (0..p.threads)
        .map(|t| {
            let csm = csm.clone();
            let data = data.clone();
            let tid = (csm.node_id() * csm.threads() + t) as usize;
            std::thread::Builder::new()
                .name(format!("csm-app{tid}"))
                .spawn(move || {
                    let r = match (&*data, app) {
                        (AppData::W(d), App::Wtest) => wtest::wtest(&csm, d, tid, iters),
                        (AppData::W(d), _) => wtest::test(&csm, d, tid, iters),
                        (AppData::S(d), _) => sor::run(&csm, d, tid, iters),
                        (AppData::G(d), _) => gauss::run(&csm, d, tid),
                        (AppData::T(d), _) => tsp::run(&csm, d, tid),
                    };
                    if r.is_err() {
                        // Nobody, here or elsewhere, waits for this thread.
                        csm.abort();
                    }
                    r
                })
        })
        .collect::<Result<_, _>>()
        .map_err(AppError::Spawn)?;
    let mut checked = 0;
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(c)) => checked += c,
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
    let sequential_seconds = if p.time_sequential {
        let t = std::time::Instant::now();
        match p.app {
            App::Sor => drop(std::hint::black_box(sor::sequential(size, size, iters))),
            App::Gauss => drop(std::hint::black_box(gauss::sequential(size))),
            App::Tsp => drop(std::hint::black_box(tsp::sequential(size))),
            App::Wtest | App::Test => {}
        }
        matches!(p.app, App::Sor | App::Gauss | App::Tsp).then(|| t.elapsed().as_secs_f64())
    } else {
        None
    };
    Ok(Outcome {
        node: csm.node_id(),
        seconds,
        sequential_seconds,
        checked,
        stats,
        summary,
    })
}
