//! What to run (`mc-guest csm APP ...`): the application and its
//! parameters ([`Params`]), sized into a problem, a heap and a Cashmere
//! configuration.

use cashmere::Config;
use firmware_model::abi::clock::ClockConfig;

use super::app::App;
use super::error::AppError;
use super::problem::{Preset, Problem};
use super::{problem, suite, verify};
use cashmere::CsmVariant;
use cashmere::MessageDetection;

/// The virtual clock `config` for running `app` at `preset`: on the
/// reference processor the preset names ([`Preset::reference`]) when the
/// run counts work and names no CPU scale
/// (`ClockConfig::on_reference`), else as given. The guest chooses, as it
/// alone knows its problem; every node chooses the same.
pub fn clock_for(app: App, preset: Option<Preset>, config: ClockConfig) -> ClockConfig {
    match preset.and_then(Preset::reference) {
        Some(r) => config.on_reference(r, app.name()),
        None => config,
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
    /// The protocol variant (seed 000 Table I).
    pub variant: CsmVariant,
    /// The DSM protocol (`--protocol`): Cashmere, whose variant is
    /// `variant`, or another on the DSM core.
    pub protocol: dsm_select::ProtocolName,
    /// Report where each thread's time went ([`Outcome::breakdown`]).
    pub time_breakdown: bool,
    /// How requests are noticed (`--detection`).
    pub detection: MessageDetection,
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
            variant: CsmVariant::default(),
            protocol: dsm_select::ProtocolName::default(),
            detection: MessageDetection::default(),
            levels: cashmere::Levels::Two,
        }
    }

    /// The problem this run computes: the preset's (default `small`), with
    /// `size` and `iters` applied.
    pub fn problem(&self) -> Result<Problem, AppError> {
        if matches!(self.app, App::Wtest | App::Test | App::Subword) && self.preset.is_some() {
            return Err(verify::SuiteError::NoPresets {
                app: self.app.name(),
            }
            .into());
        }
        if let Some(pr) = self.preset.filter(|pr| !pr.applies_to(self.app)) {
            return Err(verify::SuiteError::Shape {
                app: self.app.name(),
                why: format!("no {} size: not one of seed 001's applications", pr.name()),
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
        if let Problem::Fft { m } = p {
            if m < 2 || m % 2 != 0 || m > 28 {
                return Err(verify::SuiteError::Shape {
                    app: self.app.name(),
                    why: format!("2^{m} points: m must be even, 2 to 28"),
                }
                .into());
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
            flags: 64.max(u32::try_from(rows).unwrap_or(u32::MAX)),
            exclusive_mode: self.exclusive_mode,
            incoming_diffs: self.incoming_diffs,
            home_direct: self.home_direct,
            homes: self.homes.clone(),
            variant: self.variant,
            detection: self.detection,
            heap_base: None,
            levels: self.levels,
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
