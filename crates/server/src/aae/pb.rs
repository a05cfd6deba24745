//! The anti-entropy fold service (`riak_kv_pb_aaefold`): Riak's
//! `RpbAaeFold*` requests turned into [`FoldQuery`]s, run by
//! [`Aae::aae_fold`](crate::aae::Aae::aae_fold), their answers encoded as Riak's replies.
//!
//! Codes (requests → reply):
//! * 210 `RpbAaeFoldMergeRootNValReq`, 211 `…MergeBranchNValReq`, 213
//!   `…MergeTreesRangeReq` → 220 `RpbAaeFoldTreeResp`;
//! * 212 `…FetchClocksNValReq`, 214 `…FetchClocksRangeReq` → 221
//!   `RpbAaeFoldKeyValueResp` (`response_type` "clock", value = the
//!   encoded clock);
//! * 215 `…FindKeysReq`, 218 `…FindTombsReq`, 216 `…ObjectStatsReq`, 230
//!   `…ReapTombsReq`, 231 `…EraseKeysReq` → 222 `RpbAaeFoldKeyCountResp`;
//! * 223 `…ListBucketsReq` → 224 `RpbAaeFoldListBucketsResp`;
//! * 217 `…ReplKeysReq` (requeue a range on a local sink's queue) → the
//!   count response; 219 `…RepairKeysReq`: refused (not supported).
//!
//! Trees in 220: `level_one` = one u64 (big-endian) per branch, each
//! `level_two` entry = `branch:u32be | 256 × u64be` segment hashes,
//! uncompressed (`docs/formats.md` "AAE fold tree reply"); Basalt's
//! hashes are its own (a key's state hash), not leveled's. Served on the
//! client port and, for `basalt admin aae fold`, on the cluster port.

use super::Aae;
use crate::aae::fold::{Finder, FoldQuery, FoldResult, RangeFilter, TREE_SIZES};
use crate::api::pb::decode;
use crate::error::RequestError;
use crate::pb::{self, code, frame_msg};
use basalt_backend::TreeSize;
use std::sync::Arc;

/// Whether `c` is one of this service's request codes.
pub(crate) fn serves(c: u8) -> bool {
    matches!(c, 210..=219 | 223 | 230 | 231)
}

/// Handles one request of this service.
pub(crate) async fn handle(
    aae: &Arc<Aae>,
    c: u8,
    body: &[u8],
) -> Result<Vec<Vec<u8>>, RequestError> {
    let q = query(aae, c, body)?;
    let res = aae.aae_fold(&q).await?;
    Ok(vec![reply(&q, res)])
}

/// The tree size of Riak's `RpbTreeSize` enum value.
fn tree_size(v: i32) -> Result<TreeSize, RequestError> {
    usize::try_from(v)
        .ok()
        .and_then(|i| TREE_SIZES.get(i).copied())
        .ok_or_else(|| {
            RequestError::Invalid(format!("no tree size {v} (0 = xxsmall .. 5 = xlarge)"))
        })
}

/// Riak's `RpbTreeSize` value of a size.
fn tree_size_value(s: TreeSize) -> i32 {
    TREE_SIZES.iter().position(|t| *t == s).unwrap_or(0) as i32
}

/// The fields every range request shares.
struct RangeFields<'a> {
    btype: Option<&'a [u8]>,
    bucket: &'a [u8],
    key_range: bool,
    start_key: &'a Option<Vec<u8>>,
    end_key: &'a Option<Vec<u8>>,
    segment_filter: bool,
    id_filter: &'a [u32],
    filter_tree_size: Option<i32>,
    modified_range: bool,
    last_mod_start: Option<u32>,
    last_mod_end: Option<u32>,
}

fn range_filter(aae: &Aae, f: RangeFields<'_>) -> Result<RangeFilter, RequestError> {
    if f.bucket.is_empty() {
        return Err(RequestError::Invalid("Bucket cannot be zero-length".into()));
    }
    let bucket = aae.types().storage_bucket(f.btype, f.bucket)?;
    let keys = if f.key_range {
        match (f.start_key, f.end_key) {
            (Some(s), Some(e)) => Some((s.clone(), e.clone())),
            _ => {
                return Err(RequestError::Invalid(
                    "key_range needs start_key and end_key".into(),
                ))
            }
        }
    } else {
        None
    };
    let segments = if f.segment_filter {
        let size = tree_size(f.filter_tree_size.ok_or_else(|| {
            RequestError::Invalid("segment_filter needs filter_tree_size".into())
        })?)?;
        Some((size.width(), f.id_filter.to_vec()))
    } else {
        None
    };
    Ok(RangeFilter {
        bucket,
        keys,
        segments,
        modified: modified(f.modified_range, f.last_mod_start, f.last_mod_end)?,
    })
}

fn modified(
    on: bool,
    start: Option<u32>,
    end: Option<u32>,
) -> Result<Option<(u64, u64)>, RequestError> {
    if !on {
        return Ok(None);
    }
    match (start, end) {
        (Some(s), Some(e)) => Ok(Some((u64::from(s), u64::from(e)))),
        _ => Err(RequestError::Invalid(
            "modified_range needs last_mod_start and last_mod_end".into(),
        )),
    }
}

/// Riak's `ChangeMethod`: job = 0, local = 1 (both change), count = 2.
fn count_only(method: i32) -> Result<bool, RequestError> {
    match method {
        0 | 1 => Ok(false),
        2 => Ok(true),
        m => Err(RequestError::Invalid(format!(
            "no change_method {m} (0 = job, 1 = local, 2 = count)"
        ))),
    }
}

macro_rules! fields {
    ($aae:expr, $r:expr) => {
        range_filter(
            $aae,
            RangeFields {
                btype: $r.r#type.as_deref(),
                bucket: &$r.bucket,
                key_range: $r.key_range,
                start_key: &$r.start_key,
                end_key: &$r.end_key,
                segment_filter: $r.segment_filter,
                id_filter: &$r.id_filter,
                filter_tree_size: $r.filter_tree_size,
                modified_range: $r.modified_range,
                last_mod_start: $r.last_mod_start,
                last_mod_end: $r.last_mod_end,
            },
        )
    };
}

/// Range requests without a segment filter.
macro_rules! fields_nosegs {
    ($aae:expr, $r:expr) => {
        range_filter(
            $aae,
            RangeFields {
                btype: $r.r#type.as_deref(),
                bucket: &$r.bucket,
                key_range: $r.key_range,
                start_key: &$r.start_key,
                end_key: &$r.end_key,
                segment_filter: false,
                id_filter: &[],
                filter_tree_size: None,
                modified_range: $r.modified_range,
                last_mod_start: $r.last_mod_start,
                last_mod_end: $r.last_mod_end,
            },
        )
    };
}

/// The query of request `c`.
fn query(aae: &Aae, c: u8, body: &[u8]) -> Result<FoldQuery, RequestError> {
    Ok(match c {
        code::AAE_FOLD_MERGE_ROOT_N_VAL_REQ => {
            let r: pb::RpbAaeFoldMergeRootNValReq = decode(body)?;
            FoldQuery::MergeRootNval { n_val: r.n_val }
        }
        code::AAE_FOLD_MERGE_BRANCH_N_VAL_REQ => {
            let r: pb::RpbAaeFoldMergeBranchNValReq = decode(body)?;
            FoldQuery::MergeBranchNval {
                n_val: r.n_val,
                branches: r.id_filter,
            }
        }
        code::AAE_FOLD_FETCH_CLOCKS_N_VAL_REQ => {
            let r: pb::RpbAaeFoldFetchClocksNValReq = decode(body)?;
            FoldQuery::FetchClocksNval {
                n_val: r.n_val,
                segments: r.id_filter,
                modified: modified(
                    r.modified_range.unwrap_or(false),
                    r.last_mod_start,
                    r.last_mod_end,
                )?,
            }
        }
        code::AAE_FOLD_MERGE_TREES_RANGE_REQ => {
            let r: pb::RpbAaeFoldMergeTreesRangeReq = decode(body)?;
            FoldQuery::MergeTreeRange {
                size: tree_size(r.tree_size)?,
                filter: fields!(aae, r)?,
            }
        }
        code::AAE_FOLD_FETCH_CLOCKS_RANGE_REQ => {
            let r: pb::RpbAaeFoldFetchClocksRangeReq = decode(body)?;
            FoldQuery::FetchClocksRange {
                filter: fields!(aae, r)?,
            }
        }
        code::AAE_FOLD_FIND_KEYS_REQ => {
            let r: pb::RpbAaeFoldFindKeysReq = decode(body)?;
            let limit = u64::from(r.find_limit);
            let finder = match r.finder {
                0 => Finder::SiblingCount(limit),
                1 => Finder::ObjectSize(limit),
                f => {
                    return Err(RequestError::Invalid(format!(
                        "no finder {f} (0 = sibling_count, 1 = object_size)"
                    )))
                }
            };
            FoldQuery::FindKeys {
                filter: fields_nosegs!(aae, r)?,
                finder,
            }
        }
        code::AAE_FOLD_OBJECT_STATS_REQ => {
            let r: pb::RpbAaeFoldObjectStatsReq = decode(body)?;
            FoldQuery::ObjectStats {
                filter: fields_nosegs!(aae, r)?,
            }
        }
        code::AAE_FOLD_FIND_TOMBS_REQ => {
            let r: pb::RpbAaeFoldFindTombsReq = decode(body)?;
            FoldQuery::FindTombs {
                filter: fields!(aae, r)?,
            }
        }
        code::AAE_FOLD_REAP_TOMBS_REQ => {
            let r: pb::RpbAaeFoldReapTombsReq = decode(body)?;
            FoldQuery::ReapTombs {
                count_only: count_only(r.change_method)?,
                filter: fields!(aae, r)?,
            }
        }
        code::AAE_FOLD_ERASE_KEYS_REQ => {
            let r: pb::RpbAaeFoldEraseKeysReq = decode(body)?;
            FoldQuery::EraseKeys {
                count_only: count_only(r.change_method)?,
                filter: fields!(aae, r)?,
            }
        }
        code::AAE_FOLD_LIST_BUCKETS_REQ => {
            let r: pb::RpbAaeFoldListBucketsReq = decode(body)?;
            FoldQuery::ListBuckets {
                n_val: r.n_val.filter(|n| *n > 0).unwrap_or(1),
            }
        }
        code::AAE_FOLD_REPL_KEYS_REQ => {
            let r: pb::RpbAaeFoldReplKeysReq = decode(body)?;
            FoldQuery::ReplKeys {
                queue: String::from_utf8_lossy(&r.queuename).into_owned(),
                filter: fields_nosegs!(aae, r)?,
            }
        }
        code::AAE_FOLD_REPAIR_KEYS_REQ => {
            return Err(RequestError::Invalid(
                "aae fold repair_keys_range is not supported".into(),
            ))
        }
        other => return Err(crate::api::pb::unknown_code(other)),
    })
}

fn be_hashes(hs: &[u64]) -> Vec<u8> {
    hs.iter().flat_map(|h| h.to_be_bytes()).collect()
}

fn count(tag: &[u8], order: Option<u32>, n: u64) -> pb::RpbKeysCount {
    pb::RpbKeysCount {
        tag: tag.to_vec(),
        order,
        count: u32::try_from(n).unwrap_or(u32::MAX),
    }
}

/// Riak's reply frame for the result of `q`.
fn reply(q: &FoldQuery, res: FoldResult) -> Vec<u8> {
    match res {
        FoldResult::Tree {
            size,
            root,
            branches,
        } => frame_msg(
            code::AAE_FOLD_TREE_RESP,
            &pb::RpbAaeFoldTreeResp {
                size: tree_size_value(size),
                level_one: Some(be_hashes(&root)),
                level_two: branches
                    .iter()
                    .map(|(b, segs)| {
                        let mut v = b.to_be_bytes().to_vec();
                        v.extend(be_hashes(segs));
                        v
                    })
                    .collect(),
            },
        ),
        FoldResult::Keys(keys) => match q {
            FoldQuery::FetchClocksNval { .. } | FoldQuery::FetchClocksRange { .. } => frame_msg(
                code::AAE_FOLD_KEY_VALUE_RESP,
                &pb::RpbAaeFoldKeyValueResp {
                    response_type: b"clock".to_vec(),
                    keys_value: keys
                        .into_iter()
                        .map(|(sb, key, clock, _)| {
                            let (t, b) = crate::bucket::keying::split_storage_bucket(&sb);
                            pb::RpbKeysValue {
                                r#type: t.map(<[u8]>::to_vec),
                                bucket: b.to_vec(),
                                key,
                                value: clock,
                            }
                        })
                        .collect(),
                },
            ),
            _ => frame_msg(
                code::AAE_FOLD_KEY_COUNT_RESP,
                &pb::RpbAaeFoldKeyCountResp {
                    response_type: q.name().as_bytes().to_vec(),
                    keys_count: keys
                        .iter()
                        .map(|(_, key, _, v)| count(key, None, *v))
                        .collect(),
                },
            ),
        },
        FoldResult::Stats(s) => {
            let mut kc = vec![
                count(b"total_count", None, s.total_count),
                count(b"total_size", None, s.total_size),
            ];
            kc.extend(s.sizes.iter().map(|(o, n)| count(b"sizes", Some(*o), *n)));
            kc.extend(
                s.siblings
                    .iter()
                    .map(|(o, n)| count(b"siblings", Some(*o), *n)),
            );
            frame_msg(
                code::AAE_FOLD_KEY_COUNT_RESP,
                &pb::RpbAaeFoldKeyCountResp {
                    response_type: b"stats".to_vec(),
                    keys_count: kc,
                },
            )
        }
        FoldResult::Count(n) => frame_msg(
            code::AAE_FOLD_KEY_COUNT_RESP,
            &pb::RpbAaeFoldKeyCountResp {
                response_type: q.name().as_bytes().to_vec(),
                keys_count: vec![count(b"dispatched_count", None, n)],
            },
        ),
        FoldResult::Buckets(bs) => frame_msg(
            code::AAE_FOLD_LIST_BUCKETS_RESP,
            &pb::RpbAaeFoldListBucketsResp {
                bucket_list: bs
                    .iter()
                    .map(|sb| {
                        let (t, b) = crate::bucket::keying::split_storage_bucket(sb);
                        pb::RpbAaeFoldBucket {
                            r#type: t.map(<[u8]>::to_vec),
                            bucket: b.to_vec(),
                        }
                    })
                    .collect(),
            },
        ),
    }
}
