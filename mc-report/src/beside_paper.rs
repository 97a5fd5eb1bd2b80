//! report.md's summary of seed 000 Table IV: for every one of the ten
//! applications and every variant the paper measured, the speedup here at
//! 32 processors (8:4 under Cashmere-2L, the paper's 32:4, and 8:4/1L)
//! beside the paper's, with the counters Table IV lists. Each application
//! shows its largest preset that has 32-processor runs, and a preset
//! smaller than the paper's says so; an application with no paper-preset
//! run is named under the table.

use std::fmt::Write;

use crate::matrix::{ClusterShape, APPS, PRESETS};
use crate::paper::{self, Table4Cell, TABLE4_VARIANTS};
use crate::results::{ResultSet, RunRecord, Speedup};

const TWO_LEVEL: ClusterShape = ClusterShape {
    nodes: 8,
    threads: 4,
    one_level: false,
};
const ONE_LEVEL: ClusterShape = ClusterShape {
    nodes: 8,
    threads: 4,
    one_level: true,
};

/// The largest preset of `app` with a run at 32 processors.
fn preset_at_32(set: &ResultSet, app: &str) -> Option<&'static str> {
    PRESETS.iter().rev().copied().find(|p| {
        set.records.iter().any(|r| {
            !r.baseline()
                && r.app() == app
                && r.preset() == *p
                && r.shape().is_some_and(|s| s.processors() == 32)
        })
    })
}

fn speedup(set: &ResultSet, r: Option<&RunRecord>) -> String {
    match r.map(|r| set.speedup_of(r)) {
        None => "-".into(),
        Some(Speedup::Value(s)) => format!("{s:.1}"),
        Some(Speedup::Failed) => "failed".into(),
        Some(Speedup::Oversubscribed) => "oversubscribed".into(),
        Some(Speedup::NoBaseline) => "n/a (no baseline)".into(),
    }
}

/// `here / paper`, in thousands.
fn kilo(here: Option<u64>, paper: Option<f64>) -> String {
    let h = here.map_or("n/a".to_string(), |v| format!("{:.1}", v as f64 / 1000.0));
    match paper {
        Some(p) => format!("{h} / {p}"),
        None => format!("{h} / -"),
    }
}

fn migrations(r: Option<&RunRecord>, cell: Option<Table4Cell>) -> String {
    let here = r.map_or("n/a".to_string(), |r| {
        let done = r.stat("migrations").unwrap_or(0);
        match r.stat("migration_attempts") {
            Some(a) if a > 0 => format!("{:.1} ({:.1})", done as f64 / 1000.0, a as f64 / 1000.0),
            _ => format!("{:.1}", done as f64 / 1000.0),
        }
    });
    let paper = match cell.and_then(|c| c.migrations_k) {
        None => "-".to_string(),
        Some((m, Some(a))) => format!("{m} ({a})"),
        Some((m, None)) => format!("{m}"),
    };
    format!("{here} / {paper}")
}

/// The variants to show for `app` at `preset`: the paper's that were run,
/// then any others run (CSM-ADB), in the results' order.
fn variants_run(set: &ResultSet, app: &str, preset: &str) -> Vec<String> {
    let run = |v: &str| {
        set.get(app, preset, v, TWO_LEVEL).is_some() || set.get(app, preset, v, ONE_LEVEL).is_some()
    };
    let mut out: Vec<String> = TABLE4_VARIANTS
        .iter()
        .filter(|v| run(v))
        .map(|v| v.to_string())
        .collect();
    for v in set.variants() {
        if !out.contains(&v) && run(&v) {
            out.push(v);
        }
    }
    out
}

/// The section.
pub fn beside_paper(set: &ResultSet, out: &mut String) {
    let _ = writeln!(
        out,
        "## Table IV beside the paper: speedups at 32 processors\n"
    );
    let _ = writeln!(
        out,
        "| application | preset | variant | speedup 8:4 (2L) | speedup 8:4/1L | paper: speedup (32:4) | page transfers (K): here / paper | diffs (K): here / paper | migrations (K, attempts): here / paper |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    let mut not_at_paper = Vec::new();
    for app in APPS {
        let name = paper::display_name(app);
        let preset = preset_at_32(set, app);
        if preset != Some("paper") {
            not_at_paper.push(app);
        }
        let Some(preset) = preset else {
            let dms = paper::table4(app, "dms").map_or("-".into(), |c| format!("{}", c.speedup));
            let _ = writeln!(
                out,
                "| {name} | - | (not run at 32 processors) | - | - | {dms} (CSM-DMS) | - | - | - |"
            );
            continue;
        };
        let label = if preset == "paper" {
            "paper".to_string()
        } else {
            format!("{preset} (a smaller problem than the paper's)")
        };
        for v in variants_run(set, app, preset) {
            let two = set.get(app, preset, &v, TWO_LEVEL);
            let one = set.get(app, preset, &v, ONE_LEVEL);
            let counted = two.or(one);
            // (+): the counters also include verification.
            let plus = match counted {
                Some(r) if r.ok() && !r.counters_at_compute_end() => " (+)",
                _ => "",
            };
            let cell = paper::table4(app, &v);
            let _ = writeln!(
                out,
                "| {name} | {label} | {} | {} | {} | {} | {}{plus} | {}{plus} | {} |",
                paper::variant_name(&v),
                speedup(set, two),
                speedup(set, one),
                cell.map_or("-".into(), |c| format!("{}", c.speedup)),
                kilo(
                    counted.and_then(|r| r.stat("page_transfers")),
                    cell.map(|c| c.page_transfers_k)
                ),
                kilo(
                    counted.and_then(|r| r.stat("diffs")),
                    cell.map(|c| c.diffs_k)
                ),
                migrations(counted, cell),
            );
        }
    }
    let _ = writeln!(
        out,
        "\nSpeedup: the sequential time of Table III over the run's time ({} time). Counters: the 8:4 \
         (2L) run's cluster totals, or the 8:4/1L run's where there is no 2L run; (+): they \
         also include verification (the program keeps no end-of-computation snapshot). Paper: seed 000 \
         Table IV (32 processors as 8 nodes of 4, Cashmere-2L; it has no CSM-ADB column). A preset \
         smaller than the paper's has less computation per page shared, so its speedups are not the \
         paper's to match; docs/fidelity.md compares the two per variant.",
        set.basis.axis_unit()
    );
    if !not_at_paper.is_empty() {
        let names: Vec<String> = not_at_paper
            .iter()
            .map(|a| {
                let failed = set
                    .records
                    .iter()
                    .any(|r| !r.baseline() && !r.ok() && r.app() == *a && r.preset() == "paper");
                let why = if failed {
                    " (its paper-preset runs failed: see \"Runs that failed\")"
                } else {
                    ""
                };
                format!("{}{why}", paper::display_name(a))
            })
            .collect();
        let _ = writeln!(
            out,
            "\nNot run at the paper preset at 32 processors in this results file: {} \
             (docs/applications.md says which cannot finish at the paper preset on a small host, \
             and why).",
            names.join(", ")
        );
    }
    let _ = writeln!(out, "\n*{}*\n", set.time_line());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::RunRecord;
    use serde_json::json;

    fn run(app: &str, preset: &str, variant: &str, shape: (u32, u32, u32), t: f64) -> RunRecord {
        let (nodes, threads, levels) = shape;
        RunRecord {
            v: json!({
                "app": app, "preset": preset, "variant": variant, "nodes": nodes,
                "threads": threads, "levels": levels,
                "times": {"compute_s": t}, "counters_until": "compute_end",
                "stats": {"total": {"page_transfers": 12345, "diffs": 500,
                                    "migrations": 0}},
                "run": {"key": format!("{app}|{preset}|{variant}|{nodes}:{threads}/{levels}"),
                        "status": "ok", "baseline": false},
            }),
        }
    }

    fn baseline(app: &str, preset: &str, t: f64) -> RunRecord {
        RunRecord {
            v: json!({
                "app": app, "preset": preset, "variant": "dms", "nodes": 1, "threads": 1,
                "levels": 1, "times": {"compute_s": t, "sequential_s": t},
                "run": {"key": format!("{app}|{preset}|base"), "status": "ok", "baseline": true},
            }),
        }
    }

    #[test]
    fn every_application_is_shown_beside_the_paper_and_smaller_presets_say_so() {
        let set = ResultSet::new(vec![
            baseline("sor", "paper", 32.0),
            run("sor", "paper", "dms", (8, 4, 2), 2.0),
            run("sor", "paper", "dms", (8, 4, 1), 4.0),
            baseline("sor", "medium", 1.0),
            run("sor", "medium", "dms", (8, 4, 2), 0.5),
            baseline("gauss", "medium", 1.0),
            run("gauss", "medium", "dms", (8, 4, 2), 0.25),
            run("gauss", "medium", "none-mg", (8, 4, 2), 0.5),
            run("gauss", "medium", "adb", (8, 4, 2), 0.2),
            run("lu", "paper", "dms", (4, 2, 2), 1.0),
        ])
        .with_basis(crate::clock::TimeBasis::Wall);
        let mut md = String::new();
        beside_paper(&set, &mut md);
        // The paper preset wins over the medium one; both shapes shown.
        assert!(
            md.contains("| SOR | paper | CSM-DMS | 16.0 | 8.0 | 31.2 | 12.3 / 0.3 | 0.5 / 1.4 |"),
            "{md}"
        );
        assert!(!md.contains("| SOR | medium"), "{md}");
        // A medium-only application is labelled a smaller problem, with the
        // paper's column of its variant and ADB (no paper column) after.
        assert!(
            md.contains(
                "| Gauss | medium (a smaller problem than the paper's) | CSM-DMS | 4.0 | - | 22.7 |"
            ),
            "{md}"
        );
        assert!(md.contains("| CSM-None-Mg | 2.0 | - | 21.9 |"), "{md}");
        assert!(md.contains("| CSM-ADB | 5.0 | - | - |"), "{md}");
        let dms = md
            .find("Gauss | medium (a smaller problem than the paper's) | CSM-DMS")
            .unwrap();
        let adb = md.find("| CSM-ADB |").unwrap();
        assert!(dms < adb, "the paper's variants first: {md}");
        // LU ran only at 8 processors; Barnes not at all.
        assert!(
            md.contains("| LU | - | (not run at 32 processors) |"),
            "{md}"
        );
        assert!(
            md.contains("| Barnes | - | (not run at 32 processors) |"),
            "{md}"
        );
        let note = md
            .lines()
            .find(|l| l.starts_with("Not run at the paper preset"))
            .expect("the applications without a paper-preset run are named");
        assert!(note.contains("Barnes") && note.contains("Gauss") && !note.contains("SOR"));
        for a in APPS {
            assert!(
                md.contains(&format!("| {} |", paper::display_name(a))),
                "{a}: {md}"
            );
        }
    }
}
