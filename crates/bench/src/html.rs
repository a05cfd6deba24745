//! The pieces every HTML page of the bench is made of (`report.html`,
//! `compare.html`, `index.html`; the pages themselves are in
//! [`crate::htmlreport`]).
//!
//! A page is one self-contained file: it opens from disk with `file://`
//! and fetches nothing. The template, the style sheet and the script are
//! plain files in `assets/html/`, compiled in with `include_str!`; uPlot
//! (`basalt_webui`) is embedded inline with its licence in a comment; the
//! data is one inline JSON document that the script turns into charts.
//!
//! Everything that comes from a config or a CSV (operation labels, run
//! names, header lines, file names) is escaped on the way in: text into
//! HTML with [`esc`], data into the inline JSON with [`json_script`]
//! (which also escapes `<`, `>` and `&`, so a label holding `</script>`
//! cannot end the script element), and markdown tables through
//! [`markdown`], which escapes any HTML the markdown holds instead of
//! passing it through.
//!
//! Long runs: [`downsample`] bounds every chart to [`MAX_CHART_POINTS`]
//! points per series, keeping each bucket's lowest and highest value so
//! that latency peaks stay visible.

use serde_json::Value;

/// Most points a chart series holds in a page. Longer series (a 24-hour
/// run at 1 s intervals has 86,400 rows) are cut into
/// `MAX_CHART_POINTS / 2` buckets of consecutive rows, each drawn as two
/// points: its lowest and its highest value. Listed in `docs/limits.md`.
pub const MAX_CHART_POINTS: usize = 2_000;

/// The page template (`{{name}}` placeholders).
const PAGE: &str = include_str!("../assets/html/page.html");
/// The style sheet of every page.
const CSS: &str = include_str!("../assets/html/report.css");
/// The script that draws the charts.
const JS: &str = include_str!("../assets/html/report.js");

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `value` as JSON that is safe inside a `<script>` element: `<`, `>` and
/// `&` (and the line separators JavaScript once rejected) as `\uXXXX`
/// escapes, which JSON reads back as the same characters.
pub fn json_script(value: &Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Markdown (the tables and lists of `report.md` / `compare.md`) as HTML.
/// HTML inside the markdown is shown as text, never passed through, and
/// images are left out (a page fetches nothing).
pub fn markdown(md: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
    let mut in_image = 0usize;
    let events = Parser::new_ext(md, Options::ENABLE_TABLES).filter_map(|e| match e {
        Event::Html(t) | Event::InlineHtml(t) if in_image == 0 => Some(Event::Text(t)),
        Event::Start(Tag::Image { .. }) => {
            in_image += 1;
            None
        }
        Event::End(TagEnd::Image) => {
            in_image = in_image.saturating_sub(1);
            None
        }
        _ if in_image > 0 => None,
        e => Some(e),
    });
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, events);
    out
}

/// One series' values after [`downsample`]: `None` is a gap.
pub type Column = Vec<Option<f64>>;

/// Bounds `xs` and the series `ys` (each as long as `xs`) to at most
/// `max_points` points (at least 2). Short inputs are returned as they
/// are. Longer ones are cut into `max_points / 2` buckets of consecutive
/// rows; each bucket gives two points, at its first and its last row's x,
/// and each series takes there its lowest and its highest value in the
/// bucket, in the order they happened (gaps ignored), so the envelope of
/// every series — its peaks in particular — is kept.
pub fn downsample(xs: &[f64], ys: &[Column], max_points: usize) -> (Vec<f64>, Vec<Column>) {
    let n = xs.len();
    let max_points = max_points.max(2);
    if n <= max_points {
        return (xs.to_vec(), ys.to_vec());
    }
    let buckets = max_points / 2;
    let mut out_x = Vec::with_capacity(buckets * 2);
    let mut out_y: Vec<Column> = ys.iter().map(|_| Vec::with_capacity(buckets * 2)).collect();
    for b in 0..buckets {
        let (lo, hi) = (b * n / buckets, (b + 1) * n / buckets);
        if lo >= hi {
            continue;
        }
        let two = hi - lo > 1;
        out_x.push(xs[lo]);
        if two {
            out_x.push(xs[hi - 1]);
        }
        for (col, out) in ys.iter().zip(out_y.iter_mut()) {
            // (index, value) of the bucket's lowest and highest value.
            let mut min: Option<(usize, f64)> = None;
            let mut max: Option<(usize, f64)> = None;
            for (i, v) in col.iter().enumerate().take(hi).skip(lo) {
                let Some(v) = *v else { continue };
                if min.is_none_or(|(_, m)| v < m) {
                    min = Some((i, v));
                }
                if max.is_none_or(|(_, m)| v > m) {
                    max = Some((i, v));
                }
            }
            match (min, max) {
                (Some((imin, vmin)), Some((imax, vmax))) if two => {
                    if imin <= imax {
                        out.extend([Some(vmin), Some(vmax)]);
                    } else {
                        out.extend([Some(vmax), Some(vmin)]);
                    }
                }
                (Some((_, v)), _) if !two => out.push(Some(v)),
                _ if two => out.extend([None, None]),
                _ => out.push(None),
            }
        }
    }
    (out_x, out_y)
}

/// A chart of series sharing one x, for the page's JSON: `series` are
/// `(label, axis)` with axis 0 left, 1 right; `cols` as long as `xs`.
/// Downsampled to [`MAX_CHART_POINTS`]; the note says so when it was.
pub struct Chart<'a> {
    /// Element id suffix (`chart-<id>`).
    pub id: String,
    /// Title above the chart.
    pub title: String,
    /// X-axis label.
    pub x: &'a str,
    /// Left axis label.
    pub y: &'a str,
    /// Right axis label, if a series uses axis 1.
    pub y2: Option<&'a str>,
    /// A logarithmic left axis (values at or below zero become gaps).
    pub log: bool,
    /// `(label, axis)` per series.
    pub series: Vec<(String, u8)>,
    /// X values.
    pub xs: Vec<f64>,
    /// One column per series.
    pub cols: Vec<Column>,
}

/// Rounds to 4 significant digits, to keep the JSON small (the charts
/// draw at most a few hundred pixels high).
fn round4(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() { v } else { 0.0 };
    }
    let mag = v.abs().log10().floor() as i32;
    let scale = 10f64.powi(3 - mag);
    (v * scale).round() / scale
}

fn column_json(c: &[Option<f64>]) -> Value {
    Value::Array(
        c.iter()
            .map(|v| v.map_or(Value::Null, |v| serde_json::json!(round4(v))))
            .collect(),
    )
}

fn rows_note(rows: usize, points: usize) -> Option<String> {
    (points < rows).then(|| {
        format!(
            "{rows} rows drawn as {points} points: the lowest and highest value of each run of {} rows",
            rows.div_ceil(points / 2)
        )
    })
}

impl Chart<'_> {
    /// The chart's JSON (downsampled).
    pub fn json(&self) -> Value {
        let (xs, mut cols) = downsample(&self.xs, &self.cols, MAX_CHART_POINTS);
        if self.log {
            for v in cols.iter_mut().flatten() {
                *v = v.filter(|v| *v > 0.0);
            }
        }
        let mut data = vec![Value::Array(
            xs.iter().map(|x| serde_json::json!(round4(*x))).collect(),
        )];
        data.extend(cols.iter().map(|c| column_json(c)));
        serde_json::json!({
            "id": self.id,
            "title": self.title,
            "x": self.x,
            "y": self.y,
            "y2": self.y2,
            "log": self.log,
            "series": self.series.iter().map(|(l, a)| serde_json::json!({"label": l, "axis": a})).collect::<Vec<_>>(),
            "data": data,
            "note": rows_note(self.xs.len(), xs.len()),
        })
    }
}

/// One run's line of an overlay chart (runs have their own x).
pub struct Overlay {
    /// Legend label (the run's name).
    pub label: String,
    /// X values.
    pub xs: Vec<f64>,
    /// Y values.
    pub ys: Column,
}

/// An overlay chart's JSON: each run downsampled on its own.
pub fn overlay_json(id: &str, title: &str, x: &str, y: &str, runs: &[Overlay]) -> Value {
    let mut notes = Vec::new();
    let lines: Vec<Value> = runs
        .iter()
        .map(|r| {
            let (xs, cols) = downsample(&r.xs, std::slice::from_ref(&r.ys), MAX_CHART_POINTS);
            if let Some(n) = rows_note(r.xs.len(), xs.len()) {
                notes.push(format!("{}: {n}", r.label));
            }
            serde_json::json!({
                "label": r.label,
                "x": xs.iter().map(|v| round4(*v)).collect::<Vec<_>>(),
                "y": cols.first().map_or(Value::Array(Vec::new()), |c| column_json(c)),
            })
        })
        .collect();
    serde_json::json!({
        "id": id,
        "title": title,
        "x": x,
        "y": y,
        "overlay": lines,
        "note": (!notes.is_empty()).then(|| notes.join("; ")),
    })
}

/// The placeholder `<div>` of chart `id`.
pub fn chart_div(id: &str) -> String {
    format!("<div class=\"chart\" id=\"chart-{}\"></div>\n", esc(id))
}

/// A whole page: `title` (text), `body` (HTML, already escaped), `charts`
/// (the JSON of each chart, whose `<div>`s the body holds).
pub fn page(title: &str, body: &str, charts: Vec<Value>) -> String {
    let data = json_script(&serde_json::json!({ "charts": charts }));
    let mut out = String::with_capacity(
        PAGE.len() + basalt_webui::UPLOT_JS.len() + body.len() + data.len() + 16_384,
    );
    let mut rest = PAGE;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        match &after[..end] {
            "title" => out.push_str(&esc(title)),
            "version" => out.push_str(env!("CARGO_PKG_VERSION")),
            "uplot_version" => out.push_str(basalt_webui::UPLOT_VERSION),
            "uplot_css" => out.push_str(basalt_webui::UPLOT_CSS),
            "uplot_license" => out.push_str(&basalt_webui::UPLOT_LICENSE.replace("*/", "* /")),
            "uplot_js" => out.push_str(basalt_webui::UPLOT_JS),
            "css" => out.push_str(CSS),
            "js" => out.push_str(JS),
            "body" => out.push_str(body),
            "data" => out.push_str(&data),
            other => {
                out.push_str("{{");
                out.push_str(other);
                out.push_str("}}");
            }
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_are_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
        let v = serde_json::json!({"label": "get</script><script>alert(1)</script>"});
        let j = json_script(&v);
        assert!(!j.contains('<') && !j.contains('>'), "{j}");
        let back: Value = serde_json::from_str(&j).expect("still JSON");
        assert_eq!(back, v, "the escapes read back as the same text");
    }

    #[test]
    fn markdown_keeps_tables_and_escapes_html() {
        let html = markdown(
            "| op | n |\n|---|---:|\n| <b>x</b></script> | 3 |\n\n![summary](summary.png)\n",
        );
        assert!(html.contains("<table>"), "{html}");
        assert!(
            html.contains("&lt;b&gt;x&lt;/b&gt;&lt;/script&gt;"),
            "{html}"
        );
        assert!(!html.contains("<img"), "no image: {html}");
        assert!(!html.contains("</script>"), "{html}");
    }

    #[test]
    fn downsampling_is_bounded_and_keeps_the_peaks() {
        let n = 86_400;
        let xs: Vec<f64> = (1..=n).map(f64::from).collect();
        // A slow wave with one spike and one dip, and a gap.
        let mut ys: Column = (0..n)
            .map(|i| Some(100.0 + (f64::from(i) / 1000.0).sin()))
            .collect();
        ys[43_210] = Some(9_999.0);
        ys[777] = Some(-5.0);
        ys[50_000] = None;
        let (dx, dy) = downsample(&xs, &[ys.clone()], MAX_CHART_POINTS);
        assert!(dx.len() <= MAX_CHART_POINTS, "{} points", dx.len());
        assert!(dx.len() >= MAX_CHART_POINTS - 2, "{} points", dx.len());
        assert_eq!(dy[0].len(), dx.len());
        let vals: Vec<f64> = dy[0].iter().flatten().copied().collect();
        assert!(vals.contains(&9_999.0), "the spike is kept");
        assert!(vals.contains(&-5.0), "the dip is kept");
        assert!(dx.windows(2).all(|w| w[0] <= w[1]), "x stays sorted");
        assert_eq!(dx.first(), Some(&1.0));
        assert_eq!(dx.last(), Some(&f64::from(n)));
        // Short series are untouched.
        let (sx, sy) = downsample(&xs[..10], &[ys[..10].to_vec()], MAX_CHART_POINTS);
        assert_eq!(sx, xs[..10].to_vec());
        assert_eq!(sy[0], ys[..10].to_vec());
        // An all-gap bucket stays a gap.
        let gaps: Column = vec![None; 5000];
        let (_, g) = downsample(&xs[..5000], &[gaps], 100);
        assert!(g[0].iter().all(Option::is_none));
        assert_eq!(g[0].len(), 100);
    }

    #[test]
    fn a_page_is_self_contained() {
        let c = Chart {
            id: "t".into(),
            title: "T".into(),
            x: "x",
            y: "y",
            y2: None,
            log: false,
            series: vec![("a".into(), 0)],
            xs: vec![1.0, 2.0],
            cols: vec![vec![Some(1.0), None]],
        };
        let p = page("a <title>", &chart_div("t"), vec![c.json()]);
        assert!(p.contains("<title>a &lt;title&gt;</title>"));
        assert!(p.contains(basalt_webui::UPLOT_JS));
        assert!(p.contains("Leon Sorokin"), "the licence is embedded");
        assert!(
            p.contains("\"data\":[[1.0,2.0],[1.0,null]]"),
            "{}",
            &p[p.len() - 9000..]
        );
        assert!(!p.contains("{{"), "every placeholder filled");
        for fetch in ["src=\"http", "href=\"http", "<link ", "src=\""] {
            assert!(!p.contains(fetch), "nothing fetched: {fetch}");
        }
    }
}
