//! Programs on Cashmere (`mc-guest csm APP`): the seed's debugging programs
//! `wtest` and `test`, and SOR, Gauss and TSP, each verified; plus the
//! Table II benchmark (`mc-guest bench csm`).

pub mod bench;
pub mod gauss;
pub mod sor;
pub mod tsp;
pub mod wtest;

use cashmere::{Config, Csm, CsmError, Stats, TimeBreakdown};
use mc_api::MemoryChannel;

pub use sor::Grid;

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

/// SOR grids by name (docs/cashmere.md, "SOR grids", gives each one's
/// memory): the paper's, and smaller ones for a small machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SorPreset {
    /// 3072 x 4096, the paper's (seed 000 Table III): 96 MiB of doubles.
    Paper,
    /// 1536 x 2048: 24 MiB.
    Half,
    /// 768 x 1024: 6 MiB.
    Quarter,
}

impl SorPreset {
    pub fn grid(self) -> Grid {
        match self {
            SorPreset::Paper => Grid::PAPER,
            SorPreset::Half => Grid {
                rows: 1536,
                cols: 2048,
            },
            SorPreset::Quarter => Grid {
                rows: 768,
                cols: 1024,
            },
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
    /// needs ([`Params::heap_bytes_needed`]).
    pub heap_bytes: usize,
    pub exclusive_mode: bool,
    /// Update write-noticed pages with local writers by incoming diffs (2L).
    pub incoming_diffs: bool,
    /// Also time the app's sequential version on this node (sor, gauss, tsp).
    pub time_sequential: bool,
    /// Report where each thread's time went ([`Outcome::breakdown`]).
    pub time_breakdown: bool,
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
            time_sequential: false,
            time_breakdown: false,
        }
    }

    /// SOR's grid: `rows` x `cols` if given, else `size` square (default 64).
    pub fn sor_grid(&self) -> Grid {
        if self.rows > 0 && self.cols > 0 {
            return Grid {
                rows: self.rows,
                cols: self.cols,
            };
        }
        let s = if self.size == 0 { 64 } else { self.size };
        Grid { rows: s, cols: s }
    }

    /// Heap bytes the app's shared data takes, with a page of slack per
    /// page-aligned array (wtest, test, tsp: small; their default heap fits).
    pub fn heap_bytes_needed(&self) -> usize {
        let ps = self.page_size as usize;
        let round = |b: usize| b.div_ceil(ps) * ps;
        match self.app {
            App::Sor => 2 * round(self.sor_grid().bytes() / 2),
            App::Gauss => {
                let n = if self.size == 0 { 48 } else { self.size };
                gauss::heap_bytes(n, ps)
            }
            App::Wtest | App::Test | App::Tsp => 0,
        }
    }

    /// The shared heap this run gets: `heap_bytes`, grown to what the app
    /// needs.
    pub fn heap(&self) -> usize {
        self.heap_bytes.max(self.heap_bytes_needed())
    }

    pub fn config(&self) -> Config {
        Config {
            heap_bytes: self.heap(),
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
    /// Where each application thread's time went in the timed part, then
    /// the protocol thread's (when asked for: `Params::time_breakdown`).
    pub breakdown: Vec<TimeBreakdown>,
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
            let g = p.sor_grid();
            let i = if p.iters == 0 { 10 } else { p.iters };
            (0, i, format!("sor ({}x{}, {i} iterations)", g.rows, g.cols))
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
        App::Sor => AppData::S(sor::setup(&csm, p.sor_grid(), iters)?),
        App::Gauss => AppData::G(gauss::setup(&csm, size)?),
        App::Tsp => AppData::T(tsp::setup(&csm, size)?),
    };
    let data = std::sync::Arc::new(data);
    let app = p.app;
    let breakdown = p.time_breakdown;
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
                        (AppData::S(d), _) => sor::run(&csm, d, tid),
                        (AppData::G(d), _) => gauss::run(&csm, d, tid),
                        (AppData::T(d), _) => tsp::run(&csm, d, tid),
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
    let sequential_seconds = if p.time_sequential {
        let t = std::time::Instant::now();
        match p.app {
            App::Sor => drop(std::hint::black_box(sor::sequential(p.sor_grid(), iters))),
            App::Gauss => drop(std::hint::black_box(gauss::sequential(size))),
            App::Tsp => drop(std::hint::black_box(tsp::sequential(size))),
            App::Wtest | App::Test => {}
        }
        matches!(p.app, App::Sor | App::Gauss | App::Tsp).then(|| t.elapsed().as_secs_f64())
    } else {
        None
    };
    if p.time_breakdown {
        times.extend(csm.protocol_breakdown());
    }
    Ok(Outcome {
        node: csm.node_id(),
        seconds,
        sequential_seconds,
        checked,
        stats,
        summary,
        breakdown: times,
    })
}
