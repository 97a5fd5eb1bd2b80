//! The pieces of a run's machine-readable record that every program on
//! Cashmere shares (`mc-guest csm APP --json FILE`, and C programs through
//! libcsm's `CSM_JSON`): what one node reports ([`NodeReport`]), its
//! counters and time breakdown as JSON, where the run happened
//! ([`RunContext`]), and appending a record as one line of a file. Each
//! program builds the record itself from every node's report (`gather`);
//! docs/applications.md describes the fields.
//!
//! Cashmere's counters are serialised field by field in [`stats_json`],
//! from [`Stats::fields`] (which names every field: a field added to
//! `Stats` does not compile until it is listed there); the time breakdown
//! (seed 000 Figs. 2-3), when the run measured one, goes in
//! [`breakdown_json`].

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Stats, TimeBreakdown};

/// Version of the record's layout; readers check it.
pub const SCHEMA: u64 = 1;

/// Why a record could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot append the run's record to {path}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode the run's record")]
    Encode(#[from] serde_json::Error),
}

/// Every counter of `s`, by its field name (`Stats::fields`).
pub fn stats_json(s: &Stats) -> Map<String, Value> {
    s.fields()
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::from(v)))
        .collect()
}

/// The node's execution time broken down as seed 000 Figs. 2-3 do, in
/// seconds summed over its application threads' timed parts (`--stats`):
/// `user` (the application's own work), `protocol` (resolving faults,
/// twinning and diffing at releases, processing write notices at acquires),
/// `comm_wait` (waiting for pages, at barriers, for locks and flags), and
/// `messages` (answering other nodes' requests). The protocol thread's time
/// is not in it: the paper's figures are per processor. None when the run
/// measured no breakdown.
pub fn breakdown_json(times: &[TimeBreakdown]) -> Option<Map<String, Value>> {
    let app: Vec<_> = times.iter().filter(|t| t.thread != "proto").collect();
    if app.is_empty() {
        return None;
    }
    let sum = |f: &dyn Fn(&TimeBreakdown) -> f64| app.iter().map(|t| f(t)).sum::<f64>();
    let parts = [
        ("user", sum(&|t| t.compute)),
        ("protocol", sum(&|t| t.fault + t.diff + t.acquire)),
        (
            "comm_wait",
            sum(&|t| t.fetch + t.barrier + t.lock + t.flag + t.idle),
        ),
        ("messages", sum(&|t| t.serve)),
    ];
    Some(
        parts
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::from(v)))
            .collect(),
    )
}

/// The node's time in virtual time (a predicted-time run,
/// docs/virtual-time.md), in seconds summed over its application threads'
/// timed parts: `user`, `protocol`, `communication` (waiting for pages and
/// acknowledgements) and `wait` (barriers, locks, flags). None without
/// virtual time or a measured breakdown.
pub fn virtual_breakdown_json(times: &[TimeBreakdown]) -> Option<Map<String, Value>> {
    let app: Vec<_> = times
        .iter()
        .filter(|t| t.thread != "proto")
        .filter_map(|t| t.virtual_times)
        .collect();
    if app.is_empty() {
        return None;
    }
    let mut out = Map::new();
    for (i, (k, _)) in app[0].fields().iter().enumerate() {
        let sum: f64 = app.iter().map(|v| v.fields()[i].1).sum();
        out.insert(k.to_string(), Value::from(sum));
    }
    Some(out)
}

/// Field-by-field sum of per-node objects: numbers add up (integers stay
/// integers), anything else is left out.
pub fn total(per_node: &[Map<String, Value>]) -> Map<String, Value> {
    let mut out = Map::new();
    for m in per_node {
        for (k, v) in m {
            let sum = match (out.get(k), v) {
                (None, v) if v.is_number() => v.clone(),
                (Some(Value::Number(a)), Value::Number(b)) => match (a.as_u64(), b.as_u64()) {
                    (Some(x), Some(y)) => Value::from(x.saturating_add(y)),
                    _ => Value::from(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
                },
                _ => continue,
            };
            out.insert(k.clone(), sum);
        }
    }
    out
}

/// Where and how the run happened, as far as the guest can tell: the
/// delivery mode and seed `mc-host run` exports (MC_DELIVERY, MC_SEED), the
/// adapter's link timing.
#[derive(Clone, Debug, Default)]
pub struct RunContext {
    pub nodes: u32,
    pub link: String,
    pub delivery: Option<String>,
    pub seed: Option<u64>,
}

impl RunContext {
    pub fn from_env(nodes: u32, link_timing_code: u32) -> RunContext {
        RunContext {
            nodes,
            link: mc_api::link_timing_name(link_timing_code).to_string(),
            delivery: std::env::var("MC_DELIVERY").ok(),
            seed: std::env::var("MC_SEED").ok().and_then(|s| s.parse().ok()),
        }
    }
}

/// What one node contributes to the record (sent to node 0 as JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    pub node: u32,
    /// The timed computation, when the program marked it.
    pub seconds: Option<f64>,
    pub total_seconds: f64,
    pub sequential_seconds: Option<f64>,
    pub checked: u64,
    pub summary: String,
    /// Counters at the end of `finish`.
    pub stats: Map<String, Value>,
    /// Counters at the end of the computation, before verification.
    pub compute_stats: Option<Map<String, Value>>,
    pub breakdown: Option<Map<String, Value>>,
    /// Virtual time: the sequential run's CPU seconds, the timed part's
    /// window on the virtual clock (ns), the node's virtual breakdown and
    /// the quantum breaks it saw.
    #[serde(default)]
    pub sequential_cpu_seconds: Option<f64>,
    #[serde(default)]
    pub virtual_window: Option<(u64, u64)>,
    #[serde(default)]
    pub virtual_breakdown: Option<Map<String, Value>>,
    #[serde(default)]
    pub quantum_breaks: u64,
}

/// Append `record` to `path` as one line (created if need be).
pub fn append(path: &Path, record: &Value) -> Result<(), RecordError> {
    let mut line = serde_json::to_string(record)?;
    line.push('\n');
    let err = |source| RecordError::Write {
        path: path.display().to_string(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(err)?;
    // One write: concurrent appenders do not interleave lines.
    f.write_all(line.as_bytes()).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_integers_and_floats() {
        let a: Map<String, Value> = serde_json::from_str(r#"{"x":1,"y":0.5,"s":"a"}"#).unwrap();
        let b: Map<String, Value> = serde_json::from_str(r#"{"x":2,"y":0.25}"#).unwrap();
        let t = total(&[a, b]);
        assert_eq!(t["x"], 3);
        assert_eq!(t["y"], 0.75);
        assert!(!t.contains_key("s"));
    }
}
