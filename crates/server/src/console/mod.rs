//! The web console: every node serves it over HTTP at `/console` (and over
//! HTTPS, where it is the only way in once security is on). One page with
//! views of the cluster (members, ring, transfers), this node (vnodes,
//! backend figures, process), live charts pushed by server-sent events,
//! anti-entropy and replication, bucket types, security (read-only), the
//! bench reports under `bench_results_dir`, and actions (cluster changes,
//! bucket types, transfer limit, an anti-entropy round, a full-sync).
//!
//! The page, its script and style are plain files in `assets/`, compiled
//! in with `include_str!` beside the vendored uPlot of `basalt-webui`:
//! nothing is fetched from elsewhere and nothing is built.
//!
//! Everything the console shows comes from what `basalt admin` already
//! computes (the admin line's JSON views, [`crate::server::metrics`], the
//! vnode rows); actions run the same admin line or bucket-type calls.
//! Security: every `/console` route needs the `basalt.admin` permission
//! ([`crate::api::http::auth::rule`]); with security on, plain HTTP is
//! refused and HTTPS asks for basic auth. An action is a POST carrying the
//! session's token (fetched by the page, unreadable cross-origin) and, when
//! the browser sends one, a same-host `Origin`; each is logged with the
//! user.
//!
//! Files: `views` (the JSON views), `events` (the live stream), `actions`
//! (the POSTs), `reports` (bench reports), `process` (this process's CPU,
//! memory, open files).

mod actions;
mod events;
mod process;
mod reports;
mod views;

use crate::node::Node;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use parking_lot::Mutex;
use std::sync::Arc;
use tokio::sync::{broadcast, watch, Semaphore};

/// The console of a node: the node, the session token actions must
/// carry, the bound on live streams, the sampler they share, and the
/// closing signal that ends the streams when the node stops. One per
/// served node (`server::serve_all` makes it; every HTTP listener shares
/// it), the state of every console route.
pub struct Console {
    node: Arc<Node>,
    token: String,
    streams: Arc<Semaphore>,
    sampler: Mutex<Option<broadcast::Sender<Arc<str>>>>,
    closing: watch::Sender<bool>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console").finish_non_exhaustive()
    }
}

impl Console {
    /// The console of `node`, with a fresh random token.
    pub fn new(node: Arc<Node>) -> Console {
        let token = format!("{:032x}", rand::random::<u128>());
        Console {
            node,
            token,
            streams: Arc::new(Semaphore::new(crate::limits::CONSOLE_MAX_STREAMS)),
            sampler: Mutex::new(None),
            closing: watch::channel(false).0,
        }
    }

    /// Ends every live stream (the node is stopping).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Live streams open now.
    pub fn streams_open(&self) -> usize {
        crate::limits::CONSOLE_MAX_STREAMS - self.streams.available_permits()
    }
}

/// The console's routes, all under `/console` (the permission table gives
/// each `basalt.admin`).
pub fn routes() -> Vec<(&'static str, MethodRouter<Arc<Console>>)> {
    vec![
        ("/console", get(page)),
        ("/console/", get(page)),
        ("/console/assets/{name}", get(asset)),
        ("/console/api/session", get(views::session)),
        ("/console/api/cluster", get(views::cluster)),
        ("/console/api/node", get(views::node)),
        ("/console/api/aae", get(views::aae)),
        ("/console/api/repl", get(views::repl)),
        ("/console/api/types", get(views::types)),
        ("/console/api/security", get(views::security)),
        ("/console/api/reports", get(reports::list)),
        ("/console/reports/{*path}", get(reports::file)),
        ("/console/api/events", get(events::events)),
        ("/console/api/action", post(actions::action)),
    ]
}

const INDEX_HTML: &str = include_str!("assets/index.html");
const CONSOLE_JS: &str = include_str!("assets/console.js");
const CONSOLE_CSS: &str = include_str!("assets/console.css");

/// Headers every console page carries: no caching of live figures, no
/// framing by other sites, scripts and styles from this node only.
fn page_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

async fn page() -> Response {
    page_headers(
        (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            INDEX_HTML,
        )
            .into_response(),
    )
}

async fn asset(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    let (ctype, body) = match name.as_str() {
        "console.js" => ("text/javascript; charset=utf-8", CONSOLE_JS),
        "console.css" => ("text/css; charset=utf-8", CONSOLE_CSS),
        "uplot.js" => ("text/javascript; charset=utf-8", basalt_webui::UPLOT_JS),
        "uplot.css" => ("text/css; charset=utf-8", basalt_webui::UPLOT_CSS),
        "uplot-LICENSE.txt" => ("text/plain; charset=utf-8", basalt_webui::UPLOT_LICENSE),
        _ => return (StatusCode::NOT_FOUND, "no such asset").into_response(),
    };
    page_headers(([(header::CONTENT_TYPE, ctype)], body).into_response())
}

/// A JSON answer with `status`.
fn json(status: StatusCode, v: &serde_json::Value) -> Response {
    let mut r = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The user of a request: its authenticated name with security on, else
/// `anonymous`.
fn user_of(user: Option<&axum::Extension<crate::api::http::auth::User>>) -> String {
    user.map_or_else(|| "anonymous".to_string(), |u| u.0 .0.clone())
}
