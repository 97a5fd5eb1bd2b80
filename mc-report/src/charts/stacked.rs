//! Stacked bars as small multiples (seed 000 Figs. 2-3 style): a panel per
//! application, the cluster configurations along its x axis, in each one
//! bar per protocol variant (its short name under it), split into the time
//! components (the colours, named in the legend).

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::{StackedFigure, StackedPanel};
use super::grouped::slot;
use super::layout::{
    chart_err, coord, count_u32, draw_group_name, panel_chart, y_top, Page, PanelAxes, FONT, INK,
    PALETTE,
};
use crate::error::ReportError;

/// Panel height in pixels (taller than a grouped panel: the variants'
/// names stand under the bars).
const PANEL_PX: u32 = 290;

fn panel_max(p: &StackedPanel) -> f64 {
    p.values
        .iter()
        .flatten()
        .flatten()
        .map(|v| v.iter().sum::<f64>())
        .fold(0.0, f64::max)
}

pub fn draw(path: &Path, f: &StackedFigure) -> Result<(), ReportError> {
    let e = chart_err(path);
    let legend: Vec<_> = f
        .components
        .iter()
        .enumerate()
        .map(|(k, name)| (PALETTE[k % PALETTE.len()].filled(), name.clone()))
        .collect();
    let page = Page::new(
        path,
        &f.title,
        "time spent in:",
        &legend,
        f.panels.len(),
        PANEL_PX,
        f.notes.len(),
    )?;
    let n = f.series.len();
    let groups = f.groups.len().max(1);
    let longest = f
        .series
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(1);
    let names_px = (count_u32(longest) * 5 + 8).min(60);
    for (i, (cell, p)) in page.cells.iter().zip(&f.panels).enumerate() {
        let ymax = y_top(panel_max(p));
        let mut chart = panel_chart(
            cell,
            &PanelAxes {
                title: &p.title,
                y_desc: &f.y_desc,
                first_in_row: page.first_in_row(i),
                x_label_px: names_px + 24,
                groups,
                ymax,
            },
            &e,
        )?;
        for k in 0..f.components.len() {
            let color = PALETTE[k % PALETTE.len()];
            let mut rects = Vec::new();
            for (g, row) in p.values.iter().enumerate() {
                for (s, v) in row.iter().enumerate() {
                    let Some(v) = v else { continue };
                    let below: f64 = v.iter().take(k).sum();
                    let (x0, x1) = slot(g, s, n);
                    let h = v.get(k).copied().unwrap_or(0.0);
                    rects.push(Rectangle::new(
                        [(x0, below), (x1, below + h)],
                        color.filled(),
                    ));
                }
            }
            chart.draw_series(rects).map_err(|x| e(&x))?;
        }
        let names = TextStyle::from((FONT, 9).into_font())
            .color(&INK)
            .transform(FontTransform::Rotate270)
            .pos(Pos::new(HPos::Right, VPos::Center));
        for g in 0..groups {
            for s in 0..n {
                let (x0, x1) = slot(g, s, n);
                let (px, py) = chart.backend_coord(&((x0 + x1) / 2.0, 0.0));
                page.root
                    .draw_text(&f.series[s], &names, (px, py + 4))
                    .map_err(|x| e(&x))?;
            }
            if let Some(name) = f.groups.get(g) {
                draw_group_name(&page, &chart, g, name, coord(names_px) + 6, &e)?;
            }
        }
    }
    page.finish(path, &f.notes)
}
