//! The HTTP listeners: every route of the HTTP API — the KV resources of
//! [`crate::api::http`] and the capabilities' own (data types, MapReduce,
//! anti-entropy folds, stats, the web console) — behind the security layers
//! ([`crate::api::http::auth`]), and the accept loop (plain or TLS, bounded
//! connections, header timeout, graceful shutdown).

// Handlers return ready-made error `Response`s on the (rare) failure path.
#![allow(clippy::result_large_err)]

use crate::aae::http as aaefold;
use crate::aae::Aae;
use crate::api::http::{auth, buckets, index, objects, preflist, replicas, wants_json};
use crate::console::Console;
use crate::datatypes::http as datatypes;
use crate::kv::Kv;
use crate::mapred::http as mapred;
use crate::mapred::MapRed;
use crate::node::Node;
use crate::server::metrics;
use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;

/// The resource map of `GET /`: resource module → path.
pub const RESOURCES: &[(&str, &str)] = &[
    ("riak_kv_wm_aaefold", "/cachedtrees"),
    ("riak_kv_wm_buckets", "/buckets"),
    ("riak_kv_wm_bucket_type", "/types"),
    ("riak_kv_wm_counter", "/buckets"),
    ("riak_kv_wm_crdt", "/types"),
    ("riak_kv_wm_index", "/buckets"),
    ("riak_kv_wm_keylist", "/buckets"),
    ("riak_kv_wm_mapred", "/mapred"),
    ("riak_kv_wm_object", "/buckets"),
    ("riak_kv_wm_ping", "/ping"),
    ("riak_kv_wm_preflist", "/types"),
    ("riak_kv_wm_props", "/buckets"),
    ("riak_kv_wm_stats", "/stats"),
];

/// The router under construction, recording each route pattern (so the
/// permission table can be checked against every route).
/// Each part's routes keep their own state: the KV resources and the data
/// types the KV layer ([`Kv`]), the folds anti-entropy ([`Aae`]), MapReduce
/// [`MapRed`], the rest (root, ping, stats) the node.
struct Routes {
    node: Router<Arc<Node>>,
    kv: Router<Arc<Kv>>,
    aae: Router<Arc<Aae>>,
    mapred: Router<Arc<MapRed>>,
    console: Router<Arc<Console>>,
    patterns: Vec<String>,
}

impl Routes {
    fn route(mut self, path: &str, m: axum::routing::MethodRouter<Arc<Node>>) -> Routes {
        self.patterns.push(path.to_string());
        self.node = self.node.route(path, m);
        self
    }

    fn aae_route(mut self, path: &str, m: axum::routing::MethodRouter<Arc<Aae>>) -> Routes {
        self.patterns.push(path.to_string());
        self.aae = self.aae.route(path, m);
        self
    }

    fn mapred_route(mut self, path: &str, m: axum::routing::MethodRouter<Arc<MapRed>>) -> Routes {
        self.patterns.push(path.to_string());
        self.mapred = self.mapred.route(path, m);
        self
    }

    fn console(mut self) -> Routes {
        for (path, m) in crate::console::routes() {
            self.patterns.push(path.to_string());
            self.console = self.console.route(path, m);
        }
        self
    }

    fn kv_route(mut self, path: &str, m: axum::routing::MethodRouter<Arc<Kv>>) -> Routes {
        self.patterns.push(path.to_string());
        self.kv = self.kv.route(path, m);
        self
    }
}

/// Every route of the HTTP API, without state or layers.
fn routes() -> Routes {
    use buckets as bk;
    let mut r = Routes {
        node: Router::new(),
        kv: Router::new(),
        aae: Router::new(),
        mapred: Router::new(),
        console: Router::new(),
        patterns: Vec::new(),
    };
    for p in aaefold::PREFIXES {
        r = r.aae_route(&format!("/{p}/{{*rest}}"), get(aaefold::fold));
    }
    r.aae_route("/aaebucketlist", get(aaefold::fold))
        .route("/", get(root))
        // Exactly `OK`, no newline: clients compare the body.
        .route(
            "/ping",
            get(|| async { ([(header::CONTENT_TYPE, "text/plain")], "OK").into_response() }),
        )
        .route("/stats", get(metrics::stats))
        .mapred_route("/mapred", axum::routing::post(mapred::mapred))
        .route("/metrics", get(metrics::metrics))
        .console()
        .kv_route(
            "/basalt/replicas/buckets/{b}/keys/{k}",
            get(replicas::replicas_default),
        )
        .kv_route(
            "/basalt/replicas/types/{t}/buckets/{b}/keys/{k}",
            get(replicas::replicas_typed),
        )
        .kv_route("/buckets", get(bk::list_buckets_default))
        .kv_route("/types/{t}/buckets", get(bk::list_buckets_typed))
        .kv_route("/types/{t}/props", any(bk::type_props))
        .kv_route("/buckets/{b}/props", any(bk::props_default))
        .kv_route("/types/{t}/buckets/{b}/props", any(bk::props_typed))
        .kv_route(
            "/buckets/{b}/keys",
            get(bk::list_keys_default).post(objects::post_default),
        )
        .kv_route(
            "/types/{t}/buckets/{b}/keys",
            get(bk::list_keys_typed).post(objects::post_typed),
        )
        .kv_route("/buckets/{b}/keys/{k}", any(objects::object_default))
        .kv_route(
            "/types/{t}/buckets/{b}/keys/{k}",
            any(objects::object_typed),
        )
        .kv_route(
            "/buckets/{b}/keys/{k}/preflist",
            get(preflist::preflist_default),
        )
        .kv_route(
            "/types/{t}/buckets/{b}/keys/{k}/preflist",
            get(preflist::preflist_typed),
        )
        .kv_route(
            "/types/{t}/buckets/{b}/datatypes",
            axum::routing::post(datatypes::update_new),
        )
        .kv_route(
            "/types/{t}/buckets/{b}/datatypes/{k}",
            get(datatypes::fetch).post(datatypes::update),
        )
        .kv_route(
            "/buckets/{b}/counters/{k}",
            get(datatypes::counter_get).post(datatypes::counter_post),
        )
        .kv_route("/buckets/{b}/index/{f}/{v}", get(index::eq_default))
        .kv_route("/buckets/{b}/index/{f}/{s}/{e}", get(index::range_default))
        .kv_route("/types/{t}/buckets/{b}/index/{f}/{v}", get(index::eq_typed))
        .kv_route(
            "/types/{t}/buckets/{b}/index/{f}/{s}/{e}",
            get(index::range_typed),
        )
}

/// Every route pattern the router serves (for the permission table's
/// check).
pub fn route_patterns() -> Vec<String> {
    routes().patterns
}

/// The router of the HTTP API over `node` (and its `console`), with the
/// security layers ([`auth`]): authentication before routing, permission
/// after.
pub fn router(node: Arc<Node>, console: Arc<Console>) -> Router {
    let r = routes();
    let security = node.security.clone();
    Router::new()
        .merge(r.kv.with_state(node.kv().clone()))
        .merge(r.aae.with_state(node.aae().clone()))
        .merge(r.mapred.with_state(node.mapred().clone()))
        .merge(r.console.with_state(console))
        .merge(r.node.with_state(node))
        .route_layer(axum::middleware::from_fn_with_state(
            security.clone(),
            auth::authorize,
        ))
        .layer(axum::middleware::from_fn_with_state(
            security,
            auth::authenticate,
        ))
}

/// Serves the HTTP API on `listener` until `shutdown` resolves; over TLS
/// with `tls` (the HTTPS listener), each connection's handshake bounded by
/// [`crate::security::tls::HANDSHAKE_TIMEOUT`].
pub async fn serve(
    listener: TcpListener,
    node: Arc<Node>,
    console: Arc<Console>,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let scheme = if tls.is_some() { "HTTPS" } else { "HTTP" };
    tracing::info!(addr = ?listener.local_addr().ok(), scheme, "HTTP listener up");
    let limits = node.config().limits.clone();
    let header_timeout = std::time::Duration::from_millis(limits.http_header_timeout_ms.max(1));
    let slots = Arc::new(tokio::sync::Semaphore::new(
        limits.http_max_connections.max(1),
    ));
    let app = router(node.clone(), console);
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(s) => s,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(error = %e, "HTTP accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(
                limit = limits.http_max_connections,
                "HTTP connection refused: too many connections (limits.http_max_connections)"
            );
            drop(stream);
            continue;
        };
        let mut info = auth::ConnInfo {
            peer,
            tls: false,
            cert_cn: None,
            verified: Arc::default(),
        };
        let (app, watcher, acceptor, node) = (
            app.clone(),
            graceful.watcher(),
            acceptor.clone(),
            node.clone(),
        );
        tokio::spawn(async move {
            match acceptor {
                None => serve_conn(stream, info, app, header_timeout, watcher).await,
                Some(acceptor) => {
                    let hs = tokio::time::timeout(
                        crate::security::tls::HANDSHAKE_TIMEOUT,
                        acceptor.accept(stream),
                    );
                    match hs.await {
                        Ok(Ok(tls)) => {
                            info.tls = true;
                            info.cert_cn = crate::security::tls::peer_common_name(tls.get_ref().1);
                            serve_conn(tls, info, app, header_timeout, watcher).await;
                        }
                        Ok(Err(e)) => node.security.refused(
                            &peer.to_string(),
                            None,
                            &format!("HTTPS TLS handshake: {e}"),
                        ),
                        Err(_) => node.security.refused(
                            &peer.to_string(),
                            None,
                            "HTTPS TLS handshake: no handshake within the time limit",
                        ),
                    }
                }
            }
            drop(slot);
        });
    }
    // Requests in progress finish; idle connections close.
    if tokio::time::timeout(std::time::Duration::from_secs(10), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("HTTP connections still open 10 s after shutdown; leaving them");
    }
    Ok(())
}

/// Serves HTTP/1 on one connection (plain or TLS), each request carrying
/// the connection's [`auth::ConnInfo`].
async fn serve_conn<S>(
    stream: S,
    info: auth::ConnInfo,
    app: Router,
    header_timeout: std::time::Duration,
    watcher: hyper_util::server::graceful::Watcher,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service =
        hyper::service::service_fn(move |mut req: axum::http::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(info.clone());
            let mut app = app.clone();
            async move {
                use tower_service::Service as _;
                app.call(req.map(Body::new)).await
            }
        });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    // Errors here are the client's (bad framing, header timeout, reset):
    // the connection ends, the server goes on.
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(error = %e, "HTTP connection ended");
    }
}

async fn root(headers: HeaderMap) -> Response {
    let link = RESOURCES
        .iter()
        .map(|(m, p)| format!("<{p}>; rel=\"{m}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let mut resp = if wants_json(&headers) {
        let map: serde_json::Map<String, serde_json::Value> = RESOURCES
            .iter()
            .map(|(m, p)| ((*m).to_string(), serde_json::Value::from(*p)))
            .collect();
        (
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::Value::Object(map).to_string(),
        )
            .into_response()
    } else {
        let items: String = RESOURCES
            .iter()
            .map(|(m, p)| format!("<li><a href=\"{p}\">{m}</a></li>"))
            .collect();
        (
            [(header::CONTENT_TYPE, "text/html")],
            format!("<html><body><ul>{items}</ul></body></html>"),
        )
            .into_response()
    };
    if let Ok(v) = HeaderValue::from_str(&link) {
        resp.headers_mut().insert(header::LINK, v);
    }
    resp
}
