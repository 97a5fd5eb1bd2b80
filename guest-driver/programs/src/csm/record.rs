//! The machine-readable result of one run (`mc-guest csm APP --json FILE`):
//! one JSON object per run, appended as one line to FILE by node 0 once it
//! has every node's report (`gather.rs`). `mc-host report` reads these
//! lines; docs/applications.md describes the fields.
//!
//! Cashmere's counters are serialised field by field in [`stats_json`],
//! from `cashmere::Stats::fields` (which names every field: a field added
//! to `Stats` does not compile until it is listed there); the time breakdown (seed 000 Figs. 2-3), when the run measured
//! one (`--stats`), goes in [`breakdown_json`].

use std::io::Write;
use std::path::Path;

use cashmere::Stats;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::params::Params;
use super::run::Outcome;

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
pub fn breakdown_json(times: &[cashmere::TimeBreakdown]) -> Option<Map<String, Value>> {
    let app: Vec<_> = times.iter().filter(|t| t.thread != "proto").collect();
    if app.is_empty() {
        return None;
    }
    let sum = |f: &dyn Fn(&cashmere::TimeBreakdown) -> f64| app.iter().map(|t| f(t)).sum::<f64>();
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
pub fn virtual_breakdown_json(times: &[cashmere::TimeBreakdown]) -> Option<Map<String, Value>> {
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
            link: match link_timing_code {
                0 => "unthrottled",
                1 => "mc1",
                2 => "mc2",
                _ => "custom",
            }
            .to_string(),
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

impl NodeReport {
    pub fn from_outcome(o: &Outcome) -> NodeReport {
        NodeReport {
            node: o.node,
            seconds: o.seconds.is_finite().then_some(o.seconds),
            total_seconds: o.total_seconds,
            sequential_seconds: o.sequential_seconds,
            checked: o.checked,
            summary: o.summary.clone(),
            stats: stats_json(&o.stats),
            compute_stats: o.compute_stats.as_ref().map(stats_json),
            breakdown: breakdown_json(&o.breakdown),
            sequential_cpu_seconds: o.sequential_cpu_seconds,
            virtual_window: o.virtual_window,
            virtual_breakdown: virtual_breakdown_json(&o.breakdown),
            quantum_breaks: mc_api::vclock::quantum_breaks(),
        }
    }
}

/// The run's times in virtual time, for the record's `times` object:
/// `clock` ("wall" or "virtual"), and in virtual time `predicted_s` (from
/// the earliest start of the timed part on any node to its latest end, on
/// the virtual clock), `cpu_scale`, `protocol_scale` (the scale of
/// Cashmere's protocol work), `quantum_ns`, `quantum_breaks`,
/// `sequential_cpu_s`, `sequential_predicted_s` (that CPU time x scale) and
/// `predicted_speedup` (sequential CPU time x scale
/// / predicted time).
fn clock_fields(reports: &[NodeReport]) -> Map<String, Value> {
    let mut m = Map::new();
    let Some(config) = mc_api::vclock::config() else {
        m.insert("clock".into(), Value::from("wall"));
        return m;
    };
    m.insert("clock".into(), Value::from("virtual"));
    let start = reports
        .iter()
        .filter_map(|r| r.virtual_window)
        .map(|w| w.0)
        .min();
    let end = reports
        .iter()
        .filter_map(|r| r.virtual_window)
        .map(|w| w.1)
        .max();
    let predicted = start
        .zip(end)
        .map(|(s, e)| e.saturating_sub(s) as f64 / 1e9);
    let seq_cpu = reports.first().and_then(|r| r.sequential_cpu_seconds);
    m.insert("predicted_s".into(), json!(predicted));
    m.insert("cpu_scale".into(), json!(config.cpu_scale));
    m.insert(
        "protocol_scale".into(),
        json!(config.protocol_scale.unwrap_or(config.cpu_scale)),
    );
    m.insert("quantum_ns".into(), json!(config.quantum_ns));
    m.insert(
        "quantum_breaks".into(),
        json!(reports.iter().map(|r| r.quantum_breaks).sum::<u64>()),
    );
    m.insert("sequential_cpu_s".into(), json!(seq_cpu));
    // The sequential program's predicted time: its CPU time at the run's
    // scale (it neither waits nor communicates).
    m.insert(
        "sequential_predicted_s".into(),
        json!(seq_cpu.map(|s| s * config.cpu_scale)),
    );
    m.insert(
        "predicted_speedup".into(),
        json!(seq_cpu
            .zip(predicted)
            .filter(|(_, p)| *p > 0.0)
            .map(|(s, p)| s * config.cpu_scale / p)),
    );
    m
}

fn max(reports: &[NodeReport], f: impl Fn(&NodeReport) -> Option<f64>) -> Option<f64> {
    reports.iter().filter_map(f).reduce(f64::max)
}

/// The record of a run from every node's report (in node order).
pub fn build(p: &Params, ctx: &RunContext, reports: &[NodeReport]) -> Value {
    let problem = p.problem().ok();
    let dims: Map<String, Value> = problem
        .map(|pr| {
            pr.dims()
                .into_iter()
                .map(|(k, v)| (k.to_string(), Value::from(v)))
                .collect()
        })
        .unwrap_or_default();
    let window_everywhere = reports.iter().all(|r| r.compute_stats.is_some());
    let per_node = |f: &dyn Fn(&NodeReport) -> Map<String, Value>| -> Value {
        let v: Vec<Map<String, Value>> = reports.iter().map(f).collect();
        json!({ "total": total(&v), "per_node": v })
    };
    let stats = if window_everywhere {
        per_node(&|r| r.compute_stats.clone().unwrap_or_default())
    } else {
        per_node(&|r| r.stats.clone())
    };
    let times: Vec<Value> = reports
        .iter()
        .map(|r| {
            json!({
                "node": r.node,
                "compute_s": r.seconds,
                "total_s": r.total_seconds,
                "sequential_s": r.sequential_seconds,
                // On the virtual clock: where this node's timed part began
                // and ended (seconds), to see the nodes leave a barrier
                // together.
                "predicted_start_s": r.virtual_window.map(|w| w.0 as f64 / 1e9),
                "predicted_end_s": r.virtual_window.map(|w| w.1 as f64 / 1e9),
            })
        })
        .collect();
    let clock = clock_fields(reports);
    let mut record = json!({
        "schema": SCHEMA,
        "app": p.app.name(),
        "preset": p.preset.map(|x| x.name()),
        "problem": dims,
        "summary": reports.first().map(|r| r.summary.clone()),
        "nodes": ctx.nodes,
        "threads": p.threads,
        "processors": ctx.nodes * p.threads,
        "levels": p.levels_number(),
        "variant": p.variant.name(),
        "delivery": ctx.delivery,
        "seed": ctx.seed,
        "link": ctx.link,
        "homes": if p.homes.is_some() { "imposed" } else { "first_touch" },
        "home_writes": if p.home_direct { "direct" } else { "diffs" },
        "detection": p.detection.name(),
        "page_size": p.page_size,
        "heap_bytes": p.heap_bytes,
        "footprint_bytes": p.heap_needed(ctx.nodes).ok(),
        "checked": reports.iter().map(|r| r.checked).sum::<u64>(),
        "times": {
            "compute_s": max(reports, |r| r.seconds),
            "total_s": max(reports, |r| Some(r.total_seconds)),
            "sequential_s": reports.first().and_then(|r| r.sequential_seconds),
            "per_node": times,
        },
        "counters_until": if window_everywhere { "compute_end" } else { "finish" },
        "stats": stats,
        "stats_at_finish": per_node(&|r| r.stats.clone()),
    });
    if let Some(times) = record.get_mut("times").and_then(Value::as_object_mut) {
        times.extend(clock);
    }
    let virtual_breakdowns: Option<Vec<Map<String, Value>>> = reports
        .iter()
        .map(|r| r.virtual_breakdown.clone())
        .collect();
    if let (Some(b), Some(obj)) = (virtual_breakdowns, record.as_object_mut()) {
        obj.insert(
            "virtual_breakdown".into(),
            json!({ "total": total(&b), "per_node": b }),
        );
    }
    let breakdowns: Option<Vec<Map<String, Value>>> =
        reports.iter().map(|r| r.breakdown.clone()).collect();
    if let (Some(b), Some(obj)) = (breakdowns, record.as_object_mut()) {
        obj.insert(
            "breakdown".into(),
            json!({ "total": total(&b), "per_node": b }),
        );
    }
    record
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
    use crate::csm::{App, Preset};

    fn report(node: u32, diffs: u64) -> NodeReport {
        let stats = Stats {
            diffs,
            page_transfers: 3,
            ..Stats::default()
        };
        NodeReport {
            node,
            seconds: Some(0.5 + f64::from(node)),
            total_seconds: 2.0,
            sequential_seconds: None,
            checked: 10,
            stats: stats_json(&stats),
            compute_stats: Some(stats_json(&stats)),
            breakdown: None,
            summary: "clu (n 64, block 16)".into(),
            sequential_cpu_seconds: None,
            virtual_window: None,
            virtual_breakdown: None,
            quantum_breaks: 0,
        }
    }

    #[test]
    fn record_has_per_node_counters_and_totals() {
        let mut p = Params::new(App::Clu, 2);
        p.preset = Some(Preset::Small);
        let ctx = RunContext {
            nodes: 2,
            link: "unthrottled".into(),
            delivery: Some("eager".into()),
            seed: Some(0),
        };
        let r = build(&p, &ctx, &[report(0, 4), report(1, 5)]);
        assert_eq!(r["app"], "clu");
        assert_eq!(r["preset"], "small");
        assert_eq!(r["problem"]["n"], 128);
        assert_eq!(r["processors"], 4);
        assert_eq!(r["levels"], 2);
        assert_eq!(r["variant"], "dms");
        assert_eq!(r["stats"]["total"]["diffs"], 9);
        assert_eq!(r["stats"]["total"]["page_transfers"], 6);
        assert_eq!(r["stats"]["per_node"][1]["diffs"], 5);
        assert_eq!(r["times"]["compute_s"], 1.5);
        assert_eq!(r["counters_until"], "compute_end");
        assert_eq!(r["checked"], 20);
        assert!(r.get("breakdown").is_none());
        // Every Stats field is there.
        let n = r["stats"]["per_node"][0].as_object().map(|m| m.len());
        assert_eq!(n, Some(stats_json(&Stats::default()).len()));
    }

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
