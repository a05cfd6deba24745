//! Security on the HTTP listeners, as Riak's webmachine resources: with
//! security enabled the plain listener (`http_listen`) answers only
//! `/ping` (credentials must not travel in clear); the HTTPS listener
//! (`https_listen`) asks for HTTP basic auth (401 with
//! `WWW-Authenticate` without it), authenticates the user against the
//! sources (password, trust, or the verified client certificate's common
//! name), then gives each route the permission [`rule`] names — the same
//! permissions as the PB codes of `api::pb::auth::rule`.
//!
//! [`rule`] is the one table of HTTP routes and their permissions; a route
//! it does not name is refused (fail closed), and a unit test fails when
//! the router serves a pattern the table does not name.
//!
//! A connection that authenticated once is not hashed again for the same
//! `Authorization` header (PBKDF2 costs tens of milliseconds); like a PB
//! session, it keeps its user until it closes. Failed logins back off as
//! on PB (`Security::login`): during a cool-down the answer is 429 with
//! `Retry-After`, without the password hashed; 503 when no verification
//! slot frees in time.

use super::text;
use crate::security::{LoginError, Rule, Security};
use axum::extract::{MatchedPath, RawPathParams, Request};
use axum::http::{header, Method, StatusCode};
use axum::response::Response;
use base64::Engine as _;
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;

/// What the listener knows about a connection, put in each request's
/// extensions.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// The client's address.
    pub peer: SocketAddr,
    /// The connection runs over TLS (the HTTPS listener).
    pub tls: bool,
    /// The common name of the verified client certificate, if any.
    pub cert_cn: Option<String>,
    /// The `Authorization` header that authenticated on this connection,
    /// and its user.
    pub verified: Arc<Mutex<Option<Verified>>>,
}

/// An `Authorization` header that authenticated, and its user.
pub type Verified = (Vec<u8>, String);

/// The authenticated user of a request (an extension set by
/// [`authenticate`]).
#[derive(Debug, Clone)]
pub struct User(pub String);

/// The permission of every route pattern of the router (as registered,
/// e.g. `/types/{t}/buckets/{b}/keys/{k}`) and method; `None` for a
/// pattern this table does not know.
pub fn rule(pattern: &str, method: &Method) -> Option<Rule> {
    use Rule::*;
    let read = method == Method::GET || method == Method::HEAD;
    Some(match pattern {
        "/ping" | "/" | "/stats" | "/metrics" => Open,
        // The anti-entropy fold queries (`aae::http`), each route by name.
        "/aaebucketlist"
        | "/cachedtrees/{*rest}"
        | "/rangetrees/{*rest}"
        | "/siblings/{*rest}"
        | "/objectsizes/{*rest}"
        | "/objectstats/{*rest}"
        | "/tombs/{*rest}"
        | "/reap/{*rest}"
        | "/erase/{*rest}" => Any("basalt.aae_fold"),
        "/mapred" => Any("riak_kv.mapreduce"),
        // The web console (`crate::console`): views and actions alike.
        p if p == "/console" || p.starts_with("/console/") => Any("basalt.admin"),
        "/basalt/replicas/buckets/{b}/keys/{k}"
        | "/basalt/replicas/types/{t}/buckets/{b}/keys/{k}" => Bucket("riak_kv.get"),
        "/buckets" | "/types/{t}/buckets" => Type("riak_kv.list_buckets"),
        "/types/{t}/props" if read => Type("riak_core.get_bucket_type"),
        "/types/{t}/props" => Type("riak_core.set_bucket_type"),
        "/buckets/{b}/props" | "/types/{t}/buckets/{b}/props" if read => {
            Bucket("riak_core.get_bucket")
        }
        "/buckets/{b}/props" | "/types/{t}/buckets/{b}/props" => Bucket("riak_core.set_bucket"),
        "/buckets/{b}/keys" | "/types/{t}/buckets/{b}/keys" if read => Bucket("riak_kv.list_keys"),
        "/buckets/{b}/keys" | "/types/{t}/buckets/{b}/keys" => Bucket("riak_kv.put"),
        "/buckets/{b}/keys/{k}" | "/types/{t}/buckets/{b}/keys/{k}" => match *method {
            Method::DELETE => Bucket("riak_kv.delete"),
            Method::PUT | Method::POST => Bucket("riak_kv.put"),
            _ => Bucket("riak_kv.get"),
        },
        "/buckets/{b}/keys/{k}/preflist" | "/types/{t}/buckets/{b}/keys/{k}/preflist" => {
            Bucket("riak_kv.get_preflist")
        }
        "/types/{t}/buckets/{b}/datatypes" => Bucket("riak_kv.put"),
        "/types/{t}/buckets/{b}/datatypes/{k}" | "/buckets/{b}/counters/{k}" if read => {
            Bucket("riak_kv.get")
        }
        "/types/{t}/buckets/{b}/datatypes/{k}" | "/buckets/{b}/counters/{k}" => {
            Bucket("riak_kv.put")
        }
        "/buckets/{b}/index/{f}/{v}"
        | "/buckets/{b}/index/{f}/{s}/{e}"
        | "/types/{t}/buckets/{b}/index/{f}/{v}"
        | "/types/{t}/buckets/{b}/index/{f}/{s}/{e}" => Bucket("riak_kv.index"),
        _ => return None,
    })
}

fn refuse(
    security: &Security,
    info: Option<&ConnInfo>,
    user: Option<&str>,
    status: StatusCode,
    why: &str,
) -> Response {
    let peer = info.map_or_else(|| "http".to_string(), |i| i.peer.to_string());
    security.refused(&peer, user, why);
    let mut r = text(status, why);
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Basic realm=\"Riak\""),
        );
    }
    r
}

/// `user:password` of a basic `Authorization` header.
fn basic_credentials(value: &[u8]) -> Option<(String, String)> {
    let s = std::str::from_utf8(value).ok()?;
    let (scheme, b64) = s.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let raw = String::from_utf8(raw).ok()?;
    let (u, p) = raw.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

/// The outer security layer of both listeners: with security enabled,
/// plain HTTP serves `/ping` only; HTTPS authenticates every request but
/// `/ping` and marks it with its [`User`].
pub async fn authenticate(
    axum::extract::State(security): axum::extract::State<Arc<Security>>,
    mut req: Request,
    next: axum::middleware::Next,
) -> Response {
    if !security.enabled() || req.uri().path() == "/ping" {
        return next.run(req).await;
    }
    let info = req.extensions().get::<ConnInfo>().cloned();
    let console = req.uri().path() == "/console" || req.uri().path().starts_with("/console/");
    let Some(info) = info.filter(|i| i.tls) else {
        if console {
            return refuse(
                &security,
                None,
                None,
                StatusCode::FORBIDDEN,
                "Security is enabled: the console is served over HTTPS only (https_listen), to a user with the basalt.admin permission",
            );
        }
        return refuse(
            &security,
            None,
            None,
            StatusCode::FORBIDDEN,
            "Security is enabled: the plain HTTP listener refuses requests; use HTTPS (https_listen) or PB with STARTTLS, and a user",
        );
    };
    let Some(header) = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes().to_vec())
    else {
        return refuse(
            &security,
            Some(&info),
            None,
            StatusCode::UNAUTHORIZED,
            "Authentication required (HTTP basic auth)",
        );
    };
    let cached = info
        .verified
        .lock()
        .as_ref()
        .filter(|(h, _)| *h == header)
        .map(|(_, u)| u.clone());
    let user = match cached {
        Some(u) => u,
        None => {
            let Some((user, password)) = basic_credentials(&header) else {
                return refuse(
                    &security,
                    Some(&info),
                    None,
                    StatusCode::UNAUTHORIZED,
                    "Malformed Authorization header (HTTP basic auth)",
                );
            };
            // PBKDF2 is slow on purpose: off the async workers, a bounded
            // number at once, and not at all for a pair cooling down.
            let verdict = security
                .login(&user, &password, info.peer.ip(), info.cert_cn.as_deref())
                .await;
            match verdict {
                Ok(()) => {
                    *info.verified.lock() = Some((header, user.clone()));
                    user
                }
                Err(e) => {
                    let status = match &e {
                        LoginError::LockedOut(_) => StatusCode::TOO_MANY_REQUESTS,
                        LoginError::Busy => StatusCode::SERVICE_UNAVAILABLE,
                        LoginError::Task(_) => StatusCode::INTERNAL_SERVER_ERROR,
                        LoginError::Denied(_) => StatusCode::UNAUTHORIZED,
                    };
                    let mut r = refuse(&security, Some(&info), Some(&user), status, &e.to_string());
                    if let LoginError::LockedOut(l) = &e {
                        r.headers_mut()
                            .insert(header::RETRY_AFTER, header::HeaderValue::from(l.retry_secs));
                    }
                    return r;
                }
            }
        }
    };
    req.extensions_mut().insert(User(user));
    next.run(req).await
}

/// The inner layer (after routing): the permission [`rule`] gives the
/// matched route, on the type and bucket its path names.
pub async fn authorize(
    axum::extract::State(security): axum::extract::State<Arc<Security>>,
    matched: Option<MatchedPath>,
    params: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    if !security.enabled() || req.uri().path() == "/ping" {
        return next.run(req).await;
    }
    let info = req.extensions().get::<ConnInfo>().cloned();
    let Some(User(user)) = req.extensions().get::<User>().cloned() else {
        return refuse(
            &security,
            info.as_ref(),
            None,
            StatusCode::UNAUTHORIZED,
            "Authentication required",
        );
    };
    let pattern = matched.as_ref().map_or("", |m| m.as_str());
    let Some(rule) = rule(pattern, req.method()) else {
        let why = format!("no permission rule for {} {pattern}", req.method());
        return refuse(
            &security,
            info.as_ref(),
            Some(&user),
            StatusCode::FORBIDDEN,
            &why,
        );
    };
    let Ok(params) = params else {
        return text(StatusCode::BAD_REQUEST, "path segments must be valid UTF-8");
    };
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_bytes().to_vec())
    };
    let (btype, bucket) = (param("t"), param("b"));
    match security.permit(&user, rule, btype.as_deref(), bucket.as_deref()) {
        Ok(()) => next.run(req).await,
        Err(e) => refuse(
            &security,
            info.as_ref(),
            Some(&user),
            StatusCode::FORBIDDEN,
            &e.to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_has_a_rule_for_every_method() {
        let patterns = crate::server::http::route_patterns();
        assert!(patterns.len() > 20, "{patterns:?}");
        for p in &patterns {
            for m in [
                Method::GET,
                Method::HEAD,
                Method::PUT,
                Method::POST,
                Method::DELETE,
                Method::OPTIONS,
            ] {
                assert!(
                    rule(p, &m).is_some(),
                    "route {m} {p} has no permission rule"
                );
            }
        }
    }

    #[test]
    fn routes_map_to_the_pb_permissions() {
        let r = |p: &str, m: Method| rule(p, &m);
        assert_eq!(
            r("/types/{t}/buckets/{b}/keys/{k}", Method::GET),
            Some(Rule::Bucket("riak_kv.get"))
        );
        assert_eq!(
            r("/buckets/{b}/keys/{k}", Method::DELETE),
            Some(Rule::Bucket("riak_kv.delete"))
        );
        assert_eq!(
            r("/buckets/{b}/keys", Method::POST),
            Some(Rule::Bucket("riak_kv.put"))
        );
        assert_eq!(
            r("/types/{t}/props", Method::PUT),
            Some(Rule::Type("riak_core.set_bucket_type"))
        );
        assert_eq!(
            r("/mapred", Method::POST),
            Some(Rule::Any("riak_kv.mapreduce"))
        );
        assert_eq!(
            r("/cachedtrees/{*rest}", Method::GET),
            Some(Rule::Any("basalt.aae_fold"))
        );
        assert_eq!(r("/nosuch/{*rest}", Method::GET), None);
        assert_eq!(r("/not/a/route", Method::GET), None);
    }

    #[test]
    fn basic_credentials_parse() {
        let h = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:pa:ss")
        );
        assert_eq!(
            basic_credentials(h.as_bytes()),
            Some(("alice".into(), "pa:ss".into()))
        );
        assert_eq!(basic_credentials(b"Bearer xyz"), None);
        assert_eq!(basic_credentials(b"Basic !!!"), None);
        assert_eq!(basic_credentials(b"Basic"), None);
        assert_eq!(basic_credentials(&[0xff, 0xfe]), None);
    }
}
