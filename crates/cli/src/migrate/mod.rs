//! `basalt migrate --from HOST:PBPORT --to CLUSTERADDR`: copies every
//! bucket of a Riak cluster (the `default` type and the types given with
//! `--types`) into a Basalt cluster over Riak's PB API, keeping vector
//! clocks, siblings, metadata, 2i terms and data types; then, with
//! `--sync` / `--sync-passes`, keeps Basalt in step until cut-over by
//! repeated `aae_fold` `fetch_clocks_range` passes over the objects
//! modified since the last pass.
//!
//! * **Listing**: buckets per type (`RpbListBucketsReq`; Riak has no PB
//!   call that lists bucket types, hence `--types`); keys in byte order,
//!   a page at a time, through the `$key` index (`RpbIndexReq`, cheap and
//!   ordered on a 2i-capable backend), or, where the source refuses it
//!   (bitcask), one streamed `RpbListKeysReq` sorted here (at most
//!   [`MAX_LISTED_KEYS`]).
//! * **Reading**: `RpbGetReq` with `deletedvclock` (siblings, clock,
//!   tombstones); for a data-type bucket also `DtFetchReq` (see
//!   [`convert`]).
//! * **Writing**: whole objects pushed to the target's cluster port as a
//!   replication push (`Msg::ReplPush`), which merges each into every
//!   replica without a clock increment (the path replication and handoff
//!   use): a merge is a join, so an object pushed twice (a resumed run, an
//!   overlapping sync pass) changes nothing and makes no false sibling.
//! * **Resuming**: the [`checkpoint`] is saved after every batch the
//!   target confirmed; a run started again skips the buckets done and the
//!   keys up to the last one confirmed.
//! * **Pipelining**: keys are fetched in rounds (at most one push's
//!   worth) by every connection at once; a round's push runs beside the
//!   next round's fetches, one push in flight.
//! * **Pacing**: at most `--rate` objects a second (default
//!   [`DEFAULT_RATE`]; 0 = unpaced), `--parallel` source connections.
//! * **Failures**: the source or target gone → the run pauses and retries
//!   with back-off ([`source::Retry`]), then resumes where it stood.

pub mod checkpoint;
pub mod convert;
pub mod source;

use crate::Outcome;
use anyhow::Context;
use basalt_server::bucket::keying::storage_bucket;
use basalt_server::cluster::ReplItem;
use basalt_server::crdt::DataType;
use basalt_server::object::RiakObject;
use basalt_server::vnode::request::WireObject;
use checkpoint::{bucket_id, hex, unhex, Checkpoint, Counts, Cursor};
use convert::Fetched;
use riak_pb::code;
use source::{Conn, Retry, Target};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Objects a second by default.
pub const DEFAULT_RATE: u32 = 1000;
/// Keys per listing page (`$key` index) and per fetch round.
pub const PAGE_KEYS: u32 = 500;
/// Keys one `RpbListKeysReq` fallback may hold in memory.
pub const MAX_LISTED_KEYS: usize = 10_000_000;
/// Items of one push (at most the target's replication batch).
pub const PUSH_ITEMS: usize = basalt_server::limits::REPL_BATCH;
/// Bytes of one push.
pub const PUSH_BYTES: usize = basalt_server::limits::REPL_BATCH_BYTES;
/// Source connections at most.
pub const MAX_PARALLEL: usize = 64;
/// Errors named one by one on stderr (the rest only counted).
const ERRORS_SHOWN: u64 = 20;

/// Arguments of `basalt migrate`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// The source's PB address (a Riak node, or a Basalt node).
    #[arg(long, value_name = "HOST:PBPORT")]
    from: String,
    /// The target Basalt node's cluster address (cluster_listen).
    #[arg(long, value_name = "HOST:CLUSTERPORT")]
    to: String,
    /// Bucket types to copy besides `default` (comma separated; Riak's PB
    /// API cannot list them). Create and activate them on Basalt first.
    #[arg(long, value_delimiter = ',')]
    types: Vec<String>,
    /// Only these buckets (comma separated; all buckets by default).
    #[arg(long, value_delimiter = ',')]
    buckets: Vec<String>,
    /// The checkpoint file (resumes from it when it exists).
    #[arg(long, default_value = "basalt-migrate.checkpoint")]
    checkpoint: PathBuf,
    /// Objects a second at most (0: unpaced).
    #[arg(long, default_value_t = DEFAULT_RATE)]
    rate: u32,
    /// Source connections fetching at once.
    #[arg(long, default_value_t = 4)]
    parallel: usize,
    /// Tombstones found by the copy: keep (copy them) or skip. Sync
    /// passes always carry deletes.
    #[arg(long, default_value = "keep", value_parser = ["keep", "skip"])]
    tombstones: String,
    /// After the copy, sync passes until interrupted (SIGINT/SIGTERM).
    #[arg(long)]
    sync: bool,
    /// After the copy, this many sync passes, then stop.
    #[arg(long, default_value_t = 0)]
    sync_passes: u64,
    /// Seconds between sync passes.
    #[arg(long, default_value_t = 10)]
    sync_interval: u64,
    /// Seconds each sync pass looks back before the previous pass began
    /// (clock skew between the source's nodes).
    #[arg(long, default_value_t = 60)]
    sync_overlap: u64,
    /// Seconds a call may keep failing (source or target gone) before the
    /// run stops; a later run resumes from the checkpoint.
    #[arg(long, default_value_t = 600)]
    retry_for: u64,
    /// Milliseconds of the first retry wait (doubling up to 30 s).
    #[arg(long, default_value_t = 200)]
    retry_first_ms: u64,
    /// Listing: `key-index` ($key pages), `list-keys`, or `auto`.
    #[arg(long, default_value = "auto", value_parser = ["auto", "key-index", "list-keys"])]
    listing: String,
    /// Print the summary as one JSON document.
    #[arg(long)]
    json: bool,
}

/// Runs `basalt migrate`.
pub fn run(args: MigrateArgs) -> anyhow::Result<Outcome> {
    if !(1..=MAX_PARALLEL).contains(&args.parallel) {
        anyhow::bail!("--parallel must be 1..={MAX_PARALLEL}");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    rt.block_on(Migration::new(args)?.run())
}

/// Objects a second at most.
struct Pace {
    rate: u32,
    start: Instant,
    n: u64,
}

impl Pace {
    /// Waits until `n` more objects keep within the rate.
    async fn take(&mut self, n: u64) {
        if self.rate == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.n as f64 / f64::from(self.rate));
        self.n += n;
        let elapsed = self.start.elapsed();
        if due > elapsed {
            tokio::time::sleep(due - elapsed).await;
        }
    }
}

/// A push under way, and what its confirmation moves the checkpoint to.
struct Inflight {
    push: tokio::task::JoinHandle<anyhow::Result<()>>,
    cursor: Option<Cursor>,
    counts: Counts,
}

struct Migration {
    args: MigrateArgs,
    ckpt: Checkpoint,
    conns: Vec<Conn>,
    target: Arc<Target>,
    /// The push under way (one at a time, beside the next round's fetches).
    inflight: Option<Inflight>,
    retry: Arc<Retry>,
    pace: Pace,
    started: Instant,
    at_start: Counts,
}

fn btype_opt(t: &[u8]) -> Option<Vec<u8>> {
    (t != b"default").then(|| t.to_vec())
}

impl Migration {
    fn new(args: MigrateArgs) -> anyhow::Result<Migration> {
        let ckpt = Checkpoint::open(&args.checkpoint, &args.from, &args.to)?;
        let bar = if args.json || !std::io::stderr().is_terminal() {
            indicatif::ProgressBar::hidden()
        } else {
            let b = indicatif::ProgressBar::new_spinner();
            b.enable_steady_tick(Duration::from_millis(200));
            b
        };
        let retry = Arc::new(Retry {
            first: Duration::from_millis(args.retry_first_ms.max(1)),
            max: Duration::from_secs(30),
            give_up: Duration::from_secs(args.retry_for),
            retries: Default::default(),
            bar,
        });
        let conns = (0..args.parallel)
            .map(|_| Conn::new(&args.from, retry.clone()))
            .collect();
        let target = Arc::new(Target::new(
            &args.to,
            format!("basalt-migrate:{}", args.from),
            retry.clone(),
        ));
        Ok(Migration {
            at_start: ckpt.state.counts.clone(),
            ckpt,
            conns,
            target,
            inflight: None,
            pace: Pace {
                rate: args.rate,
                start: Instant::now(),
                n: 0,
            },
            started: Instant::now(),
            retry,
            args,
        })
    }

    /// Keys fetched (and paced) together: about a quarter second's worth
    /// at the rate, at least one per connection, at most one push; the
    /// push of a round runs beside the next round's fetches.
    fn round(&self) -> usize {
        let quarter = match self.args.rate {
            0 => PAGE_KEYS as usize,
            r => (r / 4) as usize,
        };
        quarter.clamp(self.conns.len(), PUSH_ITEMS)
    }

    fn types(&self) -> Vec<Vec<u8>> {
        let mut t = vec![b"default".to_vec()];
        for x in &self.args.types {
            if x != "default" && !t.contains(&x.as_bytes().to_vec()) {
                t.push(x.as_bytes().to_vec());
            }
        }
        t
    }

    fn show(&self, what: &str) {
        let c = &self.ckpt.state.counts;
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        let done = c.objects - self.at_start.objects;
        self.retry.bar.set_message(format!(
            "{what}: {} objects, {:.1} MB, {:.0} objects/s, {} errors",
            c.objects,
            c.bytes as f64 / 1e6,
            done as f64 / secs,
            c.errors
        ));
    }

    async fn run(mut self) -> anyhow::Result<Outcome> {
        let id = self.target.hello().await?;
        tracing::info!(target = %self.args.to, cluster = %id, "target is a Basalt node");
        if !self.ckpt.state.copy_done {
            let now = unix_now();
            self.ckpt.state.sync_from.get_or_insert(now);
            for t in self.types() {
                for b in self.list_buckets(&t).await? {
                    if self.ckpt.state.done.contains(&bucket_id(&t, &b)) {
                        continue;
                    }
                    self.copy_bucket(&t, &b).await?;
                    self.ckpt.state.done.insert(bucket_id(&t, &b));
                    self.ckpt.state.current = None;
                    self.ckpt.state.counts.buckets += 1;
                    self.ckpt.save()?;
                }
            }
            self.ckpt.state.copy_done = true;
            self.ckpt.save()?;
        }
        let passes = if self.args.sync {
            u64::MAX
        } else {
            self.args.sync_passes
        };
        if passes > 0 {
            let stop = stop_signal();
            tokio::pin!(stop);
            let mut n = 0;
            while n < passes {
                tokio::select! {
                    r = self.sync_pass() => r?,
                    _ = &mut stop => break,
                }
                n += 1;
                if n < passes {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(self.args.sync_interval)) => {}
                        _ = &mut stop => break,
                    }
                }
            }
        }
        self.retry.bar.finish_and_clear();
        self.summary();
        Ok(Outcome::Done)
    }

    fn summary(&self) {
        let c = &self.ckpt.state.counts;
        let secs = self.started.elapsed().as_secs_f64();
        let objects = c.objects - self.at_start.objects;
        let bytes = c.bytes - self.at_start.bytes;
        let per_s = objects as f64 / secs.max(0.001);
        let mb_s = bytes as f64 / 1e6 / secs.max(0.001);
        let retries = self.retry.retries.load(Ordering::Relaxed);
        if self.args.json {
            let v = serde_json::json!({
                "source": self.args.from,
                "target": self.args.to,
                "copy_done": self.ckpt.state.copy_done,
                "counts": c,
                "this_run": {
                    "seconds": secs,
                    "objects": objects,
                    "bytes": bytes,
                    "objects_per_s": per_s,
                    "mb_per_s": mb_s,
                    "retries": retries,
                },
            });
            println!("{v}");
        } else {
            println!(
                "migrated from {} to {}: {} objects ({:.1} MB), {} with siblings ({} siblings in all), {} tombstones kept, {} skipped, {} data types, {} missing, {} errors, {} buckets, {} sync passes ({} objects)",
                self.args.from, self.args.to, c.objects, c.bytes as f64 / 1e6, c.with_siblings,
                c.siblings, c.tombstones_kept, c.tombstones_skipped, c.datatypes, c.missing,
                c.errors, c.buckets, c.sync_passes, c.synced
            );
            println!(
                "this run: {objects} objects in {secs:.1} s ({per_s:.0} objects/s, {mb_s:.2} MB/s), {retries} retries"
            );
        }
    }

    async fn list_buckets(&mut self, t: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
        let req = riak_pb::RpbListBucketsReq {
            timeout: None,
            stream: Some(false),
            r#type: btype_opt(t),
        };
        let all = match self.conns[0]
            .exchange(code::LIST_BUCKETS_REQ, &req, |_, body| {
                riak_pb::decode::<riak_pb::RpbListBucketsResp>(body)
                    .is_ok_and(|r| r.done == Some(false))
            })
            .await?
        {
            Ok(all) => all,
            Err(e) => anyhow::bail!(
                "the source refused to list the buckets of type {}: {e}",
                String::from_utf8_lossy(t)
            ),
        };
        let mut out = Vec::new();
        for (_, body) in all {
            let r: riak_pb::RpbListBucketsResp = riak_pb::decode(&body)?;
            out.extend(r.buckets);
        }
        if !self.args.buckets.is_empty() {
            out.retain(|b| {
                self.args
                    .buckets
                    .iter()
                    .any(|x| x.as_bytes() == b.as_slice())
            });
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    async fn datatype_of(&mut self, t: &[u8], b: &[u8]) -> anyhow::Result<Option<DataType>> {
        if t == b"default" {
            return Ok(None);
        }
        let req = riak_pb::RpbGetBucketReq {
            bucket: b.to_vec(),
            r#type: btype_opt(t),
        };
        match self.conns[0].call(code::GET_BUCKET_REQ, &req).await? {
            Ok((_, body)) => {
                let r: riak_pb::RpbGetBucketResp = riak_pb::decode(&body)?;
                Ok(r.props
                    .datatype
                    .and_then(|d| DataType::from_name(&String::from_utf8_lossy(&d))))
            }
            Err(e) => anyhow::bail!("the source refused the props of a bucket: {e}"),
        }
    }

    /// The next page of keys after `after` (byte order), or `None` when
    /// the source has no `$key` index.
    async fn key_page(
        &mut self,
        t: &[u8],
        b: &[u8],
        after: &[u8],
    ) -> anyhow::Result<Option<Vec<Vec<u8>>>> {
        let req = riak_pb::RpbIndexReq {
            bucket: b.to_vec(),
            index: b"$key".to_vec(),
            qtype: 1,
            range_min: Some(after.to_vec()),
            range_max: Some(vec![0xff; 1024]),
            max_results: Some(PAGE_KEYS + 1),
            stream: Some(false),
            pagination_sort: Some(true),
            r#type: btype_opt(t),
            ..Default::default()
        };
        match self.conns[0].call(code::INDEX_REQ, &req).await? {
            Ok((_, body)) => {
                let r: riak_pb::RpbIndexResp = riak_pb::decode(&body)?;
                let mut keys = r.keys;
                keys.retain(|k| k.as_slice() > after);
                keys.sort();
                Ok(Some(keys))
            }
            Err(e) => {
                tracing::info!(error = %e, "no $key index on the source; listing keys instead");
                Ok(None)
            }
        }
    }

    async fn list_keys(&mut self, t: &[u8], b: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
        let req = riak_pb::RpbListKeysReq {
            bucket: b.to_vec(),
            timeout: None,
            r#type: btype_opt(t),
        };
        let all = self.conns[0]
            .exchange(code::LIST_KEYS_REQ, &req, |c, body| {
                c == code::LIST_KEYS_RESP
                    && riak_pb::decode::<riak_pb::RpbListKeysResp>(body)
                        .is_ok_and(|r| r.done != Some(true))
            })
            .await?
            .map_err(|e| anyhow::anyhow!("the source refused to list keys: {e}"))?;
        let mut keys = Vec::new();
        for (_, body) in all {
            let r: riak_pb::RpbListKeysResp = riak_pb::decode(&body)?;
            keys.extend(r.keys);
            if keys.len() > MAX_LISTED_KEYS {
                anyhow::bail!("a bucket of more than {MAX_LISTED_KEYS} keys on a source without a $key index: copy it with --buckets in parts, or from a 2i-capable backend");
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    async fn copy_bucket(&mut self, t: &[u8], b: &[u8]) -> anyhow::Result<()> {
        let dt = self.datatype_of(t, b).await?;
        let mut after = match &self.ckpt.state.current {
            Some(c) if unhex(&c.btype)? == t && unhex(&c.bucket)? == b => unhex(&c.after)?,
            _ => Vec::new(),
        };
        let what = format!(
            "{}/{}",
            String::from_utf8_lossy(t),
            String::from_utf8_lossy(b)
        );
        let mut listed: Option<std::vec::IntoIter<Vec<u8>>> = None;
        if self.args.listing == "list-keys" {
            let keys = self.list_keys(t, b).await?;
            listed = Some(
                keys.into_iter()
                    .filter(|k| k.as_slice() > after.as_slice())
                    .collect::<Vec<_>>()
                    .into_iter(),
            );
        }
        loop {
            let page: Vec<Vec<u8>> = match &mut listed {
                Some(it) => it.by_ref().take(PAGE_KEYS as usize).collect(),
                None => match self.key_page(t, b, &after).await? {
                    Some(p) => p,
                    None if self.args.listing == "auto" => {
                        let keys = self.list_keys(t, b).await?;
                        let ahead = after.clone();
                        let mut it = keys
                            .into_iter()
                            .filter(|k| k.as_slice() > ahead.as_slice())
                            .collect::<Vec<_>>()
                            .into_iter();
                        let p = it.by_ref().take(PAGE_KEYS as usize).collect();
                        listed = Some(it);
                        p
                    }
                    None => anyhow::bail!("the source has no $key index (use --listing list-keys)"),
                },
            };
            if page.is_empty() {
                return self.settle().await;
            }
            for round in page.chunks(self.round()) {
                self.pace.take(round.len() as u64).await;
                self.copy_keys(t, b, dt, round, false).await?;
                self.show(&what);
            }
            after = page.last().cloned().unwrap_or_default();
        }
    }

    /// Fetches `keys` (in order) with every connection and pushes them
    /// in batches; saves the checkpoint after each (copy only).
    async fn copy_keys(
        &mut self,
        t: &[u8],
        b: &[u8],
        dt: Option<DataType>,
        keys: &[Vec<u8>],
        sync: bool,
    ) -> anyhow::Result<()> {
        let per = keys.len().div_ceil(self.conns.len()).max(1);
        let jobs = self
            .conns
            .iter_mut()
            .zip(keys.chunks(per))
            .map(|(conn, chunk)| async move {
                let mut out = Vec::with_capacity(chunk.len());
                for k in chunk {
                    out.push((k.clone(), fetch_one(conn, t, b, k, dt).await?));
                }
                anyhow::Ok(out)
            });
        let mut fetched = Vec::with_capacity(keys.len());
        for r in futures_util::future::join_all(jobs).await {
            fetched.extend(r?);
        }
        let sb = storage_bucket(btype_opt(t).as_deref(), b);
        let mut batch: Vec<ReplItem> = Vec::new();
        let mut batch_bytes = 0;
        let mut last_key: Option<Vec<u8>> = None;
        let mut pending = Counts::default();
        for (k, f) in fetched {
            let keep_tombs = sync || self.args.tombstones == "keep";
            let obj: Option<RiakObject> = match f {
                Ok(Fetched::Missing) => {
                    pending.missing += 1;
                    None
                }
                Ok(Fetched::Tombstone(o)) if keep_tombs => {
                    pending.tombstones_kept += 1;
                    Some(o)
                }
                Ok(Fetched::Tombstone(_)) => {
                    pending.tombstones_skipped += 1;
                    None
                }
                Ok(Fetched::Object(o)) => Some(o),
                Err(e) => {
                    pending.errors += 1;
                    if self.ckpt.state.counts.errors + pending.errors <= ERRORS_SHOWN {
                        self.retry.bar.suspend(|| {
                            eprintln!(
                                "basalt migrate: {}/{}/{}: not copied: {e}",
                                String::from_utf8_lossy(t),
                                String::from_utf8_lossy(b),
                                String::from_utf8_lossy(&k)
                            )
                        });
                    }
                    None
                }
            };
            if let Some(o) = obj {
                let c = &mut pending;
                c.objects += 1;
                c.bytes += o.value_bytes() as u64;
                c.siblings += o.contents.len() as u64;
                if o.contents.len() > 1 {
                    c.with_siblings += 1;
                }
                if dt.is_some() && !o.is_deleted() {
                    c.datatypes += 1;
                }
                if sync {
                    c.synced += 1;
                }
                let w = WireObject::full(&o);
                batch_bytes += w.meta.len() + w.value.len();
                batch.push(ReplItem::Object((sb.clone(), k.clone(), w)));
            }
            last_key = Some(k);
            if batch.len() >= PUSH_ITEMS || batch_bytes >= PUSH_BYTES {
                self.flush(t, b, &mut batch, last_key.as_deref(), sync, &mut pending)
                    .await?;
                batch_bytes = 0;
            }
        }
        self.flush(t, b, &mut batch, last_key.as_deref(), sync, &mut pending)
            .await
    }

    /// Starts pushing `batch` (after the push before it was confirmed);
    /// the checkpoint moves to `last` with `pending`'s counts once the
    /// target confirms it ([`Migration::settle`]).
    async fn flush(
        &mut self,
        t: &[u8],
        b: &[u8],
        batch: &mut Vec<ReplItem>,
        last: Option<&[u8]>,
        sync: bool,
        pending: &mut Counts,
    ) -> anyhow::Result<()> {
        let cursor = match (sync, last) {
            (false, Some(k)) => Some(Cursor {
                btype: hex(t),
                bucket: hex(b),
                after: hex(k),
            }),
            _ => None,
        };
        let counts = std::mem::take(pending);
        self.settle().await?;
        let items = std::mem::take(batch);
        let target = self.target.clone();
        let push = tokio::spawn(async move {
            if !items.is_empty() {
                target.push(items).await?;
            }
            Ok(())
        });
        self.inflight = Some(Inflight {
            push,
            cursor,
            counts,
        });
        Ok(())
    }

    /// Waits for the push under way; then moves the checkpoint and saves it.
    async fn settle(&mut self) -> anyhow::Result<()> {
        let Some(i) = self.inflight.take() else {
            return Ok(());
        };
        i.push.await.context("the push task")??;
        if let Some(c) = i.cursor {
            self.ckpt.state.current = Some(c);
        }
        self.ckpt.state.counts.add(&i.counts);
        self.ckpt.save()
    }

    /// One sync pass: every object the source changed since the last pass
    /// (less the overlap), found by `aae_fold` `fetch_clocks_range`.
    async fn sync_pass(&mut self) -> anyhow::Result<()> {
        let start = unix_now();
        let from = self
            .ckpt
            .state
            .sync_from
            .unwrap_or(start)
            .saturating_sub(self.args.sync_overlap);
        for t in self.types() {
            for b in self.list_buckets(&t).await? {
                let dt = self.datatype_of(&t, &b).await?;
                let req = riak_pb::RpbAaeFoldFetchClocksRangeReq {
                    r#type: btype_opt(&t),
                    bucket: b.clone(),
                    key_range: false,
                    segment_filter: false,
                    modified_range: true,
                    last_mod_start: Some(from.min(u64::from(u32::MAX)) as u32),
                    last_mod_end: Some((start + 1).min(u64::from(u32::MAX)) as u32),
                    ..Default::default()
                };
                let body = match self.conns[0].call(code::AAE_FOLD_FETCH_CLOCKS_RANGE_REQ, &req).await? {
                    Ok((_, body)) => body,
                    Err(e) => anyhow::bail!("the source refused an aae_fold fetch_clocks_range (is Tictac AAE on?): {e}"),
                };
                let r: riak_pb::RpbAaeFoldKeyValueResp = riak_pb::decode(&body)?;
                let mut keys: Vec<Vec<u8>> = r.keys_value.into_iter().map(|kv| kv.key).collect();
                keys.sort();
                keys.dedup();
                for round in keys.chunks(self.round()) {
                    self.pace.take(round.len() as u64).await;
                    self.copy_keys(&t, &b, dt, round, true).await?;
                }
            }
        }
        self.settle().await?;
        self.ckpt.state.sync_from = Some(start);
        self.ckpt.state.counts.sync_passes += 1;
        self.ckpt.save()?;
        self.show("sync");
        Ok(())
    }
}

/// One key from the source: `Err` = not copyable (counted, named).
async fn fetch_one(
    conn: &mut Conn,
    t: &[u8],
    b: &[u8],
    k: &[u8],
    dt: Option<DataType>,
) -> anyhow::Result<Result<Fetched, String>> {
    let req = riak_pb::RpbGetReq {
        bucket: b.to_vec(),
        key: k.to_vec(),
        r#type: btype_opt(t),
        deletedvclock: Some(true),
        ..Default::default()
    };
    let body = match conn.call(code::GET_REQ, &req).await? {
        Ok((_, body)) => body,
        Err(e) => return Ok(Err(format!("GET refused: {e}"))),
    };
    let resp: riak_pb::RpbGetResp = riak_pb::decode(&body)?;
    let fetched = match convert::from_get(resp) {
        Ok(f) => f,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let (Some(t_dt), Fetched::Object(o)) = (dt, &fetched) else {
        return Ok(Ok(fetched));
    };
    if o.is_deleted() {
        return Ok(Ok(fetched));
    }
    let req = riak_pb::DtFetchReq {
        bucket: b.to_vec(),
        key: k.to_vec(),
        r#type: t.to_vec(),
        include_context: Some(false),
        ..Default::default()
    };
    let body = match conn.call(code::DT_FETCH_REQ, &req).await? {
        Ok((_, body)) => body,
        Err(e) => return Ok(Err(format!("DtFetch refused: {e}"))),
    };
    let resp: riak_pb::DtFetchResp = riak_pb::decode(&body)?;
    let Fetched::Object(o) = fetched else {
        return Ok(Err("unreachable".into()));
    };
    Ok(convert::with_datatype(o, t_dt, &resp)
        .map(Fetched::Object)
        .map_err(|e| e.to_string()))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Resolves on SIGINT or SIGTERM.
async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
