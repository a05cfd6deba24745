//! `basalt admin --node ADDR aae fold <type> ...`: runs one anti-entropy
//! fold query (Riak's `aae_fold`) on a node and prints its answer as text.
//! The query goes as Riak's `RpbAaeFold*` request (codes 210–231) to the
//! node's cluster port, like the other admin commands (the node serves
//! the same codes on its PB port); the node runs it over the cluster.
//!
//! `reap-tombs` and `erase-keys` only count unless given `--apply` (then
//! the tombstones are reaped / the keys deleted through DELETE). With
//! `--json` the answer is one JSON document with the text's facts.

use crate::admin_client::{call, AdminNode};
use prost::Message;
use riak_pb::code;
use riak_pb::{
    RpbAaeFoldEraseKeysReq, RpbAaeFoldFetchClocksNValReq, RpbAaeFoldFetchClocksRangeReq,
    RpbAaeFoldFindKeysReq, RpbAaeFoldFindTombsReq, RpbAaeFoldKeyCountResp, RpbAaeFoldKeyValueResp,
    RpbAaeFoldListBucketsReq, RpbAaeFoldListBucketsResp, RpbAaeFoldMergeBranchNValReq,
    RpbAaeFoldMergeRootNValReq, RpbAaeFoldMergeTreesRangeReq, RpbAaeFoldObjectStatsReq,
    RpbAaeFoldReapTombsReq, RpbAaeFoldReplKeysReq, RpbAaeFoldTreeResp,
};

/// The tree size names, in Riak's `RpbTreeSize` order.
const SIZES: [&str; 6] = ["xxsmall", "xsmall", "small", "medium", "large", "xlarge"];

/// The range filters shared by the range queries.
#[derive(Debug, clap::Args)]
pub struct RangeArgs {
    /// Bucket.
    #[arg(long)]
    bucket: String,
    /// Bucket type (default: the default type).
    #[arg(long = "type")]
    btype: Option<String>,
    /// First key of the range (inclusive; needs --end-key).
    #[arg(long, requires = "end_key")]
    start_key: Option<String>,
    /// Last key of the range (inclusive).
    #[arg(long, requires = "start_key")]
    end_key: Option<String>,
    /// Last modified at or after (seconds since the epoch; needs --modified-to).
    #[arg(long, requires = "modified_to")]
    modified_from: Option<u32>,
    /// Last modified at or before (seconds since the epoch).
    #[arg(long, requires = "modified_from")]
    modified_to: Option<u32>,
}

/// A segment filter (range queries that take one).
#[derive(Debug, clap::Args)]
pub struct SegmentArgs {
    /// Only keys in these segments (comma separated; needs --filter-size).
    #[arg(long, value_delimiter = ',', requires = "filter_size")]
    segments: Vec<u32>,
    /// The tree size the segments belong to (xxsmall .. xlarge).
    #[arg(long)]
    filter_size: Option<String>,
}

/// The fold query types.
#[derive(Debug, clap::Subcommand)]
pub enum FoldCommand {
    /// The merged root of the cached trees of an n_val.
    MergeRootNval {
        /// n_val.
        #[arg(long, default_value_t = 3)]
        n_val: u32,
    },
    /// Merged branches of the cached trees of an n_val.
    MergeBranchNval {
        /// n_val.
        #[arg(long, default_value_t = 3)]
        n_val: u32,
        /// Branch numbers (comma separated).
        #[arg(long, value_delimiter = ',', required = true)]
        branches: Vec<u32>,
    },
    /// Keys and clocks of an n_val in segments of the cached trees.
    FetchClocksNval {
        /// n_val.
        #[arg(long, default_value_t = 3)]
        n_val: u32,
        /// Segments (comma separated).
        #[arg(long, value_delimiter = ',', required = true)]
        segments: Vec<u32>,
    },
    /// A tictac tree of a bucket's key range.
    MergeTreeRange {
        #[command(flatten)]
        range: RangeArgs,
        #[command(flatten)]
        segs: SegmentArgs,
        /// Tree size (xxsmall .. xlarge).
        #[arg(long, default_value = "small")]
        size: String,
    },
    /// Keys and clocks of a bucket's key range.
    FetchClocksRange {
        #[command(flatten)]
        range: RangeArgs,
        #[command(flatten)]
        segs: SegmentArgs,
    },
    /// Keys with more than N siblings.
    FindSiblings {
        #[command(flatten)]
        range: RangeArgs,
        /// N.
        #[arg(long, default_value_t = 1)]
        more_than: u32,
    },
    /// Keys larger than N bytes.
    FindLarge {
        #[command(flatten)]
        range: RangeArgs,
        /// N.
        #[arg(long)]
        more_than: u32,
    },
    /// Count, total size and histograms of a key range.
    ObjectStats {
        #[command(flatten)]
        range: RangeArgs,
    },
    /// Tombstones of a key range.
    FindTombs {
        #[command(flatten)]
        range: RangeArgs,
        #[command(flatten)]
        segs: SegmentArgs,
    },
    /// Count (or, with --apply, reap) the tombstones of a key range.
    ReapTombs {
        #[command(flatten)]
        range: RangeArgs,
        #[command(flatten)]
        segs: SegmentArgs,
        /// Reap them (default: count only).
        #[arg(long)]
        apply: bool,
    },
    /// Count (or, with --apply, delete) the live keys of a key range.
    EraseKeys {
        #[command(flatten)]
        range: RangeArgs,
        #[command(flatten)]
        segs: SegmentArgs,
        /// Delete them (default: count only).
        #[arg(long)]
        apply: bool,
    },
    /// Queue every key of a bucket range (tombstones included) on a local
    /// replication sink's queue, as references at requeue priority (1):
    /// the fast way to repair a large known delta with the other cluster
    /// (Riak's repl_keys_range). Prints the keys queued.
    ReplKeysRange {
        #[command(flatten)]
        range: RangeArgs,
        /// The local sink whose queue takes them.
        #[arg(long)]
        queue: String,
    },
    /// Buckets holding anything.
    ListBuckets {
        /// n_val of the coverage plan.
        #[arg(long, default_value_t = 1)]
        n_val: u32,
    },
}

/// The request fields of a range.
struct Range {
    r#type: Option<Vec<u8>>,
    bucket: Vec<u8>,
    key_range: bool,
    start_key: Option<Vec<u8>>,
    end_key: Option<Vec<u8>>,
    modified_range: bool,
    last_mod_start: Option<u32>,
    last_mod_end: Option<u32>,
}

fn range(r: &RangeArgs) -> Range {
    Range {
        r#type: r.btype.as_ref().map(|t| t.as_bytes().to_vec()),
        bucket: r.bucket.as_bytes().to_vec(),
        key_range: r.start_key.is_some(),
        start_key: r.start_key.as_ref().map(|k| k.as_bytes().to_vec()),
        end_key: r.end_key.as_ref().map(|k| k.as_bytes().to_vec()),
        modified_range: r.modified_from.is_some(),
        last_mod_start: r.modified_from,
        last_mod_end: r.modified_to,
    }
}

fn size_value(name: &str) -> anyhow::Result<i32> {
    SIZES
        .iter()
        .position(|s| *s == name)
        .map(|i| i as i32)
        .ok_or_else(|| {
            anyhow::anyhow!("no tree size {name:?} (xxsmall, xsmall, small, medium, large, xlarge)")
        })
}

/// (segment_filter, id_filter, filter_tree_size).
fn segs(s: &SegmentArgs) -> anyhow::Result<(bool, Vec<u32>, Option<i32>)> {
    match &s.filter_size {
        None => Ok((false, Vec::new(), None)),
        Some(n) => Ok((true, s.segments.clone(), Some(size_value(n)?))),
    }
}

/// The request code and body of `cmd`.
fn request(cmd: &FoldCommand) -> anyhow::Result<(u8, Vec<u8>)> {
    macro_rules! with_range {
        ($ty:ident, $r:expr, { $($extra:tt)* }) => {{
            let r = range($r);
            $ty {
                r#type: r.r#type,
                bucket: r.bucket,
                key_range: r.key_range,
                start_key: r.start_key,
                end_key: r.end_key,
                modified_range: r.modified_range,
                last_mod_start: r.last_mod_start,
                last_mod_end: r.last_mod_end,
                $($extra)*
            }
            .encode_to_vec()
        }};
    }
    Ok(match cmd {
        FoldCommand::MergeRootNval { n_val } => (
            code::AAE_FOLD_MERGE_ROOT_N_VAL_REQ,
            RpbAaeFoldMergeRootNValReq { n_val: *n_val }.encode_to_vec(),
        ),
        FoldCommand::MergeBranchNval { n_val, branches } => (
            code::AAE_FOLD_MERGE_BRANCH_N_VAL_REQ,
            RpbAaeFoldMergeBranchNValReq {
                n_val: *n_val,
                id_filter: branches.clone(),
            }
            .encode_to_vec(),
        ),
        FoldCommand::FetchClocksNval { n_val, segments } => (
            code::AAE_FOLD_FETCH_CLOCKS_N_VAL_REQ,
            RpbAaeFoldFetchClocksNValReq {
                n_val: *n_val,
                id_filter: segments.clone(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        FoldCommand::MergeTreeRange {
            range: r,
            segs: s,
            size,
        } => {
            let (sf, ids, fts) = segs(s)?;
            (
                code::AAE_FOLD_MERGE_TREES_RANGE_REQ,
                with_range!(RpbAaeFoldMergeTreesRangeReq, r, {
                    tree_size: size_value(size)?,
                    segment_filter: sf,
                    id_filter: ids,
                    filter_tree_size: fts,
                    use_prehash: true,
                    init_vector: None,
                }),
            )
        }
        FoldCommand::FetchClocksRange { range: r, segs: s } => {
            let (sf, ids, fts) = segs(s)?;
            (
                code::AAE_FOLD_FETCH_CLOCKS_RANGE_REQ,
                with_range!(RpbAaeFoldFetchClocksRangeReq, r, {
                    segment_filter: sf,
                    id_filter: ids,
                    filter_tree_size: fts,
                }),
            )
        }
        FoldCommand::FindSiblings {
            range: r,
            more_than,
        } => (
            code::AAE_FOLD_FIND_KEYS_REQ,
            with_range!(RpbAaeFoldFindKeysReq, r, { finder: 0, find_limit: *more_than }),
        ),
        FoldCommand::FindLarge {
            range: r,
            more_than,
        } => (
            code::AAE_FOLD_FIND_KEYS_REQ,
            with_range!(RpbAaeFoldFindKeysReq, r, { finder: 1, find_limit: *more_than }),
        ),
        FoldCommand::ObjectStats { range: r } => (
            code::AAE_FOLD_OBJECT_STATS_REQ,
            with_range!(RpbAaeFoldObjectStatsReq, r, {}),
        ),
        FoldCommand::FindTombs { range: r, segs: s } => {
            let (sf, ids, fts) = segs(s)?;
            (
                code::AAE_FOLD_FIND_TOMBS_REQ,
                with_range!(RpbAaeFoldFindTombsReq, r, {
                    segment_filter: sf,
                    id_filter: ids,
                    filter_tree_size: fts,
                }),
            )
        }
        FoldCommand::ReapTombs {
            range: r,
            segs: s,
            apply,
        } => {
            let (sf, ids, fts) = segs(s)?;
            (
                code::AAE_FOLD_REAP_TOMBS_REQ,
                with_range!(RpbAaeFoldReapTombsReq, r, {
                    segment_filter: sf,
                    id_filter: ids,
                    filter_tree_size: fts,
                    change_method: if *apply { 1 } else { 2 },
                    job_id: None,
                }),
            )
        }
        FoldCommand::EraseKeys {
            range: r,
            segs: s,
            apply,
        } => {
            let (sf, ids, fts) = segs(s)?;
            (
                code::AAE_FOLD_ERASE_KEYS_REQ,
                with_range!(RpbAaeFoldEraseKeysReq, r, {
                    segment_filter: sf,
                    id_filter: ids,
                    filter_tree_size: fts,
                    change_method: if *apply { 1 } else { 2 },
                    job_id: None,
                }),
            )
        }
        FoldCommand::ReplKeysRange { range: r, queue } => (
            code::AAE_FOLD_REPL_KEYS_REQ,
            with_range!(RpbAaeFoldReplKeysReq, r, {
                queuename: queue.as_bytes().to_vec(),
            }),
        ),
        FoldCommand::ListBuckets { n_val } => (
            code::AAE_FOLD_LIST_BUCKETS_REQ,
            RpbAaeFoldListBucketsReq {
                n_val: Some(*n_val),
            }
            .encode_to_vec(),
        ),
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The text of a reply.
fn render(c: u8, body: &[u8]) -> anyhow::Result<String> {
    let mut out = String::new();
    match c {
        code::AAE_FOLD_TREE_RESP => {
            let t = RpbAaeFoldTreeResp::decode(body)?;
            out.push_str(&format!(
                "tree size {}\n",
                SIZES.get(t.size as usize).copied().unwrap_or("?")
            ));
            let l1 = t.level_one.unwrap_or_default();
            for (i, h) in l1.chunks_exact(8).enumerate() {
                out.push_str(&format!("branch {i}: {}\n", hex(h)));
            }
            for l2 in &t.level_two {
                let Some((id, segs)) = l2.split_at_checked(4) else {
                    continue;
                };
                let id = u32::from_be_bytes(id.try_into()?);
                for (i, h) in segs.chunks_exact(8).enumerate() {
                    if h.iter().any(|b| *b != 0) {
                        out.push_str(&format!("segment {}: {}\n", id as usize * 256 + i, hex(h)));
                    }
                }
            }
        }
        code::AAE_FOLD_KEY_VALUE_RESP => {
            let r = RpbAaeFoldKeyValueResp::decode(body)?;
            for kv in r.keys_value {
                let bucket = match &kv.r#type {
                    Some(t) => format!("{}/{}", lossy(t), lossy(&kv.bucket)),
                    None => lossy(&kv.bucket),
                };
                out.push_str(&format!(
                    "{bucket}\t{}\t{}\n",
                    lossy(&kv.key),
                    hex(&kv.value)
                ));
            }
        }
        code::AAE_FOLD_KEY_COUNT_RESP => {
            let r = RpbAaeFoldKeyCountResp::decode(body)?;
            for kc in r.keys_count {
                match kc.order {
                    Some(o) => out.push_str(&format!("{} {o}\t{}\n", lossy(&kc.tag), kc.count)),
                    None => out.push_str(&format!("{}\t{}\n", lossy(&kc.tag), kc.count)),
                }
            }
        }
        code::AAE_FOLD_LIST_BUCKETS_RESP => {
            let r = RpbAaeFoldListBucketsResp::decode(body)?;
            for b in r.bucket_list {
                match &b.r#type {
                    Some(t) => out.push_str(&format!("{}/{}\n", lossy(t), lossy(&b.bucket))),
                    None => out.push_str(&format!("{}\n", lossy(&b.bucket))),
                }
            }
        }
        other => anyhow::bail!("unexpected reply code {other}"),
    }
    Ok(out)
}

/// The JSON of a reply: the facts of [`render`]'s text.
fn render_json(c: u8, body: &[u8]) -> anyhow::Result<serde_json::Value> {
    use serde_json::json;
    let bucket = |t: &Option<Vec<u8>>, b: &[u8]| match t {
        Some(t) => json!({"type": lossy(t), "bucket": lossy(b)}),
        None => json!({"bucket": lossy(b)}),
    };
    Ok(match c {
        code::AAE_FOLD_TREE_RESP => {
            let t = RpbAaeFoldTreeResp::decode(body)?;
            let l1 = t.level_one.unwrap_or_default();
            let branches: Vec<String> = l1.chunks_exact(8).map(hex).collect();
            let mut segments = serde_json::Map::new();
            for l2 in &t.level_two {
                let Some((id, segs)) = l2.split_at_checked(4) else {
                    continue;
                };
                let id = u32::from_be_bytes(id.try_into()?);
                for (i, h) in segs.chunks_exact(8).enumerate() {
                    if h.iter().any(|b| *b != 0) {
                        segments.insert((id as usize * 256 + i).to_string(), hex(h).into());
                    }
                }
            }
            json!({
                "size": SIZES.get(t.size as usize).copied().unwrap_or("?"),
                "branches": branches,
                "segments": segments,
            })
        }
        code::AAE_FOLD_KEY_VALUE_RESP => {
            let r = RpbAaeFoldKeyValueResp::decode(body)?;
            let keys: Vec<serde_json::Value> = r
                .keys_value
                .iter()
                .map(|kv| {
                    let mut v = bucket(&kv.r#type, &kv.bucket);
                    v["key"] = lossy(&kv.key).into();
                    v["value"] = hex(&kv.value).into();
                    v
                })
                .collect();
            json!({ "keys": keys })
        }
        code::AAE_FOLD_KEY_COUNT_RESP => {
            let r = RpbAaeFoldKeyCountResp::decode(body)?;
            let counts: Vec<serde_json::Value> = r
                .keys_count
                .iter()
                .map(|kc| json!({"tag": lossy(&kc.tag), "order": kc.order, "count": kc.count}))
                .collect();
            json!({ "counts": counts })
        }
        code::AAE_FOLD_LIST_BUCKETS_RESP => {
            let r = RpbAaeFoldListBucketsResp::decode(body)?;
            let buckets: Vec<serde_json::Value> = r
                .bucket_list
                .iter()
                .map(|b| bucket(&b.r#type, &b.bucket))
                .collect();
            json!({ "buckets": buckets })
        }
        other => anyhow::bail!("unexpected reply code {other}"),
    })
}

/// Runs one fold query on `node`; exit 1 when the node refuses it.
pub(crate) fn run(
    node: &AdminNode,
    cmd: &FoldCommand,
    json: bool,
) -> anyhow::Result<crate::Outcome> {
    let (c, body) = request(cmd)?;
    match call(node, c, &body)? {
        Ok((rc, reply)) if json => {
            println!("{}", render_json(rc, &reply)?);
            Ok(crate::Outcome::Done)
        }
        Ok((rc, reply)) => {
            print!("{}", render(rc, &reply)?);
            Ok(crate::Outcome::Done)
        }
        Err(msg) => {
            eprintln!("{msg}");
            Ok(crate::Outcome::Code(1))
        }
    }
}
