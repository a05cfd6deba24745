//! Bench reports in the console: `GET /console/api/reports` lists the
//! HTML reports under the `bench_results_dir` setting — `index.html` at
//! its top and each run directory's `report.html` and `compare.html`
//! (one level down) — newest first, at most [`CONSOLE_MAX_REPORTS`];
//! `GET /console/reports/PATH` serves one of them read-only.
//!
//! Only those three shapes of path are served: `index.html` or
//! `DIR/report.html` / `DIR/compare.html` with `DIR` one plain name (no
//! `..`, no separator, no leading dot); the file's canonical path must lie
//! under the directory's (a symbolic link out of it is refused), must be a
//! regular file and at most [`CONSOLE_MAX_REPORT_BYTES`]. Reports are
//! served in a sandbox (their own scripts run; they cannot act as the
//! console).

use super::{json, Console};
use crate::limits::{CONSOLE_MAX_REPORTS, CONSOLE_MAX_REPORT_BYTES};
use crate::node::Node;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// The report files of a run directory.
const RUN_FILES: [&str; 2] = ["report.html", "compare.html"];

/// One listed report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// Its path under the results directory (`DIR/report.html`).
    pub path: String,
    /// Its size, bytes.
    pub bytes: u64,
    /// When it was last written, seconds since the epoch.
    pub modified: u64,
}

/// Whether `name` is one plain path component.
fn plain(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\', '\0'])
        && name.len() <= 255
}

/// Whether `rel` is a path the console serves.
pub fn allowed(rel: &str) -> bool {
    if rel == "index.html" {
        return true;
    }
    match rel.split_once('/') {
        Some((dir, file)) => plain(dir) && RUN_FILES.contains(&file),
        None => false,
    }
}

fn report_of(root: &std::path::Path, rel: String) -> Option<Report> {
    let m = std::fs::metadata(root.join(&rel)).ok()?;
    if !m.is_file() {
        return None;
    }
    let modified = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    Some(Report {
        path: rel,
        bytes: m.len(),
        modified,
    })
}

/// The reports under `root`, newest first, at most [`CONSOLE_MAX_REPORTS`].
pub fn scan(root: &std::path::Path) -> std::io::Result<Vec<Report>> {
    let mut out = Vec::new();
    if let Some(r) = report_of(root, "index.html".into()) {
        out.push(r);
    }
    let mut runs = Vec::new();
    for e in std::fs::read_dir(root)? {
        let Ok(e) = e else { continue };
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if plain(&name) && e.file_type().is_ok_and(|t| t.is_dir()) {
            runs.push(name);
        }
    }
    for dir in runs {
        for f in RUN_FILES {
            if let Some(r) = report_of(root, format!("{dir}/{f}")) {
                out.push(r);
            }
        }
    }
    out.sort_by(|a, b| b.modified.cmp(&a.modified).then(a.path.cmp(&b.path)));
    out.truncate(CONSOLE_MAX_REPORTS);
    Ok(out)
}

fn root(node: &Node) -> Option<PathBuf> {
    let d = &node.config().bench_results_dir;
    (!d.is_empty()).then(|| PathBuf::from(d))
}

/// `GET /console/api/reports`.
pub async fn list(State(c): State<Arc<Console>>) -> Response {
    let Some(dir) = root(&c.node) else {
        return json(
            StatusCode::OK,
            &json!({"dir": null, "reports": [], "note": "no bench_results_dir is configured"}),
        );
    };
    let shown = dir.display().to_string();
    match tokio::task::spawn_blocking(move || scan(&dir)).await {
        Ok(Ok(reports)) => json(
            StatusCode::OK,
            &json!({"dir": shown, "reports": reports, "max": CONSOLE_MAX_REPORTS}),
        ),
        Ok(Err(e)) => json(
            StatusCode::OK,
            &json!({"dir": shown, "reports": [], "error": format!("reading {shown}: {e}")}),
        ),
        Err(e) => json(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"error": e.to_string()}),
        ),
    }
}

/// Reads `rel` under `root` if the rules above allow it.
fn read(root: &std::path::Path, rel: &str) -> Result<Vec<u8>, (StatusCode, String)> {
    let nf = || (StatusCode::NOT_FOUND, format!("no report {rel:?}"));
    if !allowed(rel) {
        return Err(nf());
    }
    let base = std::fs::canonicalize(root).map_err(|_| nf())?;
    let path = std::fs::canonicalize(root.join(rel)).map_err(|_| nf())?;
    if !path.starts_with(&base) {
        return Err((
            StatusCode::FORBIDDEN,
            format!("{rel:?} leads out of the results directory"),
        ));
    }
    let m = std::fs::metadata(&path).map_err(|_| nf())?;
    if !m.is_file() {
        return Err(nf());
    }
    if m.len() > CONSOLE_MAX_REPORT_BYTES {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{rel:?} is over {CONSOLE_MAX_REPORT_BYTES} bytes"),
        ));
    }
    std::fs::read(&path).map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, format!("{rel}: {e}")))
}

/// `GET /console/reports/PATH`.
pub async fn file(State(c): State<Arc<Console>>, Path(rel): Path<String>) -> Response {
    let Some(dir) = root(&c.node) else {
        return (StatusCode::NOT_FOUND, "no bench_results_dir is configured").into_response();
    };
    let res = tokio::task::spawn_blocking(move || read(&dir, &rel)).await;
    match res {
        Ok(Ok(bytes)) => {
            let mut r =
                ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], bytes).into_response();
            let h = r.headers_mut();
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            h.insert(
                "content-security-policy",
                HeaderValue::from_static(
                    "sandbox allow-scripts allow-popups; frame-ancestors 'self'",
                ),
            );
            h.insert(
                "x-content-type-options",
                HeaderValue::from_static("nosniff"),
            );
            r
        }
        Ok(Err((status, why))) => (status, why).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_report_paths_are_allowed() {
        assert!(allowed("index.html"));
        assert!(allowed("run-1/report.html"));
        assert!(allowed("run-1/compare.html"));
        for bad in [
            "../etc/passwd",
            "../x/report.html",
            "a/../report.html",
            "a/b/report.html",
            ".hidden/report.html",
            "run/other.html",
            "/etc/report.html",
            "",
            "run\\x/report.html",
        ] {
            assert!(!allowed(bad), "{bad}");
        }
    }

    #[test]
    fn scans_and_reads_only_under_the_dir() {
        let d = std::env::temp_dir().join(format!("basalt-console-reports-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("r1")).unwrap();
        std::fs::create_dir_all(d.join("r2")).unwrap();
        std::fs::write(d.join("index.html"), "<p>index").unwrap();
        std::fs::write(d.join("r1/report.html"), "<p>r1").unwrap();
        std::fs::write(d.join("r2/compare.html"), "<p>r2").unwrap();
        std::fs::write(d.join("r2/notes.txt"), "x").unwrap();
        let outside =
            std::env::temp_dir().join(format!("basalt-console-outside-{}", std::process::id()));
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("report.html"), "secret").unwrap();
        std::os::unix::fs::symlink(&outside, d.join("evil")).unwrap();
        let mut got: Vec<String> = scan(&d).unwrap().into_iter().map(|r| r.path).collect();
        got.sort();
        // The link is not a directory entry of type dir: not listed.
        assert_eq!(got, ["index.html", "r1/report.html", "r2/compare.html"]);
        assert_eq!(read(&d, "r1/report.html").unwrap(), b"<p>r1");
        assert_eq!(
            read(&d, "evil/report.html").unwrap_err().0,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            read(&d, "r2/notes.txt").unwrap_err().0,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            read(&d, "../x/report.html").unwrap_err().0,
            StatusCode::NOT_FOUND
        );
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&outside);
    }
}
