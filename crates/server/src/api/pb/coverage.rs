//! The coverage plan service (`riak_kv_pb_coverage`, Riak 2.x's parallel
//! extraction): clients ask for a plan, then send one 2i query per entry
//! (its `cover_context`), each to the entry's node.
//!
//! Codes: `RpbCoverageReq` 70 → `RpbCoverageResp` 71. `min_partitions`
//! (any value) asks for the parallel plan, one entry per first primary.
//! With `replace_cover` (an entry whose node failed the client) and
//! `unavailable_cover` (others that failed), the answer replaces that one
//! entry from other nodes, or is Riak's `primary_partition_unavailable`
//! (always so on a one-node cluster, as in Riak). Plans, replacements and
//! contexts: [`crate::kv::cover`].

use super::decode;
use crate::error::RequestError;
use crate::kv::Kv;
use crate::pb::{self, code, frame_msg};
use std::sync::Arc;

/// `RpbCoverageReq`.
pub(crate) async fn plan(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbCoverageReq = decode(body)?;
    super::check_bk(&r.bucket, None)?;
    let sb = kv.types().storage_bucket(r.r#type.as_deref(), &r.bucket)?;
    let entries = match &r.replace_cover {
        None => kv.coverage_entries(&sb, r.min_partitions)?,
        Some(failed) => kv.replace_cover(failed, &r.unavailable_cover)?,
    };
    let entries = entries
        .into_iter()
        .map(|e| {
            let (ip, port) = split_addr(&e.pb_addr);
            pb::RpbCoverageEntry {
                ip: ip.into_bytes(),
                port,
                keyspace_desc: Some(e.desc.into_bytes()),
                cover_context: e.context,
            }
        })
        .collect();
    Ok(vec![frame_msg(
        code::COVERAGE_RESP,
        &pb::RpbCoverageResp { entries },
    )])
}

/// `host:port` (or `[v6]:port`) → (host, port); an address without a port
/// gives port 0, as Riak's answer for a node whose PB endpoint is unknown.
/// `host:port` (or `[v6]:port`) → (host, port); port 0 when there is none.
pub(crate) fn split_addr(a: &str) -> (String, u32) {
    match a.rsplit_once(':') {
        Some((h, p)) => match p.parse::<u32>() {
            Ok(port) => (
                h.trim_start_matches('[').trim_end_matches(']').to_string(),
                port,
            ),
            Err(_) => (a.to_string(), 0),
        },
        None => (a.to_string(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::split_addr;

    #[test]
    fn addresses_split_into_ip_and_port() {
        assert_eq!(split_addr("127.0.0.1:8087"), ("127.0.0.1".into(), 8087));
        assert_eq!(split_addr("[::1]:10017"), ("::1".into(), 10017));
        assert_eq!(split_addr(""), (String::new(), 0));
        assert_eq!(split_addr("host"), ("host".into(), 0));
    }
}
