//! `POST /mapred` (`riak_kv_wm_mapred`): a JSON job (at most
//! [`MAPRED_MAX_JOB_BYTES`]), answered as one JSON document (one kept
//! phase: its list; several: a list of lists) or, with `?chunked=true`,
//! as `multipart/mixed` parts `{"phase": N, "data": [...]}` sent as the
//! job makes them. A bad job is a 400 (plain text naming the field); an
//! Erlang source phase a 500 `{"error":"worker_startup_failed"}` (Riak's,
//! see `job::STRFUN_REFUSED`); a failed job a 500 with Riak's JSON error
//! object (`{"phase", "error", "input", ...}`, `{"error": "timeout"}`); in
//! a chunked answer the error is the last part.

// Handlers return ready-made error `Response`s on the (rare) failure path.
#![allow(clippy::result_large_err)]

use crate::api::http::{bad, chunked, json, query, read_body, text};
use crate::limits::{MAPRED_MAX_JOB_BYTES, STREAM_QUEUE_FRAMES};
use crate::mapred::core::collect_shape;
use crate::mapred::MapRedError;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// The state these handlers extract: MapReduce.
type Shared = axum::extract::State<std::sync::Arc<super::MapRed>>;

/// `POST /mapred`.
pub async fn mapred(State(mapred): Shared, req: Request) -> Response {
    let is_chunked = query(&req)
        .iter()
        .any(|(k, v)| k == "chunked" && v == "true");
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !is_json {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "A MapReduce job must be sent as Content-Type: application/json",
        );
    }
    let body = match read_body(req, MAPRED_MAX_JOB_BYTES).await {
        Ok((_, b)) => b,
        Err(resp) => return resp,
    };
    let job = match crate::mapred::parse(&body) {
        Ok(j) => j,
        // Riak's 500 when a strfun's worker fails to start.
        Err(e) if e.0 == crate::mapred::job::STRFUN_REFUSED => {
            return json(
                StatusCode::INTERNAL_SERVER_ERROR,
                &json!({"error": "worker_startup_failed"}),
            )
        }
        Err(e) => return bad(e.0),
    };
    let (tx, mut rx) = mpsc::channel::<(usize, Vec<Value>)>(STREAM_QUEUE_FRAMES);
    if is_chunked {
        let boundary = String::from_utf8_lossy(&crate::object::unique_id()).into_owned();
        let (parts, resp) = chunked(&format!("multipart/mixed;boundary={boundary}"));
        let closing = Bytes::from(format!("\r\n--{boundary}--\r\n"));
        let part = move |v: &Value| {
            Bytes::from(format!(
                "\r\n--{boundary}\r\nContent-Type: application/json\r\n\r\n{v}"
            ))
        };
        let end = part.clone();
        let job_mapred = mapred.clone();
        tokio::spawn(async move {
            let forward = async {
                while let Some((phase, data)) = rx.recv().await {
                    if parts
                        .send(part(&json!({"phase": phase, "data": data})))
                        .is_err()
                    {
                        return;
                    }
                }
            };
            let (res, ()) = tokio::join!(job_mapred.mapred(job, tx), forward);
            if let Err(e) = res {
                let _ = parts.send(end(&e.to_json()));
            }
            let _ = parts.send(closing);
        });
        return resp;
    }
    let collect = async {
        let mut per_phase: Vec<(usize, Vec<Value>)> = Vec::new();
        while let Some((phase, data)) = rx.recv().await {
            match per_phase.iter_mut().find(|(p, _)| *p == phase) {
                Some((_, v)) => v.extend(data),
                None => per_phase.push((phase, data)),
            }
        }
        per_phase.sort_by_key(|(p, _)| *p);
        per_phase
    };
    let (res, per_phase) = tokio::join!(mapred.mapred(job, tx), collect);
    match res {
        Ok(()) => json(StatusCode::OK, &collect_shape(per_phase)),
        Err(e) if e.is_bad_job() => bad(e.to_string()),
        Err(e @ MapRedError::Limit(_)) => bad(e.to_string()),
        Err(e) => json(StatusCode::INTERNAL_SERVER_ERROR, &e.to_json()),
    }
}
