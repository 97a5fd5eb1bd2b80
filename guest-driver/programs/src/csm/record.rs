//! The machine-readable result of one run (`mc-guest csm APP --json FILE`):
//! one JSON object per run, appended as one line to FILE by node 0 once it
//! has every node's report (`dsm_core::gather`). `mc-host report` reads
//! these lines; docs/applications.md describes the fields.
//!
//! What every program on Cashmere shares (a node's report, its counters
//! and time breakdown as JSON, appending a line: `dsm_core::record`, which
//! libcsm's C programs use too) is re-exported here; this module adds a
//! node's report from its [`Outcome`] and the record of an application's
//! run ([`build`]).

use serde_json::{json, Map, Value};

pub use dsm_core::record::{
    append, breakdown_json, stats_json, total, virtual_breakdown_json, NodeReport, RecordError,
    RunContext, SCHEMA,
};

use super::params::Params;
use super::run::Outcome;

/// What this node contributes to the record, from its run's outcome.
pub fn node_report(o: &Outcome) -> NodeReport {
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

/// The run's times in virtual time, for the record's `times` object:
/// `clock` ("wall" or "virtual"), and in virtual time `predicted_s` (from
/// the earliest start of the timed part on any node to its latest end, on
/// the virtual clock), `work` (what measured computing: `counted` or
/// `cpu-time`), `reference_processor` (whose committed rates set the
/// scales, or null), `cpu_scale`, `protocol_scale` (the scale of
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
    // What measured computing, and the processor whose committed rates
    // set the scales (none: the scales the run named, or this host's).
    m.insert("work".into(), json!(config.work.as_str()));
    m.insert(
        "reference_processor".into(),
        json!(config.reference.map(|r| r.name)),
    );
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
        // The DSM protocol (`--protocol`); `variant` is Cashmere's.
        "protocol": p.protocol.name(),
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

#[cfg(test)]
mod tests {
    use dsm_core::Stats;

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
}
