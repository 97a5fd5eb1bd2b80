//! The page every chart is drawn on: a width that fits a page (about 1100
//! pixels), the title, one legend above the panels where it covers no data,
//! a grid of panels (three to a row), and the notes under them. Also the
//! colours and the text sizes, so that every chart looks alike.

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::ReportError;

/// The page width in pixels.
pub const WIDTH: u32 = 1120;
/// Panels in a row.
const COLUMNS: usize = 3;
const TITLE_PX: u32 = 36;
const LEGEND_ROW_PX: u32 = 22;
const NOTE_PX: u32 = 17;
const SIDE_PX: i32 = 16;

pub const FONT: &str = "sans-serif";

/// Colours for series, in order: tab10, then six more. Seven protocol
/// variants stay clearly apart.
pub const PALETTE: [RGBColor; 16] = [
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

/// Grey for what is not data: bands behind bars that have no number.
pub const BAND: RGBColor = RGBColor(236, 236, 236);
pub const INK: RGBColor = RGBColor(60, 60, 60);

/// Series `s`'s look: filled in its colour; past the palette, hollow, so
/// that no two series look alike.
pub fn series_style(s: usize) -> ShapeStyle {
    let color = PALETTE[s % PALETTE.len()];
    if s < PALETTE.len() {
        color.filled()
    } else {
        color.stroke_width(2)
    }
}

/// A drawing error as the report's error for the chart at `path`.
pub fn chart_err(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> ReportError + '_ {
    move |x| ReportError::Chart {
        path: path.to_path_buf(),
        message: x.to_string(),
    }
}

/// The axes of one panel: its title, `groups` slots along x (the caller
/// labels them, in `x_label_px` under the axis), 0 to `ymax` up, the y axis
/// described on the first panel of a row only.
pub struct PanelAxes<'t> {
    pub title: &'t str,
    pub y_desc: &'t str,
    pub first_in_row: bool,
    pub x_label_px: u32,
    pub groups: usize,
    pub ymax: f64,
}

/// One panel's chart: groups along x, values up.
pub type PanelChart<'c, 'b> =
    ChartContext<'c, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel's chart in `cell`, its mesh and y labels drawn (what every
/// small-multiples figure shares).
pub fn panel_chart<'c, 'b>(
    cell: &'c DrawingArea<SVGBackend<'b>, Shift>,
    axes: &PanelAxes<'_>,
    e: &impl Fn(&dyn std::fmt::Display) -> ReportError,
) -> Result<PanelChart<'c, 'b>, ReportError> {
    let ymax = axes.ymax;
    let mut chart = ChartBuilder::on(cell)
        .caption(axes.title, (FONT, 16))
        .margin_top(6)
        .margin_right(12)
        .margin_left(4)
        .x_label_area_size(axes.x_label_px)
        .y_label_area_size(if axes.first_in_row { 58 } else { 40 })
        .build_cartesian_2d(0f64..axes.groups as f64, 0f64..ymax)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_label_formatter(&|_| String::new())
        .y_labels(6)
        .y_desc(if axes.first_in_row { axes.y_desc } else { "" })
        .y_label_formatter(&|v| axis_label(*v, ymax))
        .label_style((FONT, 11))
        .axis_desc_style((FONT, 12))
        .light_line_style(RGBColor(245, 245, 245))
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()
        .map_err(|x| e(&x))?;
    Ok(chart)
}

/// Group `g`'s `name`, centred under its slot, `below_px` under the x axis.
pub fn draw_group_name(
    page: &Page<'_>,
    chart: &PanelChart<'_, '_>,
    g: usize,
    name: &str,
    below_px: i32,
    e: &impl Fn(&dyn std::fmt::Display) -> ReportError,
) -> Result<(), ReportError> {
    let centered = TextStyle::from((FONT, 12).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    let (px, py) = chart.backend_coord(&(g as f64 + 0.5, 0.0));
    page.root
        .draw_text(name, &centered, (px, py + below_px))
        .map_err(|x| e(&x))
}

/// A pixel offset or a count of rows for plotters' signed coordinates.
/// A page is a few thousand pixels, so only nonsense saturates.
pub fn coord<T: TryInto<i32>>(n: T) -> i32 {
    n.try_into().unwrap_or(i32::MAX)
}

/// A count of rows, panels or characters as a factor of pixel sizes.
pub fn count_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// About how wide `text` is at `size` pixels in a sans-serif font.
#[allow(
    clippy::cast_possible_truncation,
    reason = "a width in pixels of a line of text: far inside i32"
)]
pub fn text_px(text: &str, size: u32) -> i32 {
    (text.chars().count() as f64 * f64::from(size) * 0.56).ceil() as i32
}

/// A y-axis label with as many decimals as the axis' ticks (about six up
/// to `ymax`) need to differ.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "the decimals are clamped to 0..=6 before the cast"
)]
pub fn axis_label(v: f64, ymax: f64) -> String {
    let step = ymax / 6.0;
    let decimals = if step >= 1.0 || step <= 0.0 {
        0
    } else {
        (-step.log10()).ceil().clamp(0.0, 6.0) as usize
    };
    format!("{v:.decimals$}")
}

/// The top of the axis for values up to `max`: some room above the
/// tallest bar, and 1 when there is nothing to show.
pub fn y_top(max: f64) -> f64 {
    if max > 0.0 {
        max * 1.15
    } else {
        1.0
    }
}

/// Legend entries: a swatch style and a name.
pub type LegendEntry = (ShapeStyle, String);

/// Rows of legend entries that fit the page width.
fn legend_rows(entries: &[LegendEntry], lead: &str) -> Vec<Vec<usize>> {
    let mut rows: Vec<Vec<usize>> = vec![Vec::new()];
    let mut x = SIDE_PX + text_px(lead, 13) + 10;
    for (i, (_, name)) in entries.iter().enumerate() {
        let w = 18 + text_px(name, 13) + 18;
        if x + w > coord(WIDTH) - SIDE_PX && !rows.last().is_some_and(Vec::is_empty) {
            rows.push(Vec::new());
            x = SIDE_PX + text_px(lead, 13) + 10;
        }
        rows.last_mut().expect("a row").push(i);
        x += w;
    }
    rows
}

/// The page of one figure, split into its parts.
pub struct Page<'a> {
    pub root: DrawingArea<SVGBackend<'a>, Shift>,
    /// One area per panel, row by row.
    pub cells: Vec<DrawingArea<SVGBackend<'a>, Shift>>,
    notes: DrawingArea<SVGBackend<'a>, Shift>,
}

impl<'a> Page<'a> {
    /// Lay out a page at `path` for `panels` panels of `panel_px` height,
    /// with a title, a legend (`lead`, then the entries) and `notes` lines.
    pub fn new(
        path: &'a Path,
        title: &str,
        lead: &str,
        legend: &[LegendEntry],
        panels: usize,
        panel_px: u32,
        notes: usize,
    ) -> Result<Page<'a>, ReportError> {
        let e = chart_err(path);
        let rows = legend_rows(legend, lead);
        let header = TITLE_PX + count_u32(rows.len()) * LEGEND_ROW_PX + 10;
        // Always three columns: panels keep one size, however many there are.
        let columns = COLUMNS;
        let grid_rows = panels.div_ceil(columns).max(1);
        let grid = count_u32(grid_rows) * panel_px;
        let footer = count_u32(notes) * NOTE_PX + 14;
        let root = SVGBackend::new(path, (WIDTH, header + grid + footer)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let (head, rest) = root.split_vertically(header);
        let (grid_area, notes_area) = rest.split_vertically(grid);
        head.draw_text(
            title,
            &TextStyle::from((FONT, 20).into_font())
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Top)),
            (SIDE_PX, 8),
        )
        .map_err(|x| e(&x))?;
        let label = TextStyle::from((FONT, 13).into_font())
            .color(&INK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        for (r, row) in rows.iter().enumerate() {
            let y = coord(TITLE_PX + count_u32(r) * LEGEND_ROW_PX + LEGEND_ROW_PX / 2);
            let mut x = SIDE_PX;
            if r == 0 {
                head.draw_text(lead, &label, (x, y)).map_err(|x| e(&x))?;
            }
            x += text_px(lead, 13) + 10;
            for &i in row {
                let (style, name) = &legend[i];
                head.draw(&Rectangle::new([(x, y - 6), (x + 12, y + 6)], *style))
                    .map_err(|x| e(&x))?;
                head.draw_text(name, &label, (x + 18, y))
                    .map_err(|x| e(&x))?;
                x += 18 + text_px(name, 13) + 18;
            }
        }
        let grid_area = grid_area.margin(0, 0, 4, 4);
        let mut cells = grid_area.split_evenly((grid_rows, columns));
        cells.truncate(panels);
        Ok(Page {
            root,
            cells,
            notes: notes_area,
        })
    }

    /// Whether panel `i` starts a row (it carries the y axis' name).
    pub fn first_in_row(&self, i: usize) -> bool {
        i % COLUMNS == 0
    }

    /// Write the notes under the panels and the file.
    pub fn finish(self, path: &Path, notes: &[String]) -> Result<(), ReportError> {
        let e = chart_err(path);
        let style = TextStyle::from((FONT, 12).into_font())
            .color(&INK)
            .pos(Pos::new(HPos::Left, VPos::Top));
        for (i, n) in notes.iter().enumerate() {
            self.notes
                .draw_text(n, &style, (SIDE_PX, coord(6 + count_u32(i) * NOTE_PX)))
                .map_err(|x| e(&x))?;
        }
        self.root.present().map_err(|x| e(&x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_legend_wraps_within_the_page() {
        let entries: Vec<LegendEntry> = (0..28)
            .map(|i| (series_style(i), format!("CSM-None-Mg {i}:2 (2L)")))
            .collect();
        let rows = legend_rows(&entries, "variant:");
        assert!(rows.len() > 1);
        assert_eq!(rows.iter().map(Vec::len).sum::<usize>(), 28);
        let short: Vec<LegendEntry> = (0..7)
            .map(|i| (series_style(i), "CSM-DMS".into()))
            .collect();
        assert_eq!(legend_rows(&short, "variant:").len(), 1);
    }

    #[test]
    fn axes_have_room_above_the_tallest_bar() {
        assert_eq!(y_top(0.0), 1.0);
        assert!(y_top(2.0) > 2.0);
        assert_eq!(axis_label(0.5, 1.15), "0.5");
        assert_eq!(axis_label(12.0, 30.0), "12");
        // Tiny speedups still get labels that differ.
        assert_eq!(axis_label(0.005, 0.02), "0.005");
        assert_ne!(axis_label(0.005, 0.02), axis_label(0.01, 0.02));
    }
}
