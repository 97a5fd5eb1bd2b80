//! What a node says when the run ends, as `mc-guest csm` says it:
//! `CSM_STATS=1` prints its Cashmere counters and where each process's time
//! went; `CSM_JSON=FILE` has node 0 append the run's record (the same
//! fields as `mc-guest csm --json`'s where they apply, docs/applications.md;
//! `app` is the program's name, `kind` says it is a C program).

use dsm_core::gather;
use dsm_core::record::{self, NodeReport, RunContext};
use dsm_core::Stats;
use dsm_select::ProtocolName;
use serde_json::{json, Map, Value};

use crate::runtime::{RunError, Runtime};

pub fn report(rt: &Runtime, stats: &Stats) -> Result<(), RunError> {
    let breakdowns = rt
        .breakdowns
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if let Some(p) = rt.csm.predicted() {
        println!(
            "csm {} node {}: predicted {p:.6} s (virtual clock)",
            rt.program, rt.me
        );
    }
    if rt.settings.stats {
        println!(
            "csm {} node {}: {} processes ({} nodes x {}), {}: {stats}",
            rt.program,
            rt.me,
            rt.procs,
            rt.nodes,
            rt.threads,
            match rt.settings.protocol {
                // Cashmere's runs say their variant, as they always have.
                ProtocolName::Cashmere => format!("variant {}", rt.settings.variant.name()),
                other => format!("protocol {other}"),
            }
        );
        for b in &breakdowns {
            println!("csm time {b}");
        }
        if let Some(p) = rt.csm.protocol_breakdown() {
            println!("csm time {p}");
        }
    }
    let Some(path) = &rt.settings.json else {
        return Ok(());
    };
    let roi = {
        let r = rt.roi.lock().unwrap_or_else(|p| p.into_inner());
        match *r {
            (Some(a), Some(b)) if b >= a => Some((b - a).as_secs_f64()),
            _ => None,
        }
    };
    let mine = NodeReport {
        node: rt.me,
        seconds: roi.or_else(|| rt.csm.timed()),
        total_seconds: rt.started_at.elapsed().as_secs_f64(),
        sequential_seconds: None,
        checked: 0,
        summary: format!("{} on {} processes", rt.program, rt.procs),
        stats: record::stats_json(stats),
        compute_stats: None,
        breakdown: record::breakdown_json(&breakdowns),
        // A C program has no sequential version of its own here.
        sequential_cpu_seconds: None,
        virtual_window: rt.csm.virtual_window(),
        virtual_breakdown: None,
        quantum_breaks: mc_api::vclock::quantum_breaks(),
    };
    let all = gather::collect(&rt.mc, &mine).map_err(|e| RunError::Record(e.to_string()))?;
    if let Some(all) = all {
        let ctx = RunContext::from_env(rt.nodes, rt.mc.registers().link_timing);
        record::append(path, &build(rt, &ctx, &all, roi.is_some()))
            .map_err(|e| RunError::Record(e.to_string()))?;
    }
    Ok(())
}

fn build(rt: &Runtime, ctx: &RunContext, reports: &[NodeReport], roi: bool) -> Value {
    let per_node = |f: &dyn Fn(&NodeReport) -> Map<String, Value>| -> Value {
        let v: Vec<Map<String, Value>> = reports.iter().map(f).collect();
        json!({ "total": record::total(&v), "per_node": v })
    };
    let max =
        |f: &dyn Fn(&NodeReport) -> Option<f64>| reports.iter().filter_map(f).reduce(f64::max);
    let s = &rt.settings;
    let mut out = json!({
        "schema": record::SCHEMA,
        "kind": "c",
        "app": rt.program,
        "args": std::env::args().skip(1).collect::<Vec<_>>(),
        "summary": reports.first().map(|r| r.summary.clone()),
        "nodes": ctx.nodes,
        "threads": rt.threads,
        "processors": rt.procs,
        "levels": if s.one_level || rt.threads == 1 { 1 } else { 2 },
        "variant": s.variant.name(),
        "delivery": ctx.delivery,
        "seed": ctx.seed,
        "link": ctx.link,
        "homes": "first_touch",
        "home_writes": if s.home_direct { "direct" } else { "diffs" },
        "detection": s.detection.name(),
        "page_size": s.page_size,
        "heap_bytes": rt.heap_len,
        "reliable": rt.mc.is_reliable(),
        "times": {
            "compute_s": max(&|r| r.seconds),
            "compute_is": if roi { "roi" } else { "processes" },
            "total_s": max(&|r| Some(r.total_seconds)),
            "per_node": reports.iter().map(|r| json!({
                "node": r.node, "compute_s": r.seconds, "total_s": r.total_seconds,
            })).collect::<Vec<_>>(),
        },
        "counters_until": "finish",
        "stats": per_node(&|r| r.stats.clone()),
    });
    let breakdowns: Option<Vec<Map<String, Value>>> =
        reports.iter().map(|r| r.breakdown.clone()).collect();
    if let (Some(b), Some(obj)) = (breakdowns, out.as_object_mut()) {
        obj.insert(
            "breakdown".into(),
            json!({ "total": record::total(&b), "per_node": b }),
        );
    }
    out
}
