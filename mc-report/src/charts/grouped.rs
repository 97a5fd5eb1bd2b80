//! Grouped bars as small multiples: a panel per application, the cluster
//! configurations along its x axis, one bar per protocol variant in each
//! (the variant's colour, the same in every panel), each panel with its own
//! y scale. A run of bars with no number (oversubscribed, failed, no run)
//! is a grey band that says why, so an empty slot is never mistaken for 0.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::{Bar, GroupedFigure, Panel};
use super::layout::{
    chart_err, draw_group_name, panel_chart, series_style, text_px, y_top, Page, PanelAxes, BAND,
    FONT, INK,
};
use crate::error::ReportError;

/// Panel height in pixels.
const PANEL_PX: u32 = 250;

/// Where bar `s` of `n` in group `g` sits on the x axis (groups are 1
/// wide, with a gap between them).
pub fn slot(g: usize, s: usize, n: usize) -> (f64, f64) {
    let w = 0.8 / n.max(1) as f64;
    let x0 = g as f64 + 0.1 + s as f64 * w;
    (x0, x0 + w * 0.88)
}

/// Consecutive bars of a group that have no number for the same reason:
/// `(first, last, reason)`.
pub fn reason_runs(row: &[Bar]) -> Vec<(usize, usize, &'static str)> {
    let mut runs: Vec<(usize, usize, &'static str)> = Vec::new();
    for (s, b) in row.iter().enumerate() {
        let Some(why) = b.reason() else { continue };
        match runs.last_mut() {
            Some((_, last, w)) if *last + 1 == s && *w == why => *last = s,
            _ => runs.push((s, s, why)),
        }
    }
    runs
}

fn panel_max(p: &Panel) -> f64 {
    p.values
        .iter()
        .flatten()
        .filter_map(|b| match b {
            Bar::Value(v) => Some(*v),
            _ => None,
        })
        .fold(0.0, f64::max)
}

/// The reference line, if the panel's bars reach near it: bars far below
/// it would otherwise be squashed flat (the axis' numbers still say how
/// far below they are).
pub fn reference_in(max: f64, reference: Option<f64>) -> Option<f64> {
    reference.filter(|r| max >= r * 0.5)
}

pub fn draw(path: &Path, f: &GroupedFigure) -> Result<(), ReportError> {
    let e = chart_err(path);
    let legend: Vec<_> = f
        .series
        .iter()
        .enumerate()
        .map(|(s, name)| (series_style(s), name.clone()))
        .collect();
    let page = Page::new(
        path,
        &f.title,
        "variant:",
        &legend,
        f.panels.len(),
        PANEL_PX,
        f.notes.len(),
    )?;
    let n = f.series.len();
    let groups = f.groups.len().max(1);
    for (i, (cell, p)) in page.cells.iter().zip(&f.panels).enumerate() {
        let max = panel_max(p);
        let reference = reference_in(max, f.reference.as_ref().map(|r| r.0));
        let ymax = y_top(max.max(reference.unwrap_or(0.0)));
        let mut chart = panel_chart(
            cell,
            &PanelAxes {
                title: &p.title,
                y_desc: &f.y_desc,
                first_in_row: page.first_in_row(i),
                x_label_px: 28,
                groups,
                ymax,
            },
            &e,
        )?;
        // Grey bands first, so bars and text sit on top of them.
        let mut bands = Vec::new();
        for (g, row) in p.values.iter().enumerate() {
            for (first, last, _) in reason_runs(row) {
                let (x0, _) = slot(g, first, n);
                let (_, x1) = slot(g, last, n);
                bands.push(Rectangle::new([(x0, 0.0), (x1, ymax)], BAND.filled()));
            }
        }
        chart.draw_series(bands).map_err(|x| e(&x))?;
        if let Some(y) = reference {
            chart
                .draw_series(DashedLineSeries::new(
                    [(0.0, y), (groups as f64, y)],
                    4,
                    3,
                    INK.stroke_width(1),
                ))
                .map_err(|x| e(&x))?;
        }
        for s in 0..n {
            let style = series_style(s);
            let bars: Vec<_> = p
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
            chart.draw_series(bars).map_err(|x| e(&x))?;
        }
        // The reasons, upright in their band, reading from the axis up.
        for (g, row) in p.values.iter().enumerate() {
            for (first, last, why) in reason_runs(row) {
                let (x0, _) = slot(g, first, n);
                let (_, x1) = slot(g, last, n);
                let (left, base) = chart.backend_coord(&(x0, 0.0));
                let (right, top) = chart.backend_coord(&(x1, ymax));
                let size = if right - left >= 14 { 11 } else { 9 };
                let text = if text_px(why, size) > base - top - 8 {
                    "n/a"
                } else {
                    why
                };
                let style = TextStyle::from((FONT, size).into_font())
                    .color(&INK)
                    .transform(FontTransform::Rotate270)
                    .pos(Pos::new(HPos::Left, VPos::Center));
                page.root
                    .draw_text(text, &style, ((left + right) / 2, base - 6))
                    .map_err(|x| e(&x))?;
            }
        }
        for (g, name) in f.groups.iter().enumerate() {
            draw_group_name(&page, &chart, g, name, 6, &e)?;
        }
    }
    page.finish(path, &f.notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_of_a_group_stay_inside_it_and_apart() {
        for n in [1, 7, 28] {
            let (a, _) = slot(2, 0, n);
            let (_, b) = slot(2, n - 1, n);
            assert!(a > 2.0 && b < 3.0, "{n}: {a}..{b}");
            if n > 1 {
                assert!(slot(2, 0, n).1 < slot(2, 1, n).0);
            }
        }
    }

    #[test]
    fn the_reference_line_shows_only_near_the_bars() {
        assert_eq!(reference_in(0.2, Some(1.0)), None);
        assert_eq!(reference_in(0.7, Some(1.0)), Some(1.0));
        assert_eq!(reference_in(7.0, Some(1.0)), Some(1.0));
        assert_eq!(reference_in(7.0, None), None);
    }

    #[test]
    fn bars_without_a_number_are_banded_by_reason() {
        use Bar::*;
        let row = [
            Value(1.0),
            Oversubscribed,
            Oversubscribed,
            Failed,
            Oversubscribed,
            Missing,
        ];
        assert_eq!(
            reason_runs(&row),
            [
                (1, 2, "oversubscribed"),
                (3, 3, "failed"),
                (4, 4, "oversubscribed"),
                (5, 5, "no run")
            ]
        );
    }
}
