//! The MapReduce service (`riak_kv_pb_mapred`).
//!
//! Codes: `RpbMapRedReq` 23 → `RpbMapRedResp` 24, streamed: frames of
//! `{phase, response}` (at most [`crate::limits::MAPRED_RESULTS_PER_FRAME`]
//! results of a kept phase) as the job makes them, then `{done = true}`.
//! The job's `content_type` says how it is written and how the results
//! are: `application/json` (a JSON job; each `response` a JSON list) or
//! `application/x-erlang-binary` (an Erlang term, what riakc sends, read
//! by [`super::etf`]; each `response` `term_to_binary` of the list, as
//! Riak). Any other content type is Riak's `{unknown_content_type, CT}`.
//! A bad job or a failed job is an `RpbErrorResp`: the job error's text
//! (Riak's `~p` of the reason for an Erlang-term job), or Riak's JSON
//! error object (`{"phase", "error", "input", ...}`, `{"error":
//! "timeout"}`); the connection serves the next request.

use super::etf::{self, Shape};
use super::MapRed;
use crate::api::pb::{decode, FrameTx};
use crate::error::RequestError;
use crate::limits::STREAM_QUEUE_FRAMES;
use crate::mapred::MapRedError;
use crate::pb::{self, code, frame_msg};
use std::sync::Arc;
use tokio::sync::mpsc;

/// How a job's results are written.
enum Results {
    /// A JSON list per frame.
    Json,
    /// `term_to_binary` of the list, each phase in its [`Shape`].
    Terms(Vec<Shape>),
}

impl Results {
    fn encode(&self, phase: usize, values: Vec<serde_json::Value>) -> Vec<u8> {
        match self {
            Results::Json => serde_json::Value::Array(values).to_string().into_bytes(),
            Results::Terms(shapes) => {
                etf::encode(&values, shapes.get(phase).copied().unwrap_or(Shape::Plain))
            }
        }
    }
}

/// `RpbMapRedReq`.
pub(crate) async fn mapred(
    mapred: &Arc<MapRed>,
    body: &[u8],
    out: &FrameTx,
) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbMapRedReq = decode(body)?;
    let invalid = |e: crate::mapred::JobError| RequestError::Invalid(e.0);
    let (job, results) = if r.content_type.starts_with(b"application/json") {
        (
            crate::mapred::parse(&r.request).map_err(invalid)?,
            Results::Json,
        )
    } else if r.content_type.starts_with(b"application/x-erlang-binary") {
        let job = etf::parse(&r.request).map_err(invalid)?;
        let shapes = etf::shapes(&job);
        (job, Results::Terms(shapes))
    } else {
        let ct = eetf::Term::from(eetf::Binary::from(r.content_type.as_slice()));
        return Err(RequestError::Invalid(format!(
            "{{unknown_content_type,{}}}",
            etf::value::show(&ct)
        )));
    };
    let (tx, mut rx) = mpsc::channel(STREAM_QUEUE_FRAMES);
    let forward = async {
        while let Some((phase, values)) = rx.recv().await {
            let resp = pb::RpbMapRedResp {
                phase: Some(u32::try_from(phase).unwrap_or(u32::MAX)),
                response: Some(results.encode(phase, values)),
                done: None,
            };
            if out
                .send(frame_msg(code::MAP_RED_RESP, &resp))
                .await
                .is_err()
            {
                // The client went away: dropping `rx` stops the job.
                return;
            }
        }
    };
    let (res, ()) = tokio::join!(mapred.mapred(job, tx), forward);
    match res {
        Ok(()) => Ok(vec![frame_msg(
            code::MAP_RED_RESP,
            &pb::RpbMapRedResp {
                done: Some(true),
                ..Default::default()
            },
        )]),
        Err(MapRedError::Request(e)) => Err(e),
        Err(e @ (MapRedError::Job(_) | MapRedError::Limit(_))) => {
            Err(RequestError::Invalid(e.to_string()))
        }
        Err(e) => Err(RequestError::Invalid(e.to_json().to_string())),
    }
}
