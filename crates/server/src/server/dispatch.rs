//! The PB dispatch table: each request code, on the port it came in on, to
//! the service that answers it — the KV services of [`crate::api::pb`] and
//! the capabilities' own (MapReduce, data types and 1.4 counters,
//! anti-entropy folds), as riak_api routes each code to its registered
//! service. A code no service serves gets Riak's "Unknown message code"
//! error and the connection stays open.

use crate::api::pb::{
    btypes, bucket, coverage, csbucket, decode, index, membership, object, unknown_code, FrameTx,
    Port,
};
use crate::datatypes::{counter_pb as counter, pb as crdt};
use crate::error::RequestError;
use crate::mapred::pb as mapred;
use crate::node::Node;
use crate::pb::{self, code, frame, frame_msg};
use crate::server::admin;
use crate::SERVER_VERSION;
use std::sync::Arc;

/// Handles one request that came in on `port`: returns the reply's frames,
/// after sending any streamed frames through `out` (a send error = the
/// client went away).
pub(crate) async fn dispatch(
    node: &Arc<Node>,
    port: Port,
    client_id: &mut Vec<u8>,
    c: u8,
    body: &[u8],
    out: &FrameTx,
) -> Result<Vec<Vec<u8>>, RequestError> {
    match port {
        Port::Client => client(node, client_id, c, body, out).await,
        Port::Cluster if c == code::basalt::BACKUP_REQ => {
            crate::server::backup::handle(node, body, out).await
        }
        Port::Cluster => admin::handle(node, c, body).await,
    }
}

/// Requests dropped as soon as their client goes away
/// ([`super::serve_frames`] watches the socket while they run): the
/// streamed listings and queries and MapReduce, which only read. Writes
/// run to their end whatever the client does, as Riak's put and delete
/// FSMs do.
pub(crate) fn cancellable(c: u8) -> bool {
    matches!(
        c,
        code::LIST_KEYS_REQ
            | code::LIST_BUCKETS_REQ
            | code::INDEX_REQ
            | code::CS_BUCKET_REQ
            | code::MAP_RED_REQ
    )
}

/// A request on the client port: Riak's codes only.
async fn client(
    node: &Arc<Node>,
    client_id: &mut Vec<u8>,
    c: u8,
    body: &[u8],
    out: &FrameTx,
) -> Result<Vec<Vec<u8>>, RequestError> {
    match c {
        code::PING_REQ => Ok(vec![frame(code::PING_RESP, &[])]),
        code::GET_CLIENT_ID_REQ => Ok(vec![frame_msg(
            code::GET_CLIENT_ID_RESP,
            &pb::RpbGetClientIdResp {
                client_id: client_id.clone(),
            },
        )]),
        code::SET_CLIENT_ID_REQ => {
            let r: pb::RpbSetClientIdReq = decode(body)?;
            *client_id = r.client_id;
            Ok(vec![frame(code::SET_CLIENT_ID_RESP, &[])])
        }
        code::GET_SERVER_INFO_REQ => Ok(vec![frame_msg(
            code::GET_SERVER_INFO_RESP,
            &pb::RpbGetServerInfoResp {
                node: Some(node.config().node_name.clone().into_bytes()),
                server_version: Some(SERVER_VERSION.as_bytes().to_vec()),
            },
        )]),
        code::GET_REQ => object::get(node.kv(), body).await,
        code::PUT_REQ => object::put(node.kv(), body).await,
        code::DEL_REQ => object::delete(node.kv(), body).await,
        // The other services' futures are boxed: an unboxed one would
        // make every request's future (GET and PUT too) as large as the
        // largest of them, and it is moved whole as requests start.
        code::LIST_BUCKETS_REQ => Box::pin(bucket::list_buckets(node.kv(), body)).await,
        code::LIST_KEYS_REQ => Box::pin(bucket::list_keys(node.kv(), body, out)).await,
        code::GET_BUCKET_REQ => Box::pin(bucket::get_props(node.kv(), body)).await,
        code::SET_BUCKET_REQ => Box::pin(bucket::set_props(node.kv(), body)).await,
        code::RESET_BUCKET_REQ => Box::pin(bucket::reset_props(node.kv(), body)).await,
        code::MAP_RED_REQ => Box::pin(mapred::mapred(node.mapred(), body, out)).await,
        code::INDEX_REQ => Box::pin(index::query(node.kv(), body, out)).await,
        code::COVERAGE_REQ => Box::pin(coverage::plan(node.kv(), body)).await,
        code::MEMBERSHIP_REQ => membership::members(node.kv(), body),
        code::CS_BUCKET_REQ => Box::pin(csbucket::fold(node.kv(), body, out)).await,
        code::COUNTER_UPDATE_REQ => Box::pin(counter::update(node.kv(), body)).await,
        code::COUNTER_GET_REQ => Box::pin(counter::get(node.kv(), body)).await,
        code::DT_FETCH_REQ => Box::pin(crdt::fetch(node.kv(), body)).await,
        code::DT_UPDATE_REQ => Box::pin(crdt::update(node.kv(), body)).await,
        c if crate::aae::pb::serves(c) => {
            Box::pin(crate::aae::pb::handle(node.aae(), c, body)).await
        }
        other => btypes::handle(node.kv(), other, body)?.ok_or_else(|| unknown_code(other)),
    }
}
