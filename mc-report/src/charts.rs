//! SVG charts in seed 000's style, drawn with plotters' SVG backend:
//! grouped bars per application (Fig. 1 and Figs. 4-6: one bar per
//! variant and configuration) for speedup and for the data the protocol
//! moved, and stacked bars for the time breakdown (Figs. 2-3) when the
//! records carry one. The host line is under every chart; a configuration
//! with more application threads than the host has cores is marked
//! "oversubscribed" instead of given a speedup bar.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::ReportError;
use crate::matrix::ClusterShape;
use crate::paper;
use crate::results::ResultSet;

/// One bar of a grouped chart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bar {
    Value(f64),
    /// No run, or no figure for it.
    Missing,
    /// More application threads than cores: no speedup shown.
    Oversubscribed,
    Failed,
}

/// Bars grouped by application, one series per variant and configuration.
pub struct GroupedBars {
    pub title: String,
    pub y_desc: String,
    pub groups: Vec<String>,
    pub series: Vec<String>,
    /// `values[group][series]`.
    pub values: Vec<Vec<Bar>>,
    pub note: String,
}

/// Stacked bars: per group, one bar per series, split into components.
pub struct StackedBars {
    pub title: String,
    pub groups: Vec<String>,
    pub series: Vec<String>,
    pub components: Vec<String>,
    /// `values[group][series]`: each component's share (a bar sums to its
    /// total relative to the group's first bar), or None.
    pub values: Vec<Vec<Option<Vec<f64>>>>,
    pub note: String,
}

/// Distinct colours for up to 16 series (four variants x three or four
/// configurations): tab10 and six more.
const PALETTE: [RGBColor; 16] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
    RGBColor(0, 128, 128),
    RGBColor(255, 215, 0),
    RGBColor(85, 107, 47),
    RGBColor(0, 0, 0),
];

fn chart_err(path: &Path) -> impl Fn(String) -> ReportError + '_ {
    move |message| ReportError::Chart {
        path: path.to_path_buf(),
        message,
    }
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;
type Area<'b> = DrawingArea<SVGBackend<'b>, plotters::coord::Shift>;

/// What every chart ends with: the legend, the note (the host line) under
/// the plot, and the file written.
fn finish<'b>(
    chart: &mut Chart<'b, 'b>,
    bottom: &Area<'b>,
    root: &Area<'b>,
    note: &str,
) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    bottom
        .draw_text(
            note,
            &TextStyle::from(("sans-serif", 13).into_font()),
            (12, 8),
        )
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

/// A y-axis label with as many decimals as the axis' range needs.
fn axis_label(v: f64, ymax: f64) -> String {
    if ymax >= 20.0 {
        format!("{v:.0}")
    } else if ymax >= 2.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Room on the right for the legend, so it covers no bars.
const LEGEND_PX: usize = 240;

fn group_px(series: usize) -> usize {
    series * 22 + 30
}

fn width(groups: usize, series: usize) -> u32 {
    (140 + groups * group_px(series) + LEGEND_PX).max(900) as u32
}

/// The x range: the groups, then the legend's room in group widths.
fn x_range(groups: usize, series: usize) -> std::ops::Range<f64> {
    0f64..groups.max(1) as f64 + LEGEND_PX as f64 / group_px(series) as f64
}

/// Series past the palette's colours are drawn hollow, so no two series
/// look alike.
fn series_style(s: usize) -> ShapeStyle {
    let color = PALETTE[s % PALETTE.len()];
    if s < PALETTE.len() {
        color.filled()
    } else {
        color.stroke_width(2)
    }
}

/// Where series `s` of group `g` sits on the x axis (groups are 1 wide).
fn slot(g: usize, s: usize, series: usize) -> (f64, f64) {
    let w = 0.8 / series.max(1) as f64;
    let x0 = g as f64 + 0.1 + s as f64 * w;
    (x0, x0 + w * 0.9)
}

pub fn grouped_bars(path: &Path, c: &GroupedBars) -> Result<(), ReportError> {
    let err = chart_err(path);
    let e = |x: &dyn std::fmt::Display| err(x.to_string());
    let (w, h) = (width(c.groups.len(), c.series.len()), 560u32);
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (top, bottom) = root.split_vertically(h - 36);
    let ymax = c
        .values
        .iter()
        .flatten()
        .filter_map(|b| match b {
            Bar::Value(v) => Some(*v),
            _ => None,
        })
        .fold(0.0, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.25 } else { 1.0 };
    let mut chart = ChartBuilder::on(&top)
        .caption(&c.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range(c.groups.len(), c.series.len()), 0f64..ymax)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_label_formatter(&|_| String::new())
        .y_desc(c.y_desc.as_str())
        .y_label_formatter(&|v| axis_label(*v, ymax))
        .draw()
        .map_err(|x| e(&x))?;
    let n = c.series.len();
    for (s, name) in c.series.iter().enumerate() {
        let style = series_style(s);
        let bars: Vec<Rectangle<(f64, f64)>> = c
            .values
            .iter()
            .enumerate()
            .filter_map(|(g, row)| match row.get(s) {
                Some(Bar::Value(v)) => {
                    let (x0, x1) = slot(g, s, n);
                    Some(Rectangle::new([(x0, 0.0), (x1, *v)], style))
                }
                _ => None,
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(|x| e(&x))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], style));
    }
    // Bars that are not numbers say why, upright in their slot.
    let upright = TextStyle::from(("sans-serif", 11).into_font())
        .transform(FontTransform::Rotate270)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (g, row) in c.values.iter().enumerate() {
        for (s, b) in row.iter().enumerate() {
            let label = match b {
                Bar::Oversubscribed => "oversubscribed",
                Bar::Failed => "failed",
                Bar::Missing => "no run",
                Bar::Value(_) => continue,
            };
            let (x0, x1) = slot(g, s, n);
            let (px, py) = chart.backend_coord(&((x0 + x1) / 2.0, 0.0));
            root.draw_text(label, &upright, (px, py - 4))
                .map_err(|x| e(&x))?;
        }
    }
    let centered =
        TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (g, name) in c.groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(g as f64 + 0.5, 0.0));
        root.draw_text(name, &centered, (px, py + 8))
            .map_err(|x| e(&x))?;
    }
    finish(&mut chart, &bottom, &root, &c.note).map_err(|x| e(&x))
}

pub fn stacked_bars(path: &Path, c: &StackedBars) -> Result<(), ReportError> {
    let err = chart_err(path);
    let e = |x: &dyn std::fmt::Display| err(x.to_string());
    let (w, h) = (width(c.groups.len(), c.series.len()), 560u32);
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (top, bottom) = root.split_vertically(h - 36);
    let ymax = c
        .values
        .iter()
        .flatten()
        .flatten()
        .map(|v| v.iter().sum::<f64>())
        .fold(0.0, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.3 } else { 1.0 };
    let mut chart = ChartBuilder::on(&top)
        .caption(&c.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range(c.groups.len(), c.series.len()), 0f64..ymax)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_label_formatter(&|_| String::new())
        .y_desc("time per processor, normalised to the group's first bar")
        .draw()
        .map_err(|x| e(&x))?;
    let n = c.series.len();
    for (k, name) in c.components.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let mut rects = Vec::new();
        for (g, row) in c.values.iter().enumerate() {
            for (s, v) in row.iter().enumerate() {
                if let Some(v) = v {
                    let below: f64 = v.iter().take(k).sum();
                    let (x0, x1) = slot(g, s, n);
                    rects.push(Rectangle::new(
                        [(x0, below), (x1, below + v.get(k).copied().unwrap_or(0.0))],
                        color.filled(),
                    ));
                }
            }
        }
        chart
            .draw_series(rects)
            .map_err(|x| e(&x))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    let small = TextStyle::from(("sans-serif", 10).into_font())
        .transform(FontTransform::Rotate270)
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (g, row) in c.values.iter().enumerate() {
        for s in 0..row.len() {
            let (x0, x1) = slot(g, s, n);
            let (px, py) = chart.backend_coord(&((x0 + x1) / 2.0, 0.0));
            root.draw_text(&c.series[s], &small, (px, py + 4))
                .map_err(|x| e(&x))?;
        }
    }
    let centered =
        TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (g, name) in c.groups.iter().enumerate() {
        let (px, _) = chart.backend_coord(&(g as f64 + 0.5, 0.0));
        let py = chart.backend_coord(&(0.0, ymax)).1;
        root.draw_text(name, &centered, (px, py + 4))
            .map_err(|x| e(&x))?;
    }
    finish(&mut chart, &bottom, &root, &c.note).map_err(|x| e(&x))
}

/// Group labels: the paper's names, with the preset when several are shown.
fn group_names(set: &ResultSet) -> Vec<String> {
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

/// Series of the grouped charts: every variant on every configuration.
fn series(set: &ResultSet) -> Vec<(String, ClusterShape, String)> {
    let mut out = Vec::new();
    for v in set.variants() {
        for s in set.shapes() {
            let label = format!("{} {s} ({})", paper::variant_name(&v), s.levels());
            out.push((v.clone(), s, label));
        }
    }
    out
}

/// speedup.svg, data.svg and, when the records have one, breakdown.svg.
pub fn write_all(set: &ResultSet, out: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let apps = set.apps();
    let ser = series(set);
    let groups = group_names(set);
    let note = set.host_line();
    let preset_note = {
        let p: std::collections::BTreeSet<String> = apps.iter().map(|(_, p)| p.clone()).collect();
        p.into_iter().collect::<Vec<_>>().join("/")
    };
    let mut files = Vec::new();

    let speed = GroupedBars {
        title: format!(
            "Speedup over the sequential program ({preset_note} presets; seed 000 Fig. 1 style)"
        ),
        y_desc: "speedup".into(),
        groups: groups.clone(),
        series: ser.iter().map(|s| s.2.clone()).collect(),
        values: apps
            .iter()
            .map(|(a, p)| {
                ser.iter()
                    .map(|(v, s, _)| match set.get(a, p, v, *s) {
                        None => Bar::Missing,
                        Some(r) if !r.ok() => Bar::Failed,
                        Some(r) if r.oversubscribed() => Bar::Oversubscribed,
                        Some(r) => set.speedup(r).map_or(Bar::Missing, Bar::Value),
                    })
                    .collect()
            })
            .collect(),
        note: note.clone(),
    };
    let p = out.join("speedup.svg");
    grouped_bars(&p, &speed)?;
    files.push(p);

    let data = GroupedBars {
        title: format!("Data moved by the protocol, cluster total ({preset_note} presets)"),
        y_desc: "KiB (page transfers x page size + diff bytes)".into(),
        groups: groups.clone(),
        series: ser.iter().map(|s| s.2.clone()).collect(),
        values: apps
            .iter()
            .map(|(a, p)| {
                ser.iter()
                    .map(|(v, s, _)| match set.get(a, p, v, *s) {
                        None => Bar::Missing,
                        Some(r) if !r.ok() => Bar::Failed,
                        Some(r) => r
                            .data_bytes()
                            .map_or(Bar::Missing, |b| Bar::Value(b as f64 / 1024.0)),
                    })
                    .collect()
            })
            .collect(),
        note: note.clone(),
    };
    let p = out.join("data.svg");
    grouped_bars(&p, &data)?;
    files.push(p);

    let mut components: Vec<String> = Vec::new();
    for r in &set.records {
        for k in r.breakdown().into_iter().flat_map(|m| m.keys()) {
            if !components.contains(k) {
                components.push(k.clone());
            }
        }
    }
    if !components.is_empty() {
        let values = apps
            .iter()
            .map(|(a, p)| {
                let raw: Vec<Option<Vec<f64>>> = ser
                    .iter()
                    .map(|(v, s, _)| {
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
                    .collect();
                let norm = raw
                    .iter()
                    .flatten()
                    .map(|v: &Vec<f64>| v.iter().sum::<f64>())
                    .find(|t| *t > 0.0)
                    .unwrap_or(1.0);
                raw.into_iter()
                    .map(|v| v.map(|v| v.into_iter().map(|x| x / norm).collect()))
                    .collect()
            })
            .collect();
        let stacked = StackedBars {
            title: "Execution time breakdown (seed 000 Figs. 2-3 style)".into(),
            groups,
            series: ser.iter().map(|s| s.2.clone()).collect(),
            components,
            values,
            note,
        };
        let p = out.join("breakdown.svg");
        stacked_bars(&p, &stacked)?;
        files.push(p);
    }
    Ok(files)
}
