//! SVG charts in seed 000's style, drawn with plotters' SVG backend, as
//! small multiples that read at a glance on a laptop screen: a panel per
//! application in a grid one page wide, the cluster configurations along
//! each panel's x axis, the protocol variants as colours named once in a
//! legend above the panels. `speedup.svg` (Fig. 1), `data.svg` (the data
//! each variant moved; Figs. 4-6 count it) and, when the records carry
//! one, `breakdown.svg` (Figs. 2-3: stacked per processor). Under every
//! chart: which clock its times come from and the host ([`crate::clock`]).
//! A results file with several presets gets one set per preset
//! (`speedup-medium.svg`, `speedup-paper.svg`, ...).
//!
//! Files: `figure` (what a chart shows), `layout` (the page: legend, grid,
//! notes, colours), `grouped` and `stacked` (drawing); this file turns a
//! result set into figures.

pub mod figure;
pub mod grouped;
pub mod layout;
pub mod stacked;
pub mod ump;

use std::path::{Path, PathBuf};

use figure::{Bar, GroupedFigure, Panel, StackedFigure, StackedPanel};

use crate::error::ReportError;
use crate::matrix::ClusterShape;
use crate::paper;
use crate::results::{ResultSet, RunRecord, Speedup};

/// A configuration as an x-axis label: `2:1`, `2:2 (2L)`, `2:2/1L`.
pub fn shape_label(s: ClusterShape) -> String {
    if s.threads > 1 && !s.one_level_threads() {
        format!("{s} ({})", s.levels())
    } else {
        s.to_string()
    }
}

/// A variant without the `CSM-` every variant has: `DMS`, `MS-Mg`.
fn short_variant(v: &str) -> String {
    let name = paper::variant_name(v);
    name.strip_prefix("CSM-").unwrap_or(&name).to_string()
}

/// Panel titles: the paper's names, with the preset when several are shown.
fn panel_titles(set: &ResultSet) -> Vec<String> {
    let apps = set.apps();
    let presets: std::collections::BTreeSet<&String> = apps.iter().map(|(_, p)| p).collect();
    apps.iter()
        .map(|(a, p)| {
            if presets.len() > 1 {
                format!("{} ({p})", paper::display_name(a))
            } else {
                paper::display_name(a).to_string()
            }
        })
        .collect()
}

/// `small` or `small/medium`: the presets shown.
fn presets(set: &ResultSet) -> String {
    let p: std::collections::BTreeSet<String> = set.apps().into_iter().map(|(_, p)| p).collect();
    p.into_iter().collect::<Vec<_>>().join("/")
}

const SHAPES_NOTE: &str = "Configurations are NODES:THREADS: (2L) threads share their node's \
     memory (Cashmere-2L), /1L each thread is a protocol node of its own (Cashmere-1L).";

/// One grouped figure's panels: `bar` for each run (None: no run).
fn grouped_panels(
    set: &ResultSet,
    shapes: &[ClusterShape],
    variants: &[String],
    bar: &dyn Fn(Option<&RunRecord>) -> Bar,
) -> Vec<Panel> {
    set.apps()
        .iter()
        .zip(panel_titles(set))
        .map(|((a, p), title)| Panel {
            title,
            values: shapes
                .iter()
                .map(|s| variants.iter().map(|v| bar(set.get(a, p, v, *s))).collect())
                .collect(),
        })
        .collect()
}

fn speedup_figure(set: &ResultSet, shapes: &[ClusterShape], variants: &[String]) -> GroupedFigure {
    let over = if set.basis.host_bound() {
        "the run's (slowest node)"
    } else {
        "the run's predicted time"
    };
    let mut notes = vec![
        set.time_line(),
        format!(
            "Speedup: the sequential program's time over {over}. Dashed: 1, as fast as the \
             sequential program (drawn where bars come near it; each panel has its own scale)."
        ),
    ];
    if set.basis.host_bound() {
        notes.push(
            "Oversubscribed: more application threads than the host has cores, so no speedup is \
             shown (it would measure the host's scheduling, not the protocol)."
                .to_string(),
        );
    }
    notes.push(SHAPES_NOTE.to_string());
    GroupedFigure {
        title: format!(
            "Speedup over the sequential program, {} presets (seed 000 Fig. 1 style)",
            presets(set)
        ),
        y_desc: format!("speedup ({} times)", set.basis.axis_unit()),
        reference: Some((1.0, "as fast as the sequential program".into())),
        groups: shapes.iter().map(|s| shape_label(*s)).collect(),
        series: variants.iter().map(|v| paper::variant_name(v)).collect(),
        panels: grouped_panels(set, shapes, variants, &|r| match r {
            None => Bar::Missing,
            Some(r) => match set.speedup_of(r) {
                Speedup::Value(v) => Bar::Value(v),
                Speedup::Failed => Bar::Failed,
                Speedup::Oversubscribed => Bar::Oversubscribed,
                Speedup::NoBaseline => Bar::Missing,
            },
        }),
        notes,
    }
}

fn data_figure(set: &ResultSet, shapes: &[ClusterShape], variants: &[String]) -> GroupedFigure {
    GroupedFigure {
        title: format!(
            "Data moved by the protocol, cluster total, {} presets",
            presets(set)
        ),
        y_desc: "KiB (pages fetched + diffs)".into(),
        reference: None,
        groups: shapes.iter().map(|s| shape_label(*s)).collect(),
        series: variants.iter().map(|v| paper::variant_name(v)).collect(),
        panels: grouped_panels(set, shapes, variants, &|r| match r {
            None => Bar::Missing,
            Some(r) if !r.ok() => Bar::Failed,
            Some(r) => r
                .data_bytes()
                .map_or(Bar::Missing, |b| Bar::Value(b as f64 / 1024.0)),
        }),
        notes: vec![
            set.host_line(),
            "Page transfers x page size + diff bytes: counts, which do not depend on the host's \
             speed. Each panel has its own scale."
                .to_string(),
            SHAPES_NOTE.to_string(),
        ],
    }
}

/// The breakdown's components, in the order the records name them.
fn components(set: &ResultSet) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in &set.records {
        for k in r.breakdown().into_iter().flat_map(|m| m.keys()) {
            if !out.contains(k) {
                out.push(k.clone());
            }
        }
    }
    out
}

fn breakdown_figure(
    set: &ResultSet,
    shapes: &[ClusterShape],
    variants: &[String],
    components: Vec<String>,
) -> StackedFigure {
    let panels = set
        .apps()
        .iter()
        .zip(panel_titles(set))
        .map(|((a, p), title)| {
            let raw: Vec<Vec<Option<Vec<f64>>>> = shapes
                .iter()
                .map(|s| {
                    variants
                        .iter()
                        .map(|v| {
                            let r = set.get(a, p, v, *s).filter(|r| r.ok())?;
                            let b = r.breakdown()?;
                            // Per processor, as the paper's figures are: the
                            // record sums every application thread.
                            let per = r.processors();
                            Some(
                                components
                                    .iter()
                                    .map(|k| b.get(k).and_then(|x| x.as_f64()).unwrap_or(0.0) / per)
                                    .collect(),
                            )
                        })
                        .collect()
                })
                .collect();
            let norm = raw
                .iter()
                .flatten()
                .flatten()
                .map(|v| v.iter().sum::<f64>())
                .find(|t| *t > 0.0)
                .unwrap_or(1.0);
            StackedPanel {
                title,
                values: raw
                    .into_iter()
                    .map(|row| {
                        row.into_iter()
                            .map(|v| v.map(|v| v.into_iter().map(|x| x / norm).collect()))
                            .collect()
                    })
                    .collect(),
            }
        })
        .collect();
    StackedFigure {
        title: "Execution time breakdown per processor (seed 000 Figs. 2-3 style)".into(),
        y_desc: format!("{} time, relative", set.basis.axis_unit()),
        groups: shapes.iter().map(|s| shape_label(*s)).collect(),
        series: variants.iter().map(|v| short_variant(v)).collect(),
        components,
        panels,
        notes: vec![
            set.time_line(),
            "Each bar: one variant's time per processor, split as the record splits it; 1 is the \
             panel's first bar (its first variant on its first configuration)."
                .to_string(),
            SHAPES_NOTE.to_string(),
        ],
    }
}

/// speedup.svg, data.svg and, when the records have one, breakdown.svg;
/// with several presets, one set per preset (`speedup-medium.svg`,
/// `speedup-paper.svg`, ...), each a page: a problem of another size is
/// another figure, and all in one would be too tall to read.
pub fn write_all(set: &ResultSet, out: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let mut presets: Vec<String> = Vec::new();
    for (_, p) in set.apps() {
        if !presets.contains(&p) {
            presets.push(p);
        }
    }
    if presets.len() <= 1 {
        return write_set(set, out, "");
    }
    presets.sort_by_key(|p| (crate::matrix::preset_rank(p), p.clone()));
    let mut files = Vec::new();
    for p in presets {
        files.extend(write_set(&set.only_preset(&p), out, &format!("-{p}"))?);
    }
    Ok(files)
}

/// One set of charts, `suffix` after each name's stem.
fn write_set(set: &ResultSet, out: &Path, suffix: &str) -> Result<Vec<PathBuf>, ReportError> {
    let shapes = set.shapes();
    let variants = set.variants();
    let mut files = Vec::new();
    let p = out.join(format!("speedup{suffix}.svg"));
    grouped::draw(&p, &speedup_figure(set, &shapes, &variants))?;
    files.push(p);
    let p = out.join(format!("data{suffix}.svg"));
    grouped::draw(&p, &data_figure(set, &shapes, &variants))?;
    files.push(p);
    let components = components(set);
    if !components.is_empty() {
        let p = out.join(format!("breakdown{suffix}.svg"));
        stacked::draw(&p, &breakdown_figure(set, &shapes, &variants, components))?;
        files.push(p);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_and_variants_are_labelled_as_the_report_writes_them() {
        let s = |n, t, one_level| ClusterShape {
            nodes: n,
            threads: t,
            one_level,
        };
        assert_eq!(shape_label(s(2, 1, false)), "2:1");
        assert_eq!(shape_label(s(2, 2, false)), "2:2 (2L)");
        assert_eq!(shape_label(s(2, 2, true)), "2:2/1L");
        assert_eq!(short_variant("ms-mg"), "MS-Mg");
        assert_eq!(short_variant("none"), "None");
    }
}
