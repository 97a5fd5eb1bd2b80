//! What `mc-guest bench` reports: which benchmarks ([`Which`]), the rows
//! ([`BenchRow`], [`BenchReport`]), why one could not run
//! ([`BenchError`]), and the printed table ([`format`]).

use cashmere::CsmError;
use mc_api::McError;

/// Which benchmarks to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    All,
    /// One node: a store with loopback until it comes back (the hub and one
    /// guest thread: fits two cores).
    Loopback,
    /// The sender's cost of one posted 8-byte store.
    Post,
    Latency,
    Bandwidth,
    Broadcast,
    Lock,
    Errcheck,
    /// Cashmere's Table II operations (not part of `all`).
    Csm,
    /// HLRC's Table 4 operations (seed 001; not part of `all`).
    Hlrc,
    /// UMP's Figures 8 and 9 (seed 004; not part of `all`): bench_ump.rs.
    Ump,
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Which::All => "all",
            Which::Loopback => "loopback",
            Which::Post => "post",
            Which::Latency => "latency",
            Which::Bandwidth => "bandwidth",
            Which::Broadcast => "broadcast",
            Which::Lock => "lock",
            Which::Errcheck => "errcheck",
            Which::Csm => "csm",
            Which::Hlrc => "hlrc",
            Which::Ump => "ump",
        })
    }
}

impl Which {
    /// Whether the benchmark measures between two nodes (a sender and a
    /// receiver, or a requester and a home), so a cluster of one cannot run it.
    pub fn needs_two_nodes(self) -> bool {
        matches!(
            self,
            Which::Latency | Which::Bandwidth | Which::Broadcast | Which::Csm | Which::Hlrc
        )
    }
}

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Api(#[from] McError),
    #[error(transparent)]
    Csm(#[from] CsmError),
    #[error(transparent)]
    Dsm(#[from] dsm_core::DsmError),
    /// The benchmark measures between two nodes and the cluster has fewer.
    #[error("bench {which} needs a second node to measure against, and this cluster has {nodes}: start it with --nodes 2 or more (e.g. mc-host run --nodes 2 -- mc-guest bench {which})")]
    NeedsNodes { which: Which, nodes: u32 },
}

/// What node 0 prints: the measured rows, and the benchmarks `all` left out
/// because the cluster is too small for them.
#[derive(Clone, Debug, Default)]
pub struct BenchReport {
    pub rows: Vec<BenchRow>,
    pub skipped: Vec<Which>,
    pub nodes: u32,
}

/// One printed row.
#[derive(Clone, Debug)]
pub struct BenchRow {
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
    /// The real hardware's figure, if the seeds give one.
    pub hardware: Option<f64>,
    /// This machine's raw limit for the same thing, measured now.
    pub raw: Option<f64>,
    /// Lower is better (times) or higher is better (bandwidths).
    pub lower_is_better: bool,
}

/// The table node 0 prints.
pub fn format(report: &BenchReport) -> String {
    let rows = &report.rows;
    let mut s = format!(
        "{:<52} {:>12} {:>10} {:>9} {:>12} {:>9}\n",
        "operation", "measured", "MC2 (seed)", "vs MC2", "raw limit", "vs raw"
    );
    for r in rows {
        let fmt = |v: f64| {
            if v >= 100.0 {
                format!("{v:.0}")
            } else if v >= 1.0 {
                format!("{v:.2}")
            } else {
                format!("{v:.3}")
            }
        };
        let ratio = |other: Option<f64>| match other {
            Some(o) if o > 0.0 && r.value > 0.0 => {
                let x = if r.lower_is_better {
                    o / r.value
                } else {
                    r.value / o
                };
                format!("{x:.2}x")
            }
            _ => "-".into(),
        };
        s += &format!(
            "{:<52} {:>7} {:<4} {:>10} {:>9} {:>12} {:>9}\n",
            r.name,
            fmt(r.value),
            r.unit,
            r.hardware.map_or("-".into(), fmt),
            ratio(r.hardware),
            r.raw
                .map_or("-".into(), |v| format!("{} {}", fmt(v), r.unit)),
            ratio(r.raw),
        );
    }
    s += "ratios: above 1x means faster than the reference (vs MC2: than the real hardware; vs raw: than this machine's limit).\n";
    if !report.skipped.is_empty() {
        let names: Vec<String> = report.skipped.iter().map(Which::to_string).collect();
        s += &format!(
            "not measured: {}: they need a second node, and this cluster has {}; start it with --nodes 2 or more.\n",
            names.join(", "),
            report.nodes
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> BenchRow {
        BenchRow {
            name: "lock acquire, uncontended".into(),
            value: 1.5,
            unit: "us",
            hardware: None,
            raw: None,
            lower_is_better: true,
        }
    }

    #[test]
    fn a_cluster_of_one_is_told_what_was_not_measured() {
        let report = BenchReport {
            rows: vec![row()],
            skipped: vec![Which::Latency, Which::Bandwidth, Which::Broadcast],
            nodes: 1,
        };
        let s = format(&report);
        assert!(s.contains("lock acquire, uncontended"), "{s}");
        assert!(
            s.contains("not measured: latency, bandwidth, broadcast: they need a second node, and this cluster has 1; start it with --nodes 2"),
            "{s}"
        );
        let full = BenchReport {
            skipped: Vec::new(),
            nodes: 2,
            ..report
        };
        assert!(!format(&full).contains("not measured"));
    }

    #[test]
    fn what_needs_two_nodes_says_so_by_name() {
        for w in [
            Which::Latency,
            Which::Bandwidth,
            Which::Broadcast,
            Which::Csm,
            Which::Hlrc,
        ] {
            assert!(w.needs_two_nodes());
            let e = BenchError::NeedsNodes { which: w, nodes: 1 };
            let s = e.to_string();
            assert!(
                s.starts_with(&format!("bench {w} needs a second node")),
                "{s}"
            );
            assert!(s.contains("--nodes 2"), "{s}");
        }
        for w in [Which::All, Which::Lock, Which::Errcheck] {
            assert!(!w.needs_two_nodes());
        }
    }
}
