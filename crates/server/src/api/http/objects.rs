//! Objects over HTTP (`riak_kv_wm_object`): GET / HEAD / PUT / POST /
//! DELETE at `/types/T/buckets/B/keys/K` and `/buckets/B/keys/K`, POST to
//! `.../keys` for a server-generated key. Headers: `X-Riak-Vclock`,
//! `X-Riak-Meta-*`, `X-Riak-Index-*`, `Link`, `ETag`, `Last-Modified`, the
//! conditional request headers; siblings as 300 (multipart/mixed when
//! accepted, else the vtag list).

use super::{bad, error_response, pct, pct_encode, query, read_body, text, Shared};
use crate::error::RequestError;
use crate::kv::Kv;
use crate::kv::{GetOpts, GetOutcome, PutOpts};
use crate::object::unique_id;
use crate::object::vclock::VClock;
use crate::object::{Content, RiakObject};
use crate::pb::quorum;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A quorum parameter: an integer or `one|quorum|all|default`.
pub fn parse_quorum(name: &str, v: &str) -> Result<u32, String> {
    match v {
        "one" => Ok(quorum::ONE),
        "quorum" => Ok(quorum::QUORUM),
        "all" => Ok(quorum::ALL),
        "default" => Ok(quorum::DEFAULT),
        n => n.parse::<u32>().map_err(|_| {
            format!("{name} query parameter must be an integer or one of one, quorum, all, default; got \"{v}\"")
        }),
    }
}

/// The query parameters of an object request, as `riak_kv_wm_object`
/// takes them: the quorums `r`, `pr`, `w`, `dw`, `pw`, `rw` and
/// `node_confirms` (an integer or `one|quorum|all|default`), the booleans
/// `notfound_ok` and `basic_quorum` (`true|false|default`, any case),
/// `returnbody`, `vtag`. A bad value is a 400 naming the parameter. (Riak's
/// HTTP API has no `n_val` or `sloppy_quorum`; like other unknown
/// parameters they are ignored.)
#[derive(Default)]
pub(crate) struct Params {
    r: Option<u32>,
    pr: Option<u32>,
    w: Option<u32>,
    dw: Option<u32>,
    pw: Option<u32>,
    rw: Option<u32>,
    node_confirms: Option<u32>,
    notfound_ok: Option<bool>,
    basic_quorum: Option<bool>,
    returnbody: bool,
    vtag: Option<String>,
}

fn boolean(name: &str, v: &str) -> Result<bool, String> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{name} must be true or false, got \"{v}\"")),
    }
}

/// A boolean quorum option: `true`, `false` or `default` (`None`: the
/// bucket's), in any case, as riak_kv_wm_object reads them.
pub(crate) fn option_boolean(name: &str, v: &str) -> Result<Option<bool>, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(Some(true)),
        "false" => Ok(Some(false)),
        "default" => Ok(None),
        _ => Err(format!(
            "{name} query parameter must be true, false or default; got \"{v}\""
        )),
    }
}

impl Params {
    /// The options of the GETs this request makes.
    fn get_opts(&self) -> GetOpts {
        GetOpts {
            r: self.r,
            pr: self.pr,
            notfound_ok: self.notfound_ok,
            basic_quorum: self.basic_quorum,
            n_val: None,
            sloppy_quorum: None,
        }
    }

    /// The quorums of the write this request makes.
    fn put_opts(&self) -> PutOpts {
        PutOpts {
            w: self.w,
            dw: self.dw,
            pw: self.pw,
            node_confirms: self.node_confirms,
            ..Default::default()
        }
    }
}

pub(crate) fn params(q: &[(String, String)]) -> Result<Params, String> {
    let mut p = Params::default();
    for (k, v) in q {
        let slot = match k.as_str() {
            "r" => &mut p.r,
            "pr" => &mut p.pr,
            "w" => &mut p.w,
            "dw" => &mut p.dw,
            "pw" => &mut p.pw,
            "rw" => &mut p.rw,
            "node_confirms" => &mut p.node_confirms,
            "returnbody" => {
                p.returnbody = boolean(k, v)?;
                continue;
            }
            "notfound_ok" => {
                p.notfound_ok = option_boolean(k, v)?;
                continue;
            }
            "basic_quorum" => {
                p.basic_quorum = option_boolean(k, v)?;
                continue;
            }
            "vtag" => {
                p.vtag = Some(v.clone());
                continue;
            }
            _ => continue,
        };
        *slot = Some(parse_quorum(k, v)?);
    }
    Ok(p)
}

/// `POST /buckets/B/keys`.
pub async fn post_default(State(kv): Shared, Path(b): Path<String>, req: Request) -> Response {
    object(kv, None, b, None, req).await
}

/// `POST /types/T/buckets/B/keys`.
pub async fn post_typed(
    State(kv): Shared,
    Path((t, b)): Path<(String, String)>,
    req: Request,
) -> Response {
    object(kv, Some(t), b, None, req).await
}

/// `/buckets/B/keys/K`.
pub async fn object_default(
    State(kv): Shared,
    Path((b, k)): Path<(String, String)>,
    req: Request,
) -> Response {
    object(kv, None, b, Some(k), req).await
}

/// `/types/T/buckets/B/keys/K`.
pub async fn object_typed(
    State(kv): Shared,
    Path((t, b, k)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    object(kv, Some(t), b, Some(k), req).await
}

/// Where an object lives: type (`None` = default), bucket, storage bucket.
struct Loc<'a> {
    t: Option<&'a str>,
    b: &'a str,
    sb: Vec<u8>,
}

impl Loc<'_> {
    fn bucket_path(&self) -> String {
        match self.t {
            Some(t) => format!(
                "/types/{}/buckets/{}",
                pct_encode(t.as_bytes()),
                pct_encode(self.b.as_bytes())
            ),
            None => format!("/buckets/{}", pct_encode(self.b.as_bytes())),
        }
    }

    fn key_path(&self, k: &str) -> String {
        format!("{}/keys/{}", self.bucket_path(), pct_encode(k.as_bytes()))
    }
}

async fn object(
    kv: Arc<Kv>,
    t: Option<String>,
    b: String,
    k: Option<String>,
    req: Request,
) -> Response {
    let p = match params(&query(&req)) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    let sb = match kv
        .types()
        .storage_bucket(t.as_deref().map(str::as_bytes), b.as_bytes())
    {
        Ok(sb) => sb,
        Err(e) => return error_response(e),
    };
    let loc = Loc {
        t: t.as_deref(),
        b: &b,
        sb,
    };
    if k.as_deref() == Some("") {
        return bad("Key cannot be zero-length");
    }
    let method = req.method().clone();
    let not_allowed = || text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    let r = match (method, k) {
        (Method::GET | Method::HEAD, Some(k)) => fetch(&kv, &loc, &k, &p, req.headers()).await,
        (Method::PUT, Some(k)) => store(&kv, &loc, Some(k), &p, req).await,
        (Method::POST, k) => store(&kv, &loc, k, &p, req).await,
        (Method::DELETE, Some(k)) => delete(&kv, &loc, &k, &p, req.headers()).await,
        _ => return not_allowed(),
    };
    r.unwrap_or_else(|e| e)
}

type HttpResult = Result<Response, Response>;

fn vclock_header(v: &VClock) -> HeaderValue {
    let s = base64::engine::general_purpose::STANDARD.encode(v.encode());
    HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static(""))
}

pub(crate) fn decode_vclock(name: &str, v: &HeaderValue) -> Result<VClock, Response> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v.as_bytes())
        .map_err(|_| bad(format!("{name} is not valid base64")))?;
    VClock::decode(&bytes).map_err(|e| bad(format!("{name}: {e}")))
}

fn client_vclock(h: &HeaderMap) -> Result<Option<VClock>, Response> {
    h.get("x-riak-vclock")
        .map(|v| decode_vclock("X-Riak-Vclock", v))
        .transpose()
}

fn last_modified(c: &Content) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(u64::from(c.last_mod))
}

fn etag(c: &Content) -> Option<String> {
    c.vtag
        .as_deref()
        .map(|t| format!("\"{}\"", String::from_utf8_lossy(t)))
}

/// The `Link` header of a sibling: the bucket as `rel="up"`, then each
/// stored link (`riaktag`).
fn link_header(loc: &Loc<'_>, c: &Content) -> String {
    let mut parts = vec![format!("<{}>; rel=\"up\"", loc.bucket_path())];
    for (b, k, tag) in &c.links {
        parts.push(format!(
            "</buckets/{}/keys/{}>; riaktag=\"{}\"",
            pct_encode(b),
            pct_encode(k),
            pct_encode(tag)
        ));
    }
    parts.join(", ")
}

/// The headers describing one sibling (also a multipart part's headers).
fn content_headers(loc: &Loc<'_>, c: &Content) -> Vec<(HeaderName, HeaderValue)> {
    let mut h = Vec::new();
    let hv = |b: &[u8]| HeaderValue::from_bytes(b).ok();
    let mut ct = String::from_utf8_lossy(
        c.content_type
            .as_deref()
            .unwrap_or(b"application/octet-stream"),
    )
    .into_owned();
    if let Some(cs) = &c.charset {
        ct.push_str("; charset=");
        ct.push_str(&String::from_utf8_lossy(cs));
    }
    if let Some(v) = hv(ct.as_bytes()) {
        h.push((header::CONTENT_TYPE, v));
    }
    if let Some(v) = c.content_encoding.as_deref().and_then(hv) {
        h.push((header::CONTENT_ENCODING, v));
    }
    if let Some(v) = hv(link_header(loc, c).as_bytes()) {
        h.push((header::LINK, v));
    }
    if let Some(v) = etag(c).and_then(|e| hv(e.as_bytes())) {
        h.push((header::ETAG, v));
    }
    if let Some(v) = hv(httpdate::fmt_http_date(last_modified(c)).as_bytes()) {
        h.push((header::LAST_MODIFIED, v));
    }
    if c.deleted {
        h.push((
            HeaderName::from_static("x-riak-deleted"),
            HeaderValue::from_static("true"),
        ));
    }
    for (name, value) in &c.usermeta {
        let n = format!("x-riak-meta-{}", String::from_utf8_lossy(name));
        if let (Ok(n), Some(v)) = (HeaderName::from_bytes(n.as_bytes()), hv(value)) {
            h.push((n, v));
        }
    }
    let mut fields: Vec<(&[u8], Vec<&[u8]>)> = Vec::new();
    for (f, term) in &c.indexes {
        match fields.iter_mut().find(|(n, _)| *n == f.as_slice()) {
            Some((_, v)) => v.push(term),
            None => fields.push((f, vec![term])),
        }
    }
    for (f, terms) in fields {
        let n = format!("x-riak-index-{}", String::from_utf8_lossy(f));
        let v = terms.join(&b", "[..]);
        if let (Ok(n), Some(v)) = (HeaderName::from_bytes(n.as_bytes()), hv(&v)) {
            h.push((n, v));
        }
    }
    h
}

/// A response carrying one sibling.
fn content_response(loc: &Loc<'_>, o: &RiakObject, c: &Content, status: StatusCode) -> Response {
    let mut resp = Response::new(Body::from(c.value.clone()));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    for (n, v) in content_headers(loc, c) {
        h.append(n, v);
    }
    h.insert("x-riak-vclock", vclock_header(&o.vclock));
    resp
}

fn accepts_multipart(h: &HeaderMap) -> bool {
    h.get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("multipart/mixed"))
}

/// A part header's name as Riak writes it (`Content-Type`, `Etag`,
/// `X-Riak-Meta-<name as stored>`).
fn part_header_name(n: &str) -> String {
    for (lower, canon) in [
        ("x-riak-meta-", "X-Riak-Meta-"),
        ("x-riak-index-", "X-Riak-Index-"),
    ] {
        if let Some(rest) = n.strip_prefix(lower) {
            return format!("{canon}{rest}");
        }
    }
    n.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// The siblings as a `multipart/mixed` body (as `riak_kv_wm_object`).
fn multipart(loc: &Loc<'_>, o: &RiakObject) -> Response {
    let boundary = String::from_utf8_lossy(&unique_id()).into_owned();
    let mut body = Vec::new();
    for c in o.newest_first() {
        body.extend_from_slice(format!("\r\n--{boundary}\r\n").as_bytes());
        for (n, v) in content_headers(loc, c) {
            body.extend_from_slice(part_header_name(n.as_str()).as_bytes());
            body.extend_from_slice(b": ");
            body.extend_from_slice(v.as_bytes());
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(&c.value);
    }
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::MULTIPLE_CHOICES;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("multipart/mixed; boundary={boundary}")) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert("x-riak-vclock", vclock_header(&o.vclock));
    resp
}

/// One sibling (200 or `ok`), or 300: multipart when `headers` accept it,
/// else the vtag list.
fn object_response(
    loc: &Loc<'_>,
    o: &RiakObject,
    vtag: Option<&str>,
    ok: StatusCode,
    headers: &HeaderMap,
) -> Response {
    if let Some(want) = vtag {
        return match o
            .contents
            .iter()
            .find(|c| c.vtag.as_deref() == Some(want.as_bytes()))
        {
            Some(c) => content_response(loc, o, c, ok),
            None => text(StatusCode::NOT_FOUND, "not found"),
        };
    }
    match o.contents.as_slice() {
        [c] => content_response(loc, o, c, ok),
        _ if accepts_multipart(headers) => multipart(loc, o),
        cs => {
            let mut body = String::from("Siblings:\n");
            debug_assert!(cs.len() > 1);
            for c in o.newest_first() {
                body.push_str(&String::from_utf8_lossy(c.vtag.as_deref().unwrap_or(b"")));
                body.push('\n');
            }
            let mut resp = text(StatusCode::MULTIPLE_CHOICES, body);
            resp.headers_mut()
                .insert("x-riak-vclock", vclock_header(&o.vclock));
            resp
        }
    }
}

/// The conditional request headers.
#[derive(Default)]
struct Conditions {
    if_match: Option<Vec<String>>,
    if_none_match: Option<Vec<String>>,
    if_modified_since: Option<SystemTime>,
    if_unmodified_since: Option<SystemTime>,
}

/// Why a condition stopped the request.
#[derive(Debug, PartialEq)]
enum Failed {
    /// 304 for GET / HEAD.
    NotModified,
    /// 412.
    Precondition,
}

impl Conditions {
    fn parse(h: &HeaderMap) -> Result<Conditions, Response> {
        let s = |name: &header::HeaderName| -> Result<Option<&str>, Response> {
            h.get(name)
                .map(|v| {
                    v.to_str().map_err(|_| {
                        bad(format!(
                            "Malformed {} header",
                            part_header_name(name.as_str())
                        ))
                    })
                })
                .transpose()
        };
        let tags = |v: Option<&str>| {
            v.map(|v| {
                v.split(',')
                    .map(|t| t.trim().trim_start_matches("W/").to_string())
                    .filter(|t| !t.is_empty())
                    .collect::<Vec<_>>()
            })
        };
        let date = |name: &header::HeaderName| -> Result<Option<SystemTime>, Response> {
            s(name)?
                .map(|v| {
                    httpdate::parse_http_date(v).map_err(|_| {
                        bad(format!(
                            "Malformed {} header: \"{v}\"",
                            part_header_name(name.as_str())
                        ))
                    })
                })
                .transpose()
        };
        Ok(Conditions {
            if_match: tags(s(&header::IF_MATCH)?),
            if_none_match: tags(s(&header::IF_NONE_MATCH)?),
            if_modified_since: date(&header::IF_MODIFIED_SINCE)?,
            if_unmodified_since: date(&header::IF_UNMODIFIED_SINCE)?,
        })
    }

    fn any(&self) -> bool {
        self.if_match.is_some()
            || self.if_none_match.is_some()
            || self.if_modified_since.is_some()
            || self.if_unmodified_since.is_some()
    }

    /// Checks the conditions against the current resource (`None`: absent;
    /// `Some(None)`: present without one ETag, e.g. siblings), in
    /// webmachine's order. `read` = GET / HEAD.
    fn check(&self, current: Option<Option<&Content>>, read: bool) -> Result<(), Failed> {
        let tag = current.flatten().and_then(etag);
        let matches = |list: &[String]| {
            list.iter()
                .any(|t| (t == "*" && current.is_some()) || tag.as_deref() == Some(t.as_str()))
        };
        if let Some(list) = &self.if_match {
            if !matches(list) {
                return Err(Failed::Precondition);
            }
        }
        let lm = current.flatten().map(last_modified);
        if let (Some(since), Some(lm)) = (self.if_unmodified_since, lm) {
            if lm > since {
                return Err(Failed::Precondition);
            }
        }
        if let Some(list) = &self.if_none_match {
            if matches(list) {
                return Err(if read {
                    Failed::NotModified
                } else {
                    Failed::Precondition
                });
            }
        }
        if let (Some(since), Some(lm)) = (self.if_modified_since, lm) {
            if lm <= since && self.if_none_match.is_none() {
                return Err(if read {
                    Failed::NotModified
                } else {
                    Failed::Precondition
                });
            }
        }
        Ok(())
    }
}

fn failed_response(f: Failed) -> Response {
    match f {
        Failed::NotModified => StatusCode::NOT_MODIFIED.into_response(),
        Failed::Precondition => text(StatusCode::PRECONDITION_FAILED, "precondition failed"),
    }
}

/// The one sibling a condition is checked against: `vtag`'s, or the only one.
fn chosen<'a>(o: &'a RiakObject, vtag: Option<&str>) -> Option<&'a Content> {
    match vtag {
        Some(v) => o
            .contents
            .iter()
            .find(|c| c.vtag.as_deref() == Some(v.as_bytes())),
        None => match o.contents.as_slice() {
            [c] => Some(c),
            _ => None,
        },
    }
}

async fn fetch(kv: &Kv, loc: &Loc<'_>, k: &str, p: &Params, h: &HeaderMap) -> HttpResult {
    let cond = Conditions::parse(h)?;
    let opts = p.get_opts();
    match kv
        .get(&loc.sb, k.as_bytes(), &opts)
        .await
        .map_err(error_response)?
    {
        GetOutcome::NotFound => {
            cond.check(None, true).map_err(failed_response)?;
            Ok(text(StatusCode::NOT_FOUND, "not found"))
        }
        GetOutcome::Tombstone(vc) => {
            cond.check(None, true).map_err(failed_response)?;
            let mut resp = text(StatusCode::NOT_FOUND, "not found");
            resp.headers_mut()
                .insert("x-riak-vclock", vclock_header(&vc));
            Ok(resp)
        }
        GetOutcome::Found(o) => {
            cond.check(Some(chosen(&o, p.vtag.as_deref())), true)
                .map_err(failed_response)?;
            Ok(object_response(
                loc,
                &o,
                p.vtag.as_deref(),
                StatusCode::OK,
                h,
            ))
        }
    }
}

/// A stored link: (bucket, key, tag).
type Link = (Vec<u8>, Vec<u8>, Vec<u8>);

/// Parses a `Link` request header into (bucket, key, tag) links; the
/// `rel="up"` entry Riak sends back is ignored.
pub(crate) fn parse_links(v: &str) -> Result<Vec<Link>, String> {
    let mut out = Vec::new();
    for entry in v.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let malformed = || format!("Invalid Link header entry: \"{entry}\"");
        let rest = entry.strip_prefix('<').ok_or_else(malformed)?;
        let (url, params) = rest.split_once('>').ok_or_else(malformed)?;
        let mut tag = None;
        let mut up = false;
        for p in params.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (n, val) = p.split_once('=').ok_or_else(malformed)?;
            let val = val.trim().trim_matches('"');
            match n.trim() {
                "riaktag" => tag = Some(pct(val)),
                "rel" if val == "up" => up = true,
                _ => {}
            }
        }
        if up && tag.is_none() {
            continue;
        }
        let tag = tag.ok_or_else(malformed)?;
        let segs: Vec<&str> = url.trim_start_matches('/').split('/').collect();
        let (b, k) = match segs.as_slice() {
            ["buckets", b, "keys", k] | ["riak", b, k] | ["types", _, "buckets", b, "keys", k] => {
                (pct(b), pct(k))
            }
            _ => return Err(malformed()),
        };
        if b.is_empty() || k.is_empty() {
            return Err(malformed());
        }
        out.push((b.into_bytes(), k.into_bytes(), tag.into_bytes()));
    }
    Ok(out)
}

/// The sibling described by a store request's headers and body.
pub(crate) fn content_from_request(h: &HeaderMap, body: Vec<u8>) -> Result<Content, Response> {
    let ct = h
        .get(header::CONTENT_TYPE)
        .ok_or_else(|| bad("Missing Content-Type request header"))?
        .to_str()
        .map_err(|_| bad("Malformed Content-Type header"))?;
    let mut parts = ct.split(';');
    let ctype = parts.next().unwrap_or("").trim();
    if ctype.is_empty() {
        return Err(bad("Malformed Content-Type header"));
    }
    let mut charset = None;
    for param in parts {
        if let Some((n, v)) = param.split_once('=') {
            if n.trim().eq_ignore_ascii_case("charset") {
                charset = Some(v.trim().trim_matches('"').as_bytes().to_vec());
            }
        }
    }
    let mut c = Content {
        value_len: body.len() as u32,
        value: body,
        content_type: Some(ctype.as_bytes().to_vec()),
        charset,
        content_encoding: h
            .get(header::CONTENT_ENCODING)
            .map(|v| v.as_bytes().to_vec()),
        ..Content::default()
    };
    for v in h.get_all(header::LINK) {
        let v = v.to_str().map_err(|_| bad("Malformed Link header"))?;
        c.links.extend(parse_links(v).map_err(bad)?);
    }
    for (name, value) in h {
        let n = name.as_str();
        if let Some(meta) = n.strip_prefix("x-riak-meta-") {
            if meta.is_empty() {
                return Err(bad("Empty X-Riak-Meta- header name"));
            }
            c.usermeta
                .push((meta.as_bytes().to_vec(), value.as_bytes().to_vec()));
        } else if let Some(field) = n.strip_prefix("x-riak-index-") {
            let int = field.ends_with("_int");
            if !(int || field.ends_with("_bin")) || field.len() <= 4 {
                return Err(bad(format!(
                    "Could not parse index fields: {n} (index names end in _bin or _int)"
                )));
            }
            let v = value
                .to_str()
                .map_err(|_| bad(format!("Malformed {n} header")))?;
            for term in v.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                let term = if int {
                    basalt_backends::intterm::canonical(term.as_bytes()).ok_or_else(|| {
                        bad(format!(
                            "Could not parse index value: {n}: \"{term}\" is not an integer"
                        ))
                    })?
                } else {
                    term.to_string()
                };
                c.indexes
                    .push((field.as_bytes().to_vec(), term.into_bytes()));
            }
        }
    }
    Ok(c)
}

async fn store(kv: &Kv, loc: &Loc<'_>, k: Option<String>, p: &Params, req: Request) -> HttpResult {
    let limit = kv.config().limits.max_object_bytes;
    let (headers, body) = read_body(req, limit).await.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Object too large (limit {limit} bytes)"),
            )
        } else {
            r // a malformed body: 400 with its reason
        }
    })?;
    let mut client = client_vclock(&headers)?;
    let content = content_from_request(&headers, body.to_vec())?;
    let cond = Conditions::parse(&headers)?;
    let mut opts = p.put_opts();
    if let Some(v) = headers.get("x-riak-if-not-modified") {
        client = Some(decode_vclock("X-Riak-If-Not-Modified", v)?);
        opts.if_not_modified = true;
    }
    let (key, created) = match k {
        Some(k) => (k, false),
        None => (String::from_utf8_lossy(&unique_id()).into_owned(), true),
    };
    if cond.any() {
        let gopts = p.get_opts();
        let current = kv
            .get(&loc.sb, key.as_bytes(), &gopts)
            .await
            .map_err(error_response)?;
        let chk = match &current {
            GetOutcome::Found(o) => cond.check(Some(chosen(o, None)), false),
            _ => cond.check(None, false),
        };
        chk.map_err(failed_response)?;
    }
    let obj = kv
        .put(&loc.sb, key.as_bytes(), client, content, &opts)
        .await
        .map_err(|e| match e {
            RequestError::NotFound | RequestError::Modified | RequestError::MatchFound => {
                text(StatusCode::PRECONDITION_FAILED, e.to_string())
            }
            e => error_response(e),
        })?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut resp = match obj.filter(|_| p.returnbody) {
        Some(o) => object_response(loc, &o, None, status, &headers),
        None if created => {
            let mut r = Response::new(Body::empty());
            *r.status_mut() = status;
            r
        }
        None => StatusCode::NO_CONTENT.into_response(),
    };
    if created {
        if let Ok(v) = HeaderValue::from_str(&loc.key_path(&key)) {
            resp.headers_mut().insert(header::LOCATION, v);
        }
    }
    Ok(resp)
}

/// DELETE: a tombstone over the current clock (the request's
/// `X-Riak-Vclock` if given), reaped per `delete_mode` as PB deletes.
async fn delete(kv: &Arc<Kv>, loc: &Loc<'_>, k: &str, p: &Params, h: &HeaderMap) -> HttpResult {
    let client = client_vclock(h)?;
    let opts = GetOpts {
        r: p.r.or(p.rw),
        ..p.get_opts()
    };
    let current = match kv
        .get(&loc.sb, k.as_bytes(), &opts)
        .await
        .map_err(error_response)?
    {
        GetOutcome::NotFound | GetOutcome::Tombstone(_) => {
            return Ok(text(StatusCode::NOT_FOUND, "not found"))
        }
        GetOutcome::Found(o) => o.vclock,
    };
    let opts = PutOpts {
        w: p.w.or(p.rw),
        ..p.put_opts()
    };
    kv.delete(
        &loc.sb,
        k.as_bytes(),
        Some(client.unwrap_or(current)),
        &opts,
    )
    .await
    .map_err(error_response)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_words() {
        assert_eq!(parse_quorum("r", "one"), Ok(quorum::ONE));
        assert_eq!(parse_quorum("r", "2"), Ok(2));
        assert!(parse_quorum("r", "most").is_err());
    }

    #[test]
    fn part_header_names_as_riak() {
        assert_eq!(part_header_name("content-type"), "Content-Type");
        assert_eq!(part_header_name("etag"), "Etag");
        assert_eq!(part_header_name("x-riak-meta-who"), "X-Riak-Meta-who");
        assert_eq!(part_header_name("x-riak-index-n_int"), "X-Riak-Index-n_int");
    }

    #[test]
    fn link_headers_parse() {
        let l = parse_links(
            "</buckets/b>; rel=\"up\", </buckets/p/keys/k%201>; riaktag=\"friend\", </riak/q/k2>; riaktag=\"x\"",
        )
        .unwrap_or_default();
        assert_eq!(
            l,
            vec![
                (b"p".to_vec(), b"k 1".to_vec(), b"friend".to_vec()),
                (b"q".to_vec(), b"k2".to_vec(), b"x".to_vec()),
            ]
        );
        assert!(parse_links("/buckets/p/keys/k; riaktag=\"t\"").is_err());
        assert!(parse_links("</elsewhere>; riaktag=\"t\"").is_err());
        assert!(parse_links("</buckets/p/keys/k>").is_err());
    }

    #[test]
    fn conditions_follow_webmachine() {
        let c = Content {
            vtag: Some(b"abc".to_vec()),
            last_mod: 1_000,
            ..Content::default()
        };
        let at = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        let inm = Conditions {
            if_none_match: Some(vec!["\"abc\"".into()]),
            ..Conditions::default()
        };
        assert_eq!(inm.check(Some(Some(&c)), true), Err(Failed::NotModified));
        assert_eq!(inm.check(Some(Some(&c)), false), Err(Failed::Precondition));
        assert_eq!(inm.check(None, false), Ok(()));
        let star = Conditions {
            if_none_match: Some(vec!["*".into()]),
            ..Conditions::default()
        };
        assert_eq!(star.check(Some(None), false), Err(Failed::Precondition));
        assert_eq!(star.check(None, false), Ok(()));
        let im = Conditions {
            if_match: Some(vec!["\"zzz\"".into()]),
            ..Conditions::default()
        };
        assert_eq!(im.check(Some(Some(&c)), true), Err(Failed::Precondition));
        assert_eq!(im.check(None, false), Err(Failed::Precondition));
        let ims = |s| Conditions {
            if_modified_since: Some(at(s)),
            ..Conditions::default()
        };
        assert_eq!(
            ims(1_000).check(Some(Some(&c)), true),
            Err(Failed::NotModified)
        );
        assert_eq!(ims(999).check(Some(Some(&c)), true), Ok(()));
        let ius = |s| Conditions {
            if_unmodified_since: Some(at(s)),
            ..Conditions::default()
        };
        assert_eq!(
            ius(999).check(Some(Some(&c)), false),
            Err(Failed::Precondition)
        );
        assert_eq!(ius(1_000).check(Some(Some(&c)), false), Ok(()));
    }
}
