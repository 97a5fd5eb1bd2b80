//! Reference processors: the committed rates that turn counted work (the
//! edges a guest's instrumented code passed, issue 39; docs/virtual-time.md
//! s.9) into time on a named processor. The guest applies them
//! (`mc-guest csm` at a preset that names one, under `--work counted` and
//! without `--cpu-scale`) and `mc-host report run --cpu-scale paper` reads
//! them; both get them from here, so there is one table. Constants with
//! their provenance, never measured again on a run: a count is the same
//! on every host, and so is its time.

/// Picoseconds of this project's build host's processor per counted edge:
/// the rate that makes counted work read as CPU time does at scale 1, so
/// that `--cpu-scale` and `--protocol-scale` mean the same under both
/// meters (virtual ns per ns of work at this rate).
///
/// Provenance: `scripts/calibrate-work.sh medium`, the median over six
/// applications (SOR, Gauss, Water-Nsquared, Water-Spatial, EM3D, CLU) of
/// the plain release build's sequential CPU time over the counted build's
/// sequential count, on this project's 2-core build host; its output is
/// committed in docs/work-calibration.txt. The applications range from 224
/// (Gauss) to 3161 ps (CLU) an edge: an edge is not a unit of time, which
/// is why a [`ReferenceProcessor`] has a rate per application and this
/// constant only says what scale 1 means.
pub const EDGE_PS: u64 = 1808;

/// The protocol's scale on the paper's processor under counted work: the
/// `--protocol-scale` that makes Cashmere's one-processor operations of
/// seed 000 Table II (a twin 68 us, a small diff 31 us, a large diff 129
/// us, MC Direct) cost what they cost there, given their counted work here
/// at [`EDGE_PS`] (3.726, 7.800 and 15.147 us: scales 18.25, 3.97 and
/// 8.52; the median). The same for every application, as the paper's
/// protocol code is the same. An edge of a copy loop (the twin) stands for
/// more of the paper's time than one of the diff's compare loop: the
/// spread is the error of one rate for all protocol code.
///
/// Provenance: `scripts/calibrate-work.sh --protocol` (its output is in
/// docs/work-calibration.txt); counts, so the same on any host.
pub const PAPER_PROTOCOL_SCALE: f64 = 8.52;

/// A processor whose time counted work predicts: a rate per application
/// (picoseconds per counted edge of its code) and one for protocol code.
#[derive(Debug, PartialEq)]
pub struct ReferenceProcessor {
    /// Its name in records and printouts (`reference_processor`).
    pub name: &'static str,
    /// What it is, for people.
    pub description: &'static str,
    /// (application, ps per counted edge of its work), by the
    /// application's name as `mc-guest csm` spells it.
    pub app_ps_per_edge: &'static [(&'static str, f64)],
    /// Ps per counted edge of protocol work.
    pub protocol_ps_per_edge: f64,
}

impl ReferenceProcessor {
    /// `app`'s rate on this processor, ps per edge; `None` when it was not
    /// calibrated for `app`.
    pub fn app_rate(&self, app: &str) -> Option<f64> {
        self.app_ps_per_edge
            .iter()
            .find(|(a, _)| *a == app)
            .map(|(_, ps)| *ps)
    }

    /// `app`'s CPU scale (`--cpu-scale`: virtual ns per ns of counted work
    /// at [`EDGE_PS`]) on this processor.
    pub fn cpu_scale(&self, app: &str) -> Option<f64> {
        self.app_rate(app).map(|ps| ps / EDGE_PS_F64)
    }

    /// The protocol's scale (`--protocol-scale`) on this processor.
    pub fn protocol_scale(&self) -> f64 {
        self.protocol_ps_per_edge / EDGE_PS_F64
    }
}

/// [`EDGE_PS`] as a float (exact: far below 2^53).
const EDGE_PS_F64: f64 = EDGE_PS as f64;

/// Seed 000's processor: a 600 MHz Alpha 21164A of an AlphaServer 4100
/// 5/600, on which Table III's sequential times were taken.
///
/// Provenance of the rates: `scripts/calibrate-work.sh --paper` (its output
/// is committed in docs/work-calibration.txt): Table III's sequential
/// seconds over the counted build's count of the same sequential program
/// at the paper preset. The protocol's is [`PAPER_PROTOCOL_SCALE`] x
/// [`EDGE_PS`]. An application's rate holds more than the processor's
/// speed: where the paper preset computes less than Table III's run did
/// (EM3D's 50 iterations take 0.03 s here against Table III's 30.6 s, and
/// Table III gives no iteration counts), its rate charges each edge for
/// the work the preset left out, so that the sequential program takes
/// Table III's time. The protocol's rate is the processor's own (Table II's
/// operations, the same sizes here and there). TSP is not in the table:
/// its paper-size sequential program (17 cities) did not finish within the
/// calibration's session; without a rate it runs at this host's edge rate
/// (`mc-host report run --cpu-scale paper` refuses it).
pub const PAPER: ReferenceProcessor = ReferenceProcessor {
    name: "paper",
    description: "seed 000's 600 MHz Alpha 21164A (AlphaServer 4100 5/600), Table III",
    // scripts/calibrate-work.sh --paper, 2026-11-28 (docs/work-calibration.txt).
    app_ps_per_edge: &[
        ("barnes", 68_655.2),
        ("clu", 26_271.4),
        ("em3d", 683_026.2),
        ("gauss", 81_763.5),
        ("ilink", 29_255.3),
        ("lu", 27_421.5),
        ("sor", 143_845.8),
        ("water-nsquared", 410_933.9),
        ("water-spatial", 61_871.6),
    ],
    protocol_ps_per_edge: PAPER_PROTOCOL_SCALE * EDGE_PS_F64,
};

/// Every reference processor, by name.
pub const PROCESSORS: [&ReferenceProcessor; 1] = [&PAPER];

/// The reference processor named `name`.
pub fn by_name(name: &str) -> Option<&'static ReferenceProcessor> {
    PROCESSORS.into_iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paper_processor_s_protocol_rate_is_the_committed_scale() {
        assert_eq!(
            PAPER.protocol_ps_per_edge,
            PAPER_PROTOCOL_SCALE * EDGE_PS as f64
        );
        assert!((PAPER.protocol_scale() - PAPER_PROTOCOL_SCALE).abs() < 1e-12);
        assert_eq!(by_name("paper"), Some(&PAPER));
        assert_eq!(by_name("nonesuch"), None);
    }
}
