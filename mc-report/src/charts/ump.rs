//! Seed 004's Figures 8 and 9 as charts, from what `mc-guest bench ump
//! --json FILE` wrote: UMP's one-way transfer time (`fig8.svg`) and
//! bandwidth (`fig9.svg`) against message size, 8 B to 1 MiB, on log axes;
//! a line per transport (Memory Channel, shared memory) and write mode
//! (blocking, non-blocking), with the seed's figures and this machine's
//! raw limits, measured in the same run, as dashed reference lines.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

use super::layout::{chart_err, FONT, INK, PALETTE};
use crate::error::ReportError;

const WIDTH: u32 = 960;
const HEIGHT: u32 = 600;

/// One measured point.
#[derive(Clone, Debug, PartialEq)]
pub struct UmpPoint {
    /// `MC` or `shm`.
    pub transport: String,
    /// `blocking` or `non-blocking`.
    pub mode: String,
    pub size: u64,
    pub one_way_us: f64,
    pub mb_s: f64,
}

/// One run of the bench: its points, its raw limits and the seed's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct UmpBench {
    pub points: Vec<UmpPoint>,
    pub adapter_one_way_us: f64,
    pub adapter_stream_64k_mb_s: f64,
    pub memcpy_64k_mb_s: f64,
    pub seed_mc_us: f64,
    pub seed_mc_mb_s: f64,
    pub seed_shm_us: f64,
    pub seed_shm_mb_s: f64,
}

impl UmpBench {
    /// Read the bench's JSON.
    pub fn load(path: &Path) -> Result<UmpBench, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let v: Value = serde_json::from_str(&text).map_err(|source| ReportError::Parse {
            path: path.to_path_buf(),
            line: 1,
            source,
        })?;
        UmpBench::from_json(&v).map_err(|message| ReportError::Chart {
            path: path.to_path_buf(),
            message: format!("not a `mc-guest bench ump --json` file: {message}"),
        })
    }

    /// The figures of a parsed report; `Err` names what is missing.
    pub fn from_json(v: &Value) -> Result<UmpBench, String> {
        let num = |v: &Value, at: &str| -> Result<f64, String> {
            v.pointer(at)
                .and_then(Value::as_f64)
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("{at} is not a number"))
        };
        let text = |v: &Value, at: &str| -> Result<String, String> {
            v.pointer(at)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("{at} is not a string"))
        };
        let points = v
            .get("points")
            .and_then(Value::as_array)
            .ok_or("/points is not a list")?
            .iter()
            .map(|p| {
                Ok(UmpPoint {
                    transport: text(p, "/transport")?,
                    mode: text(p, "/mode")?,
                    size: p
                        .pointer("/size")
                        .and_then(Value::as_u64)
                        .ok_or("/size is not a whole number")?,
                    one_way_us: num(p, "/one_way_us")?,
                    mb_s: num(p, "/mb_s")?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        if points.is_empty() {
            return Err("no points".into());
        }
        Ok(UmpBench {
            points,
            adapter_one_way_us: num(v, "/raw/adapter_one_way_us")?,
            adapter_stream_64k_mb_s: num(v, "/raw/adapter_stream_64k_mb_s")?,
            memcpy_64k_mb_s: num(v, "/raw/memcpy_64k_mb_s")?,
            seed_mc_us: num(v, "/seed/mc_latency_us")?,
            seed_mc_mb_s: num(v, "/seed/mc_peak_mb_s")?,
            seed_shm_us: num(v, "/seed/shm_latency_us")?,
            seed_shm_mb_s: num(v, "/seed/shm_peak_mb_s")?,
        })
    }

    /// The series in a fixed order: (transport, mode) pairs present.
    fn series(&self) -> Vec<(String, String)> {
        let mut s: Vec<(String, String)> = Vec::new();
        for p in &self.points {
            let k = (p.transport.clone(), p.mode.clone());
            if !s.contains(&k) {
                s.push(k);
            }
        }
        s
    }
}

/// One figure: which value of a point, its axis and its reference lines.
struct Figure<'a> {
    file: &'a str,
    title: &'a str,
    y_desc: &'a str,
    value: fn(&UmpPoint) -> f64,
    refs: Vec<(f64, String)>,
    /// Where the legend covers no line.
    legend: SeriesLabelPosition,
}

/// Draw `fig8.svg` and `fig9.svg` into `out` (created if need be).
pub fn draw(b: &UmpBench, out: &Path) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(out).map_err(|source| ReportError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    let figures = [
        Figure {
            file: "fig8.svg",
            title: "UMP one-way transfer time (seed 004 Fig. 8)",
            y_desc: "one-way time (us, log)",
            value: |p| p.one_way_us,
            legend: SeriesLabelPosition::UpperLeft,
            refs: vec![
                (b.seed_mc_us, format!("seed 004, MC: {} us", b.seed_mc_us)),
                (
                    b.seed_shm_us,
                    format!("seed 004, shm: {} us", b.seed_shm_us),
                ),
                (
                    b.adapter_one_way_us,
                    format!("adapter one-way, this run: {:.1} us", b.adapter_one_way_us),
                ),
            ],
        },
        Figure {
            file: "fig9.svg",
            title: "UMP bandwidth (seed 004 Fig. 9)",
            y_desc: "bandwidth (MB/s, log)",
            value: |p| p.mb_s,
            legend: SeriesLabelPosition::LowerRight,
            refs: vec![
                (
                    b.seed_mc_mb_s,
                    format!("seed 004, MC: {} MB/s", b.seed_mc_mb_s),
                ),
                (
                    b.seed_shm_mb_s,
                    format!("seed 004, shm: {} MB/s", b.seed_shm_mb_s),
                ),
                (
                    b.adapter_stream_64k_mb_s,
                    format!(
                        "adapter 64 KiB streaming, this run: {:.0} MB/s",
                        b.adapter_stream_64k_mb_s
                    ),
                ),
                (
                    b.memcpy_64k_mb_s,
                    format!("memcpy 64 KiB, this run: {:.0} MB/s", b.memcpy_64k_mb_s),
                ),
            ],
        },
    ];
    figures
        .iter()
        .map(|f| {
            let path = out.join(f.file);
            draw_one(b, f, &path)?;
            Ok(path)
        })
        .collect()
}

#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a position on the size axis, rounded to a byte count (`as` saturates)"
)]
fn size_label(v: f64) -> String {
    let v = v.round() as u64;
    match v {
        v if v >= 1 << 20 && v % (1 << 20) == 0 => format!("{} MiB", v >> 20),
        v if v >= 1 << 10 && v % (1 << 10) == 0 => format!("{} KiB", v >> 10),
        v => format!("{v} B"),
    }
}

/// The x axis' ticks: the bench's sizes, powers of 8 from 8 B.
fn size_ticks(smax: f64) -> Vec<f64> {
    std::iter::successors(Some(8f64), |s| Some(s * 8.0))
        .take_while(|s| *s <= smax * 1.5)
        .chain(std::iter::once(smax))
        .collect()
}

fn value_label(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn draw_one(b: &UmpBench, f: &Figure<'_>, path: &Path) -> Result<(), ReportError> {
    let e = chart_err(path);
    let values = b
        .points
        .iter()
        .map(f.value)
        .chain(f.refs.iter().map(|r| r.0))
        .filter(|v| *v > 0.0);
    let (lo, hi) = values.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if hi > 0.0 {
        (lo / 2.0, hi * 2.0)
    } else {
        (0.1, 10.0)
    };
    let smax = b
        .points
        .iter()
        .map(|p| p.size)
        .max()
        .unwrap_or(1 << 20)
        .max(16) as f64;
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(f.title, (FONT, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(
            (4f64..smax * 2.0)
                .log_scale()
                .with_key_points(size_ticks(smax)),
            (lo..hi).log_scale(),
        )
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes, log)")
        .y_desc(f.y_desc)
        .x_label_formatter(&|v| size_label(*v))
        .y_label_formatter(&|v| value_label(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(|x| e(&x))?;
    // Reference lines first, so the data is drawn over them.
    for (i, (y, name)) in f.refs.iter().enumerate() {
        if *y <= 0.0 {
            continue;
        }
        let color = PALETTE[(7 + i) % PALETTE.len()];
        chart
            .draw_series(DashedLineSeries::new(
                [(4.0, *y), (smax * 2.0, *y)],
                8,
                5,
                color.stroke_width(2),
            ))
            .map_err(|x| e(&x))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    for (i, (transport, mode)) in b.series().iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mut pts: Vec<(f64, f64)> = b
            .points
            .iter()
            .filter(|p| &p.transport == transport && &p.mode == mode)
            .map(|p| (p.size as f64, (f.value)(p)))
            .filter(|&(_, v)| v > 0.0)
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let blocking = mode == "blocking";
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(format!("{transport}, {mode}"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(3)));
        if blocking {
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
        } else {
            chart.draw_series(
                pts.iter()
                    .map(|&p| TriangleMarker::new(p, 5, color.stroke_width(2))),
            )
        }
        .map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .position(f.legend.clone())
        .background_style(WHITE.mix(0.85))
        .border_style(INK)
        .label_font((FONT, 13))
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Value {
        let mut points = Vec::new();
        for t in ["MC", "shm"] {
            for m in ["blocking", "non-blocking"] {
                for (i, s) in [8u64, 4096, 1 << 20].iter().enumerate() {
                    points.push(serde_json::json!({
                        "transport": t, "mode": m, "size": s,
                        "one_way_us": 2.0 + i as f64 * 100.0, "mb_s": 4.0 + i as f64 * 300.0,
                    }));
                }
            }
        }
        serde_json::json!({
            "nodes": 2,
            "raw": {"adapter_one_way_us": 6.5, "adapter_stream_64k_mb_s": 1200.0,
                    "memcpy_64k_mb_s": 9000.0},
            "points": points,
            "seed": {"mc_latency_us": 5.8, "mc_peak_mb_s": 61.0,
                     "shm_latency_us": 2.0, "shm_peak_mb_s": 75.0},
        })
    }

    #[test]
    fn both_figures_are_drawn_with_every_series_and_reference() {
        let b = UmpBench::from_json(&report()).unwrap();
        assert_eq!(b.series().len(), 4);
        let dir = tempfile::tempdir().unwrap();
        let files = draw(&b, dir.path()).unwrap();
        assert_eq!(files.len(), 2);
        let fig8 = std::fs::read_to_string(&files[0]).unwrap();
        for want in [
            "MC, blocking",
            "shm, non-blocking",
            "seed 004, MC: 5.8 us",
            "adapter one-way, this run: 6.5 us",
            "1 MiB",
        ] {
            assert!(fig8.contains(want), "fig8 lacks {want}");
        }
        let fig9 = std::fs::read_to_string(&files[1]).unwrap();
        assert!(fig9.contains("memcpy 64 KiB, this run: 9000 MB/s"));
    }

    #[test]
    fn a_file_that_is_not_the_benchs_is_refused_with_what_is_missing() {
        let mut v = report();
        v["raw"] = serde_json::json!({});
        let err = UmpBench::from_json(&v).unwrap_err();
        assert!(err.contains("/raw/adapter_one_way_us"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        std::fs::write(&path, "{\"points\": []}").unwrap();
        let err = UmpBench::load(&path).unwrap_err().to_string();
        assert!(err.contains("x.json"), "{err}");
        std::fs::write(&path, "not json").unwrap();
        assert!(matches!(
            UmpBench::load(&path),
            Err(ReportError::Parse { .. })
        ));
    }
}
