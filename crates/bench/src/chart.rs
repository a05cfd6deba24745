//! PNG charts drawn with `plotters` (no R, no system fonts: the font is
//! DejaVu Sans Mono, embedded, rendered with `ab_glyph`).
//!
//! `summary.png` follows basho_bench's `priv/summary.r`: 1280×960, five
//! rows — throughput (ok and error ops/s against elapsed seconds), then per
//! op side by side: mean / median / 95th percentile latency, 99th, 99.9th,
//! and maximum latency (ms). Points are joined by lines; a moving average
//! (5 rows) stands in for R's smoother. `compare.png` overlays several runs:
//! throughput against elapsed time and against accumulated operations.

use crate::output::RunData;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::Once;

const FONT: &str = "sans-serif";
static FONT_ONCE: Once = Once::new();

fn register_font() {
    FONT_ONCE.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../assets/DejaVuSansMono.ttf");
        // A font that fails to load only costs the text.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, bytes);
    });
}

/// A chart error.
#[derive(Debug, thiserror::Error)]
#[error("drawing {path}: {message}")]
pub struct ChartError {
    /// The image.
    pub path: String,
    /// What failed.
    pub message: String,
}

fn cerr<E: std::fmt::Debug>(path: &Path) -> impl Fn(E) -> ChartError + '_ {
    move |e| ChartError {
        path: path.display().to_string(),
        message: format!("{e:?}"),
    }
}

/// Colours for series, in order.
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// One named series of points.
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Colour.
    pub color: RGBColor,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
}

fn moving_average(points: &[(f64, f64)], k: usize) -> Vec<(f64, f64)> {
    if points.len() < k * 2 {
        return Vec::new();
    }
    points
        .windows(k)
        .map(|w| {
            let x = w[k / 2].0;
            let y = w.iter().map(|p| p.1).sum::<f64>() / k as f64;
            (x, y)
        })
        .collect()
}

/// Axis numbers: no decimals from 100 up, `k`/`M` for large values.
fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e7 {
        format!("{:.0}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    smooth: bool,
) -> Result<(), String> {
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        x0 = 0.0;
        x1 = 1.0;
    }
    if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    if y1 <= 0.0 {
        y1 = 1.0;
    }
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 16))
        .margin(6)
        .x_label_area_size(36)
        .y_label_area_size(62)
        .build_cartesian_2d(x0..x1, 0.0..y1 * 1.08)
        .map_err(|e| format!("{e:?}"))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style((FONT, 12))
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| fmt_num(*v))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| format!("{e:?}"))?;
    for s in series {
        let c = s.color;
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                c.mix(0.5).stroke_width(1),
            ))
            .map_err(|e| format!("{e:?}"))?
            .label(s.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], c.filled()));
        if s.points.len() <= 2000 {
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, 2, c.filled())))
                .map_err(|e| format!("{e:?}"))?;
        }
        if smooth {
            let avg = moving_average(&s.points, 5);
            chart
                .draw_series(LineSeries::new(avg, c.stroke_width(2)))
                .map_err(|e| format!("{e:?}"))?;
        }
    }
    if series.len() > 1 || series.first().is_some_and(|s| !s.name.is_empty()) {
        chart
            .configure_series_labels()
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| format!("{e:?}"))?;
    }
    Ok(())
}

/// Draws `summary.png` for `run` at `path` (1280×960, five panels).
pub fn summary_png(run: &RunData, path: &Path) -> Result<(), ChartError> {
    register_font();
    let root = BitMapBackend::new(path, (1280, 960)).into_drawing_area();
    root.fill(&WHITE).map_err(cerr(path))?;
    let rows = root.split_evenly((5, 1));
    let ok: Vec<(f64, f64)> = run
        .summary
        .iter()
        .filter(|r| r.window > 0.0)
        .map(|r| (r.elapsed, r.successful as f64 / r.window))
        .collect();
    let err: Vec<(f64, f64)> = run
        .summary
        .iter()
        .filter(|r| r.window > 0.0)
        .map(|r| (r.elapsed, r.failed as f64 / r.window))
        .collect();
    let mut tput = vec![Series {
        name: "ok".into(),
        color: PALETTE[0],
        points: ok,
    }];
    if err.iter().any(|p| p.1 > 0.0) {
        tput.push(Series {
            name: "error".into(),
            color: PALETTE[1],
            points: err,
        });
    }
    panel(
        &rows[0],
        "Throughput",
        "Elapsed Secs",
        "Ops/sec",
        &tput,
        true,
    )
    .map_err(cerr(path))?;
    type Pick = fn(&crate::output::LatRow) -> f64;
    let panels: [(&str, Vec<(&str, Pick)>); 4] = [
        (
            "Mean, Median, and 95th Percentile Latency",
            vec![
                ("mean", |r| r.mean),
                ("median", |r| r.median),
                ("95th", |r| r.p95),
            ],
        ),
        ("99th Percentile Latency", vec![("99th", |r| r.p99)]),
        ("99.9th Percentile Latency", vec![("99.9th", |r| r.p999)]),
        ("Maximum Latency", vec![("max", |r| r.max)]),
    ];
    let n_ops = run.ops.len().max(1);
    for (row, (title, picks)) in rows[1..].iter().zip(panels.iter()) {
        let facets = row.split_evenly((1, n_ops));
        for (facet, (label, lat)) in facets.iter().zip(run.ops.iter()) {
            let series: Vec<Series> = picks
                .iter()
                .enumerate()
                .map(|(k, (name, pick))| Series {
                    name: if picks.len() > 1 {
                        (*name).into()
                    } else {
                        String::new()
                    },
                    color: PALETTE[(k + 2) % PALETTE.len()],
                    points: lat
                        .iter()
                        .filter(|r| r.n > 0)
                        .map(|r| (r.elapsed, pick(r) / 1000.0))
                        .collect(),
                })
                .collect();
            panel(
                facet,
                &format!("{title}: {label}"),
                "Elapsed Secs",
                "ms",
                &series,
                false,
            )
            .map_err(cerr(path))?;
        }
    }
    root.present().map_err(cerr(path))?;
    Ok(())
}

/// Draws `compare.png`: throughput of each run against elapsed seconds and
/// against accumulated successful operations.
pub fn compare_png(runs: &[(String, RunData)], path: &Path) -> Result<(), ChartError> {
    register_font();
    let root = BitMapBackend::new(path, (1280, 960)).into_drawing_area();
    root.fill(&WHITE).map_err(cerr(path))?;
    let rows = root.split_evenly((2, 1));
    let mut by_time = Vec::new();
    let mut by_ops = Vec::new();
    for (i, (name, run)) in runs.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mut acc = 0u64;
        let mut t = Vec::new();
        let mut o = Vec::new();
        for r in run.summary.iter().filter(|r| r.window > 0.0) {
            acc += r.successful;
            let y = r.successful as f64 / r.window;
            t.push((r.elapsed, y));
            o.push((acc as f64, y));
        }
        by_time.push(Series {
            name: name.clone(),
            color,
            points: t,
        });
        by_ops.push(Series {
            name: name.clone(),
            color,
            points: o,
        });
    }
    panel(
        &rows[0],
        "Throughput by elapsed time",
        "Elapsed Secs",
        "Ops/sec",
        &by_time,
        true,
    )
    .map_err(cerr(path))?;
    panel(
        &rows[1],
        "Throughput by accumulated operations",
        "Operations",
        "Ops/sec",
        &by_ops,
        true,
    )
    .map_err(cerr(path))?;
    root.present().map_err(cerr(path))?;
    Ok(())
}
