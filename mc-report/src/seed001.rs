//! report.md's seed 001 section: Table 5 (HLRC's speedups on 8 nodes)
//! beside the runs here under `--protocol hlrc --link clan` at 8:1, with
//! each ratio and the Spearman rank correlation of the seven; and the same
//! applications under Cashmere (CSM-DMS on Memory Channel 2) at 8:1 and
//! 8:4, the side by side that neither paper has (issue 40).

use std::fmt::Write;

use crate::matrix::{ClusterShape, SEED001_APPS, SEED001_PRESETS};
use crate::paper;
use crate::results::{ResultSet, RunRecord, Speedup};

const EIGHT_BY_ONE: ClusterShape = ClusterShape {
    nodes: 8,
    threads: 1,
    one_level: false,
};
const EIGHT_BY_FOUR: ClusterShape = ClusterShape {
    nodes: 8,
    threads: 4,
    one_level: false,
};

/// Which runs a column shows.
struct Column {
    protocol: &'static str,
    link: &'static str,
    shape: ClusterShape,
}

const HLRC: Column = Column {
    protocol: "hlrc",
    link: "clan",
    shape: EIGHT_BY_ONE,
};
const CSM_8_1: Column = Column {
    protocol: "cashmere",
    link: "mc2",
    shape: EIGHT_BY_ONE,
};
const CSM_8_4: Column = Column {
    protocol: "cashmere",
    link: "mc2",
    shape: EIGHT_BY_FOUR,
};

/// The latest run of `app` at `preset` in column `c` (Cashmere's as
/// CSM-DMS).
fn find<'a>(set: &'a ResultSet, app: &str, preset: &str, c: &Column) -> Option<&'a RunRecord> {
    set.records.iter().rev().find(|r| {
        !r.baseline()
            && r.app() == app
            && r.preset() == preset
            && r.protocol() == c.protocol
            && r.link() == c.link
            && r.shape() == Some(c.shape)
            && (c.protocol != "cashmere" || r.variant() == "dms")
    })
}

/// The preset `app`'s HLRC runs at 8:1 used: Table 1's if there is one,
/// else the largest of the others.
fn preset_of(set: &ResultSet, app: &str) -> Option<String> {
    let mut presets: Vec<String> = set
        .records
        .iter()
        .filter(|r| r.app() == app)
        .map(RunRecord::preset)
        .filter(|p| find(set, app, p, &HLRC).is_some())
        .collect();
    presets.sort_by_key(|p| crate::matrix::preset_rank(p));
    presets.pop()
}

/// How a preset relates to Table 1's size.
fn size_label(preset: &str) -> String {
    match preset {
        "seed001" => "Table 1's".to_string(),
        "seed001-scaled" => "scaled: SPLASH-2's default".to_string(),
        p => format!("scaled: {p}"),
    }
}

fn speedup_of(set: &ResultSet, r: Option<&RunRecord>) -> Option<f64> {
    r.and_then(|r| set.speedup(r))
}

fn cell(set: &ResultSet, r: Option<&RunRecord>) -> String {
    match r.map(|r| set.speedup_of(r)) {
        None => "-".into(),
        Some(Speedup::Value(s)) => format!("{s:.2}"),
        Some(Speedup::Failed) => "failed".into(),
        Some(Speedup::Oversubscribed) => "oversubscribed".into(),
        Some(Speedup::NoBaseline) => "n/a (no baseline)".into(),
    }
}

/// Ranks from 1, ties sharing their mean rank.
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        // Positions i..=j hold equal values: each gets their mean rank.
        let mean = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = mean;
        }
        i = j + 1;
    }
    r
}

/// Spearman's rank correlation: Pearson's correlation of the ranks (ties
/// at their mean rank). None with fewer than two pairs or when either side
/// has no spread.
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let (rx, ry) = (ranks(x), ranks(y));
    let n = rx.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let cov: f64 = rx.iter().zip(&ry).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = rx.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = ry.iter().map(|b| (b - my).powi(2)).sum();
    (vx > 0.0 && vy > 0.0).then(|| cov / (vx * vy).sqrt())
}

/// The seed 001 section, or nothing when the results hold no HLRC run of
/// its applications at 8:1 on the cLAN model.
pub fn seed001(set: &ResultSet, out: &mut String) {
    let apps: Vec<(&str, String)> = SEED001_APPS
        .iter()
        .filter_map(|&a| preset_of(set, a).map(|p| (a, p)))
        .collect();
    if apps.is_empty() {
        broadcast_whatif(set, out);
        return;
    }
    let _ = writeln!(
        out,
        "## Seed 001 Table 5: HLRC's speedups on 8 nodes, beside the paper's\n\n\
         HLRC (`--protocol hlrc`) at 8:1 on seed 001's cLAN VIA model (`--link clan`), one \
         application thread per node as in seed 001.\n"
    );
    let _ = writeln!(
        out,
        "| application | size | paper (Table 5) | here, predicted | here / paper |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for (app, preset) in &apps {
        let r = find(set, app, preset, &HLRC);
        let paper = paper::seed001_table5(app);
        let here = speedup_of(set, r);
        let ratio = match (here, paper) {
            (Some(h), Some(p)) => {
                ours.push(h);
                theirs.push(p);
                format!("{:.2}", h / p)
            }
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} ({}) | {} | {} | {ratio} |",
            paper::display_name(app),
            r.map_or("?".into(), RunRecord::problem),
            size_label(preset),
            paper.map_or("-".into(), |p| format!("{p:.1}")),
            cell(set, r),
        );
    }
    match spearman(&ours, &theirs) {
        Some(rho) => {
            let _ = writeln!(
                out,
                "\nSpearman rank correlation of the {} predicted speedups with the paper's: \
                 {rho:.2} (issue 40 asks at least 0.7 over all seven).",
                ours.len()
            );
        }
        None => {
            let _ = writeln!(
                out,
                "\nSpearman rank correlation: n/a ({} applications with a speedup).",
                ours.len()
            );
        }
    }
    let missing: Vec<&str> = SEED001_APPS
        .iter()
        .copied()
        .filter(|a| !apps.iter().any(|(x, _)| x == a))
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(out, "\nNot run: {}.", missing.join(", "));
    }
    if apps.iter().any(|(_, p)| p != SEED001_PRESETS[1]) {
        let _ = writeln!(
            out,
            "\nA size marked scaled is not Table 1's: Table 1's would run for more than 30 minutes \
             here (docs/hlrc.md), so the speedup is at a smaller problem than the paper's."
        );
    }
    let _ = writeln!(
        out,
        "\n## HLRC against Cashmere on seed 001's applications\n\n\
         Speedups on the virtual clock: HLRC on the cLAN model at 8:1 beside Cashmere (CSM-DMS) \
         on Memory Channel 2 at 8:1 and 8:4 (2L), same problem, same sequential baseline.\n"
    );
    let _ = writeln!(
        out,
        "| application | size | HLRC, cLAN, 8:1 | CSM-DMS, MC2, 8:1 | CSM-DMS, MC2, 8:4 |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    // Every size an application ran at in any of the columns.
    let mut presets: Vec<String> = set.records.iter().map(RunRecord::preset).collect();
    presets.sort_by_key(|p| (crate::matrix::preset_rank(p), p.clone()));
    presets.dedup();
    for app in SEED001_APPS {
        for preset in &presets {
            let cols = [&HLRC, &CSM_8_1, &CSM_8_4].map(|c| find(set, app, preset, c));
            if cols.iter().all(Option::is_none) {
                continue;
            }
            let _ = writeln!(
                out,
                "| {} | {preset} | {} | {} | {} |",
                paper::display_name(app),
                cell(set, cols[0]),
                cell(set, cols[1]),
                cell(set, cols[2]),
            );
        }
    }
    broadcast_whatif(set, out);
    let _ = writeln!(out, "\n*{}*\n", set.time_line());
}

/// Seed 001 s.6's what-if: HLRC whose barriers broadcast their notices
/// (`--protocol hlrc-broadcast`) beside HLRC with a barrier manager, on
/// the same application, size, link and shape.
fn broadcast_whatif(set: &ResultSet, out: &mut String) {
    let mut rows = Vec::new();
    for r in set
        .records
        .iter()
        .filter(|r| !r.baseline() && r.protocol() == "hlrc-broadcast")
    {
        let manager = set.records.iter().rev().find(|m| {
            !m.baseline()
                && m.protocol() == "hlrc"
                && m.app() == r.app()
                && m.preset() == r.preset()
                && m.link() == r.link()
                && m.shape() == r.shape()
        });
        let (Some(m), Some(b)) = (manager.and_then(|m| set.compute_s(m)), set.compute_s(r)) else {
            continue;
        };
        let Some(shape) = r.shape() else { continue };
        rows.push(format!(
            "| {} | {} | {}:{} | {} | {m:.4} | {b:.4} | {:.2} |",
            paper::display_name(r.app()),
            r.preset(),
            shape.nodes,
            shape.threads,
            r.link(),
            b / m
        ));
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n## What-if: HLRC's barriers by broadcast (seed 001 s.6)\n\n\
         `--protocol hlrc-broadcast`: every node broadcasts its barrier arrival with its notices \
         and merges all arrivals itself, beside HLRC's barrier manager (docs/hlrc.md). Seconds \
         of the timed part, the latest run of each.\n"
    );
    let _ = writeln!(
        out,
        "| application | size | shape | link | manager, s | broadcast, s | broadcast / manager |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for row in rows {
        let _ = writeln!(out, "{row}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::TimeBasis;
    use serde_json::json;

    #[test]
    fn spearman_ranks_with_ties() {
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]), Some(1.0));
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        assert_eq!(ranks(&[5.0, 1.0, 5.0, 2.0]), vec![3.5, 1.0, 3.5, 2.0]);
        assert_eq!(spearman(&[1.0, 1.0], &[1.0, 2.0]), None);
        assert_eq!(spearman(&[1.0], &[1.0]), None);
        // Table 5 against itself reversed in the middle: 1 - 6 sum d^2 / (n (n^2 - 1)).
        let paper: Vec<f64> = SEED001_APPS
            .iter()
            .map(|a| paper::seed001_table5(a).unwrap())
            .collect();
        let mut swapped = paper.clone();
        // Barnes 6.3 (rank 4) and FFT 5.8 (rank 2) exchanged: sum d^2 = 8.
        swapped.swap(0, 1);
        let rho = spearman(&paper, &swapped).unwrap();
        assert!(
            (rho - (1.0 - 6.0 * 8.0 / (7.0 * 48.0))).abs() < 1e-12,
            "{rho}"
        );
    }

    fn run(app: &str, protocol: &str, link: &str, threads: u32, predicted: f64) -> RunRecord {
        RunRecord {
            v: json!({
                "app": app, "preset": "seed001-scaled", "variant": "dms", "protocol": protocol,
                "link": link, "nodes": 8, "threads": threads, "levels": 2,
                "problem": {"m": 16},
                "times": {"compute_s": 1.0, "predicted_s": predicted, "cpu_scale": 1.0},
                "run": {"key": format!("{app}|{protocol}|{link}|{threads}"), "status": "ok"},
            }),
        }
    }

    fn baseline(app: &str, cpu: f64) -> RunRecord {
        RunRecord {
            v: json!({
                "app": app, "preset": "seed001-scaled", "variant": "dms", "nodes": 1,
                "threads": 1, "times": {"sequential_cpu_s": cpu, "sequential_s": cpu},
                "run": {"key": format!("{app}|baseline"), "status": "ok", "baseline": true},
            }),
        }
    }

    #[test]
    fn the_broadcast_what_if_shows_each_pair_beside_the_manager() {
        let records = vec![
            baseline("fft", 6.0),
            run("fft", "hlrc", "mc2", 1, 2.0),
            run("fft", "hlrc-broadcast", "mc2", 1, 1.5),
            // No manager run on that link: not a pair.
            run("fft", "hlrc-broadcast", "clan", 1, 1.0),
        ];
        let set = ResultSet::new(records).with_basis(TimeBasis::Predicted);
        let mut out = String::new();
        seed001(&set, &mut out);
        assert!(
            out.contains("What-if: HLRC's barriers by broadcast"),
            "{out}"
        );
        assert!(
            out.contains("| FFT | seed001-scaled | 8:1 | mc2 | 2.0000 | 1.5000 | 0.75 |"),
            "{out}"
        );
        assert!(!out.contains("| clan | "), "{out}");
        let mut none = String::new();
        seed001(
            &ResultSet::new(vec![
                baseline("fft", 6.0),
                run("fft", "hlrc", "clan", 1, 2.0),
            ])
            .with_basis(TimeBasis::Predicted),
            &mut none,
        );
        assert!(!none.contains("What-if"), "{none}");
    }

    #[test]
    fn table5_renders_from_records_beside_the_paper() {
        let records = vec![
            baseline("fft", 6.0),
            baseline("radix", 4.0),
            baseline("ocean", 8.0),
            run("fft", "hlrc", "clan", 1, 2.0),
            run("radix", "hlrc", "clan", 1, 2.0),
            run("ocean", "hlrc", "clan", 1, 1.0),
            run("fft", "cashmere", "mc2", 1, 1.5),
            run("fft", "cashmere", "mc2", 4, 1.0),
            // Another link or protocol is not Table 5's.
            run("lu", "hlrc", "mc2", 1, 1.0),
            // A failed run at Table 1's size is shown failed.
            RunRecord {
                v: json!({
                    "app": "water-spatial", "preset": "seed001", "protocol": "hlrc",
                    "link": "clan", "nodes": 8, "threads": 1, "levels": 1,
                    "run": {"key": "ws", "status": "failed"},
                }),
            },
            run("barnes", "naive", "clan", 1, 1.0),
        ];
        let set = ResultSet::new(records).with_basis(TimeBasis::Predicted);
        let mut out = String::new();
        seed001(&set, &mut out);
        // FFT 6 / 2 = 3.00 against 5.8; Radix 2.00 against 4.3; Ocean 8.00 against 7.7.
        assert!(
            out.contains("| FFT | m 16 (scaled: SPLASH-2's default) | 5.8 | 3.00 | 0.52 |"),
            "{out}"
        );
        assert!(out.contains("| Radix | m 16 (scaled: SPLASH-2's default) | 4.3 | 2.00 | 0.47 |"));
        assert!(out.contains("| Ocean | m 16 (scaled: SPLASH-2's default) | 7.7 | 8.00 | 1.04 |"));
        // Ranks (2, 1, 3) both ways.
        assert!(
            out.contains("of the 3 predicted speedups with the paper's: 1.00"),
            "{out}"
        );
        assert!(
            out.contains("Not run: barnes, lu, water-nsquared."),
            "{out}"
        );
        assert!(
            out.contains("| Water-Spatial | ? (Table 1's) | 6.7 | failed | - |"),
            "{out}"
        );
        assert!(
            out.contains("| FFT | seed001-scaled | 3.00 | 4.00 | 6.00 |"),
            "{out}"
        );
        assert!(
            out.contains("| Radix | seed001-scaled | 2.00 | - | - |"),
            "{out}"
        );
    }

    #[test]
    fn no_hlrc_runs_no_section() {
        let set = ResultSet::new(vec![run("fft", "cashmere", "mc2", 1, 1.0)]);
        let mut out = String::new();
        seed001(&set, &mut out);
        assert!(out.is_empty());
    }
}
