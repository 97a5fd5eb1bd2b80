//! report.md: seed 000 Table III (applications, sizes, sequential times)
//! and Table IV (per protocol variant: execution time, speedup, page
//! transfers, diffs, write notices, migrations, messages, data volume;
//! cluster totals) as measured here, next to the paper's figures, with the
//! host under every table.

use std::fmt::Write;
use std::path::Path;

use crate::clock::TimeBasis;
use crate::paper;
use crate::results::{ResultSet, RunRecord, Speedup};

fn count(v: Option<u64>) -> String {
    v.map_or("n/a".to_string(), |v| v.to_string())
}

fn secs(v: Option<f64>) -> String {
    match v {
        None => "n/a".to_string(),
        Some(v) if v < 0.01 => format!("{v:.4}"),
        Some(v) => format!("{v:.3}"),
    }
}

fn scale(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

fn mib(b: Option<u64>) -> String {
    b.map_or("n/a".to_string(), |b| {
        format!("{:.2} MiB", b as f64 / (1 << 20) as f64)
    })
}

/// Speedup, or why there is none.
fn speedup(set: &ResultSet, r: &RunRecord) -> String {
    match set.speedup_of(r) {
        Speedup::Value(s) => format!("{s:.2}"),
        Speedup::Failed => "failed".into(),
        Speedup::Oversubscribed => "oversubscribed".into(),
        Speedup::NoBaseline => "n/a (no baseline)".into(),
    }
}

fn table3(set: &ResultSet, out: &mut String) {
    let _ = writeln!(
        out,
        "## Table III: applications, problem sizes, sequential times\n"
    );
    // On the virtual clock: the scales the application's runs used.
    let scaled = set.basis == TimeBasis::Predicted;
    let _ = writeln!(
        out,
        "| application | preset | problem | shared data | sequential here (s) | paper: problem | paper: sequential (s) |{}",
        if scaled { " CPU scale | protocol scale |" } else { "" }
    );
    let _ = writeln!(
        out,
        "|---|---|---|---|---|---|---|{}",
        if scaled { "---|---|" } else { "" }
    );
    for (app, preset) in set.apps() {
        let base = set.baseline(&app, &preset);
        let any = base.or_else(|| {
            set.records
                .iter()
                .find(|r| r.app() == app && r.preset() == preset)
        });
        let (paper_size, paper_s) = paper::table3(&app).map_or(("?", None), |(s, t)| (s, Some(t)));
        let scales = match (scaled, set.scales(&app, &preset)) {
            (false, _) => String::new(),
            (true, None) => " - | - |".to_string(),
            (true, Some((c, p))) => format!(" {} | {} |", scale(c), scale(p)),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |{scales}",
            paper::display_name(&app),
            preset,
            any.map_or("?".to_string(), RunRecord::problem),
            mib(any.and_then(RunRecord::footprint_bytes)),
            secs(set.sequential_s(&app, &preset)),
            paper_size,
            secs(paper_s)
        );
    }
    let timed = match set.basis {
        TimeBasis::Wall => "timed on node 0 of a 1-node run",
        TimeBasis::Predicted => {
            "its CPU time on node 0 of a 1-node run times the CPU scale of the application's runs \
             (at the `paper` scale, Table III's time by construction)"
        }
    };
    let _ = writeln!(
        out,
        "\nSequential: the application without Cashmere (plain vectors), {timed}; \
         the paper's on a 600 MHz Alpha 21164A. Shared data: what the problem allocates in Cashmere's heap \
         (the paper's megabytes are its data sizes).{}\n\n*{}*\n",
        if scaled {
            " CPU scale: virtual ns per ns of this host's CPU time for the application's \
             computing; protocol scale: the same for Cashmere's protocol work (at the `paper` \
             scale, from Table II: docs/virtual-time.md s.1)."
        } else {
            ""
        },
        set.time_line()
    );
}

fn table4(set: &ResultSet, out: &mut String) {
    let _ = writeln!(
        out,
        "## Table IV: execution time and protocol counters per variant (cluster totals)\n"
    );
    for (app, preset) in set.apps() {
        let _ = writeln!(out, "### {} ({preset})\n", paper::display_name(&app));
        let _ = writeln!(
            out,
            "| config | paper's notation | protocol | variant | time (s) | speedup | page transfers | diffs | write notices | migrations | messages | data (KiB) |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|");
        let mut rows = 0;
        for v in set.variants() {
            for s in set.shapes() {
                let Some(r) = set.get(&app, &preset, &v, s) else {
                    continue;
                };
                rows += 1;
                let dagger = if r.ok() && !r.counters_at_compute_end() {
                    " (+)"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "| {s} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}{dagger} |",
                    s.paper(),
                    s.levels(),
                    paper::variant_name(&v),
                    secs(set.compute_s(r)),
                    speedup(set, r),
                    count(r.stat("page_transfers")),
                    count(r.stat("diffs")),
                    count(r.stat("write_notices_sent")),
                    count(r.stat("migrations")),
                    count(r.stat("messages_sent")),
                    r.data_bytes()
                        .map_or("n/a".to_string(), |b| format!("{:.1}", b as f64 / 1024.0)),
                );
            }
        }
        if rows == 0 {
            let _ = writeln!(out, "| (no runs) |||||||||||");
        }
        if let Some((sp, pt, d)) = paper::table4_dms(&app) {
            let _ = writeln!(
                out,
                "\nPaper, CSM-DMS at 32 processors (32:4): speedup {sp}, page transfers {pt}K, diffs {d}K."
            );
        }
        let _ = writeln!(out, "\n*{}*\n", set.time_line());
    }
    let (time, guard) = match set.basis {
        TimeBasis::Wall => (
            "the timed computation (after initialisation, before verification), slowest node",
            "; \"oversubscribed\" where nodes x threads exceeds the host's cores (the virtual nodes, \
             their protocol threads and the hub then share the cores, so the figure would measure the \
             host, not Cashmere)",
        ),
        TimeBasis::Predicted => (
            "the timed computation (after initialisation, before verification) on the virtual \
             clock, from its earliest start on any node to its latest end: the predicted time on \
             Memory Channel 2 hardware (docs/virtual-time.md)",
            "",
        ),
    };
    let _ = writeln!(
        out,
        "Config is NODES:THREADS; the paper writes processors:processors-per-node. 1L: one thread per \
         node, or each thread its own protocol node (NODES:THREADS/1L; Cashmere-1L); 2L: several \
         threads sharing a node's memory. Time: {time}. Speedup: the sequential time of \
         Table III over that time{guard}. Page transfers: pages fetched from a remote home. \
         Write notices: sent. Messages: request messages sent (page fetches). Data: page transfers x \
         page size + diff bytes. Counters run from Cashmere's start to the end of the computation; \
         (+) marks runs whose counters also include verification (the program keeps no end-of-\
         computation snapshot). Migrations: homes that moved to a writer (the -Mg variants and ADB; 0 \
         elsewhere).\n"
    );
}

/// Seed 000 Table II: the protocol operations' costs, measured by `mc-guest
/// bench csm` under CSM-DMS (remote writes: the MC Direct column) and
/// CSM-None (explicit messages: the MC Messages column), beside the
/// paper's.
fn table2(set: &ResultSet, out: &mut String) {
    // On the predicted basis, the records of virtual-clock runs (their
    // rows carry `predicted_us`); else, or without such records, any.
    let field = match set.basis {
        TimeBasis::Predicted => "predicted_us",
        TimeBasis::Wall => "here_us",
    };
    let all: Vec<&RunRecord> = set.table2.iter().filter(|r| r.ok()).collect();
    let on_basis: Vec<&RunRecord> = all
        .iter()
        .copied()
        .filter(|r| {
            (r.v["clock"].as_str() == Some("virtual")) == (set.basis == TimeBasis::Predicted)
        })
        .collect();
    let (ok, field) = if on_basis.is_empty() {
        (all, "here_us")
    } else {
        (on_basis, field)
    };
    let _ = writeln!(
        out,
        "## Table II: costs of protocol operations (microseconds)
"
    );
    if ok.is_empty() {
        let _ = writeln!(
            out,
            "Not measured: the results hold no `mc-guest bench csm --json` record (`report run` \
             adds them unless `--no-table2`).\n"
        );
        return;
    }
    let by = |variant: &str| ok.iter().find(|r| r.v["variant"].as_str() == Some(variant));
    let (direct, messages) = (by("dms"), by("none"));
    let ops: Vec<&str> = ok
        .iter()
        .flat_map(|r| r.v["rows"].as_array().into_iter().flatten())
        .filter_map(|row| row["operation"].as_str())
        .fold(Vec::new(), |mut v, o| {
            if !v.contains(&o) {
                v.push(o);
            }
            v
        });
    let row_of = |r: Option<&&RunRecord>, op: &str| -> Option<serde_json::Value> {
        r?.v["rows"]
            .as_array()?
            .iter()
            .find(|row| row["operation"].as_str() == Some(op))
            .cloned()
    };
    let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let _ = writeln!(
        out,
        "| operation | paper: MC Direct | paper: MC Messages | here: CSM-DMS | here: CSM-None |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for op in ops {
        let d = row_of(direct, op);
        let m = row_of(messages, op);
        let paper = d.as_ref().or(m.as_ref());
        let mark = |r: &Option<serde_json::Value>| match r {
            Some(r) if r["by_messages"].as_bool() == Some(true) => " (msg)",
            _ => "",
        };
        let _ = writeln!(
            out,
            "| {op} | {} | {} | {}{} | {}{} |",
            us(paper.and_then(|p| p["mc_direct_us"].as_f64())),
            us(paper.and_then(|p| p["mc_messages_us"].as_f64())),
            us(d.as_ref().and_then(|r| r[field].as_f64())),
            mark(&d),
            us(m.as_ref().and_then(|r| r[field].as_f64())),
            mark(&m),
        );
    }
    let what = if field == "predicted_us" {
        "microseconds predicted by the virtual clock for Memory Channel 2 (CPU parts at this host's \
         processor speed)"
    } else {
        "wall-clock microseconds on this host"
    };
    let nodes = ok.iter().find_map(|r| r.v["nodes"].as_u64()).unwrap_or(2);
    let _ = writeln!(
        out,
        "\nMedians of `mc-guest bench csm --variant dms|none` on {nodes} virtual nodes, {what} \
         (node 0 asks, node 1 is the home or lock manager); (msg): done by \
         explicit messages, to compare with the MC Messages column. Paper: seed 000 Table II (Memory \
         Channel II, 600 MHz Alpha 21164A).\n"
    );
}

/// Seed 000 Fig. 4's adaptive broadcast (CSM-ADB): pages placed in the
/// broadcast buffers and the fetches they saved, per application and shape.
fn adb_table(set: &ResultSet, out: &mut String) {
    let rows: Vec<&RunRecord> = set
        .records
        .iter()
        .filter(|r| r.ok() && !r.baseline() && r.variant() == "adb")
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Fig. 4: adaptive broadcast (CSM-ADB) placements and hits
"
    );
    let _ = writeln!(
        out,
        "| application | preset | config | placements | hits | invalidations | page transfers | hits per placement |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for r in rows {
        let (p, h) = (r.stat("adb_placements"), r.stat("adb_hits"));
        let per = match (p, h) {
            (Some(p), Some(h)) if p > 0 => format!("{:.1}", h as f64 / p as f64),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {per} |",
            paper::display_name(r.app()),
            r.preset(),
            r.shape().map_or("?".into(), |s| s.to_string()),
            count(p),
            count(h),
            count(r.stat("adb_invalidations")),
            count(r.stat("page_transfers")),
        );
    }
    let _ = writeln!(
        out,
        "\nPlacements: pages a home put in the broadcast buffers (widely read pages, seed 000 \
         s.2.3.3); hits: fetches answered from a buffer instead of the home; invalidations: buffered \
         copies withdrawn after a write.\n"
    );
}

/// The whole report.md.
pub fn report_md(set: &ResultSet, results: &Path, charts: &[String]) -> String {
    let mut out = String::new();
    let runs = set.records.len();
    let failed = set.failed().len();
    let (per, all) = set.run_time();
    let minutes = |s: f64| format!("{:.1} min", s / 60.0);
    let parts = if per.len() > 1 {
        let parts: Vec<String> = per
            .iter()
            .map(|(p, t)| format!("{p} {}", minutes(*t)))
            .collect();
        format!("{}; ", parts.join(", "))
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "# Cashmere on the emulated Memory Channel: seed 000's tables, measured\n\n\
         From `{}`: {runs} runs ({failed} failed), which took {} of wall-clock time in all \
         ({parts}each run's own, as `report run` recorded it). Generated by `mc-host report \
         render`.\n\n*{}*\n",
        results.display(),
        minutes(all),
        set.time_line()
    );
    table2(set, &mut out);
    table3(set, &mut out);
    crate::beside_paper::beside_paper(set, &mut out);
    table4(set, &mut out);
    adb_table(set, &mut out);
    crate::seed001::seed001(set, &mut out);
    let _ = writeln!(out, "## Charts\n");
    for c in charts {
        let _ = writeln!(out, "![{c}]({c})\n");
    }
    if !charts.iter().any(|c| c.starts_with("breakdown")) {
        let _ = writeln!(
            out,
            "No time breakdown (seed 000 Figs. 2-3): the records carry none (they come from runs \
             without `mc-guest csm --stats`).\n"
        );
    }
    if failed > 0 {
        let _ = writeln!(out, "## Runs that failed\n");
        for r in set.failed() {
            let _ = writeln!(
                out,
                "- {} {} {} {}: log `{}`",
                r.app(),
                r.preset(),
                r.variant(),
                r.shape().map_or("?".into(), |s| s.to_string()),
                r.log().unwrap_or("?")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(v: serde_json::Value) -> RunRecord {
        RunRecord { v }
    }

    #[test]
    fn table2_and_adb_placements_are_shown_beside_the_paper() {
        let t2 = |variant: &str, here: f64, msg: bool| {
            rec(json!({
                "schema": 1, "kind": "table2", "variant": variant, "nodes": 2, "clock": "wall",
                "rows": [{"operation": "lock acquire (+release)", "mc_direct_us": 10.0,
                          "mc_messages_us": 33.0, "here_us": here, "by_messages": msg}],
                "run": {"key": format!("table2|{variant}"), "status": "ok"},
            }))
        };
        let adb = rec(json!({
            "app": "gauss", "preset": "small", "variant": "adb", "nodes": 2, "threads": 1,
            "levels": 1, "stats": {"total": {"adb_placements": 4, "adb_hits": 10,
            "adb_invalidations": 1, "page_transfers": 7}},
            "run": {"key": "gauss|adb", "status": "ok"},
        }));
        let set = ResultSet::new(vec![t2("dms", 12.5, false), t2("none", 40.0, true), adb]);
        assert_eq!(set.records.len(), 1, "Table II records are not runs");
        let md = report_md(&set, Path::new("r.jsonl"), &[]);
        assert!(
            md.contains("| lock acquire (+release) | 10.0 | 33.0 | 12.5 | 40.0 (msg) |"),
            "{md}"
        );
        assert!(
            md.contains("| Gauss | small | 2:1 | 4 | 10 | 1 | 7 | 2.5 |"),
            "{md}"
        );
        let none = report_md(&ResultSet::new(vec![]), Path::new("r.jsonl"), &[]);
        assert!(none.contains("Not measured"), "{none}");
    }

    #[test]
    fn the_report_says_how_long_its_runs_took() {
        let run = |preset: &str, key: &str, wall: f64| {
            rec(json!({
                "app": "sor", "preset": preset, "variant": "dms", "nodes": 2, "threads": 1,
                "times": {"compute_s": 1.0},
                "run": {"key": key, "status": "ok", "wall_s": wall},
            }))
        };
        let set = ResultSet::new(vec![
            run("paper", "a", 3000.0),
            run("medium", "b", 60.0),
            run("medium", "c", 30.0),
        ]);
        let md = report_md(&set, Path::new("r.jsonl"), &[]);
        assert!(
            md.contains("3 runs (0 failed), which took 51.5 min of wall-clock time in all"),
            "{md}"
        );
        assert!(
            md.contains("(medium 1.5 min, paper 50.0 min; each run's own"),
            "{md}"
        );
    }

    #[test]
    fn table3_on_the_virtual_clock_gives_the_runs_scales() {
        let base = rec(json!({
            "app": "sor", "preset": "paper", "variant": "dms", "nodes": 1, "threads": 1,
            "times": {"compute_s": 0.4, "sequential_cpu_s": 0.362, "sequential_s": 0.4},
            "run": {"key": "sor|base", "status": "ok", "baseline": true},
        }));
        let run = rec(json!({
            "app": "sor", "preset": "paper", "variant": "dms", "nodes": 8, "threads": 4,
            "times": {"compute_s": 1.0, "predicted_s": 2.0, "cpu_scale": 100.0,
                      "protocol_scale": 24.1},
            "run": {"key": "sor|8:4", "status": "ok"},
        }));
        let set = ResultSet::new(vec![base, run]).with_basis(TimeBasis::Predicted);
        let mut md = String::new();
        table3(&set, &mut md);
        assert!(md.contains("| 36.200 | 100 | 24 |"), "{md}");
        assert!(md.contains("protocol scale"), "{md}");
        let mut wall = String::new();
        table3(&set.with_basis(TimeBasis::Wall), &mut wall);
        assert!(!wall.contains("protocol scale"), "{wall}");
    }

    #[test]
    fn table2_on_the_predicted_basis_shows_the_virtual_clock_s_costs() {
        let t2 = |variant: &str, clock: &str, here: f64, predicted: Option<f64>| {
            rec(json!({
                "schema": 1, "kind": "table2", "variant": variant, "nodes": 2, "clock": clock,
                "rows": [{"operation": "null message round trip", "mc_direct_us": 15.0,
                          "mc_messages_us": null, "here_us": here, "predicted_us": predicted,
                          "by_messages": false}],
                "run": {"key": format!("table2|{variant}|{clock}"), "status": "ok"},
            }))
        };
        let set = ResultSet::new(vec![
            t2("dms", "wall", 80.0, None),
            t2("dms", "virtual", 90.0, Some(14.2)),
        ]);
        let wall = report_md(&set, Path::new("r.jsonl"), &[]);
        assert!(
            wall.contains("| null message round trip | 15.0 | - | 80.0 | - |"),
            "{wall}"
        );
        assert!(wall.contains("wall-clock microseconds"), "{wall}");
        let predicted = set.with_basis(TimeBasis::Predicted);
        let md = report_md(&predicted, Path::new("r.jsonl"), &[]);
        assert!(
            md.contains("| null message round trip | 15.0 | - | 14.2 | - |"),
            "{md}"
        );
        assert!(md.contains("predicted by the virtual clock"), "{md}");
    }
}
