//! The MapReduce service (`riak_kv_pb_mapred`).
//!
//! Codes: `RpbMapRedReq` 23 → `RpbMapRedResp` 24, streamed: frames of
//! `{phase, response}` (a JSON list of at most
//! [`crate::limits::MAPRED_RESULTS_PER_FRAME`] results of a kept phase) as
//! the job makes them, then `{done = true}`. A bad job or a failed job is
//! an `RpbErrorResp`: the job error's text, or Riak's JSON error object
//! (`{"phase", "error", "input", ...}`, `{"error": "timeout"}`).

use super::MapRed;
use crate::api::pb::{decode, FrameTx};
use crate::error::RequestError;
use crate::limits::STREAM_QUEUE_FRAMES;
use crate::mapred::MapRedError;
use crate::pb::{self, code, frame_msg};
use std::sync::Arc;
use tokio::sync::mpsc;

/// `RpbMapRedReq`.
pub(crate) async fn mapred(
    mapred: &Arc<MapRed>,
    body: &[u8],
    out: &FrameTx,
) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbMapRedReq = decode(body)?;
    if !r.content_type.starts_with(b"application/json") {
        return Err(RequestError::Invalid(format!(
            "content_type {:?}: only application/json jobs are supported (not Erlang terms)",
            String::from_utf8_lossy(&r.content_type)
        )));
    }
    let job = crate::mapred::parse(&r.request).map_err(|e| RequestError::Invalid(e.0))?;
    let (tx, mut rx) = mpsc::channel(STREAM_QUEUE_FRAMES);
    let forward = async {
        while let Some((phase, values)) = rx.recv().await {
            let resp = pb::RpbMapRedResp {
                phase: Some(u32::try_from(phase).unwrap_or(u32::MAX)),
                response: Some(serde_json::Value::Array(values).to_string().into_bytes()),
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
