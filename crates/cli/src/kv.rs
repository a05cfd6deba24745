//! `basalt kv`: one key/value command on an embedded store.
//!
//! Buckets, keys and metadata are taken as raw bytes from the arguments;
//! values come from stdin (`put`) and go to stdout (`get`) unchanged.

use crate::kv_common::{check_name, head_json, lossy};
use crate::kv_features::{self, BackupArgs, FoldArgs, IndexArgs, WriteOptArgs};
use crate::Outcome;
use anyhow::{bail, Context, Result};
use basalt_engine::index::IndexChange;
use basalt_engine::journal::JournalFileInfo;
use basalt_engine::{limits, Config, Error, PutOptions, Store, StoreStats, SyncStrategy};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// Options shared by every `kv` command.
#[derive(Debug, Args)]
pub struct KvArgs {
    /// The store's data directory (created if it does not exist).
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// Acknowledge each write only after an fsync covering it.
    #[arg(long)]
    sync: bool,
    /// Storage backend: leveled (the default, Basalt's engine), bitcask,
    /// rocksdb, rocksdb-blob or memory. A directory written by one backend
    /// is refused by the others.
    #[arg(long, value_name = "NAME", default_value = basalt_backends::DEFAULT_BACKEND)]
    backend: String,
    /// Largest value accepted by put and import, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = limits::VALUE_SIZE_BYTES_MAX_DEFAULT)]
    value_max: u64,
    #[command(subcommand)]
    command: KvCommand,
}

#[derive(Debug, Subcommand)]
enum KvCommand {
    /// Store the bytes read from stdin as the value of BUCKET/KEY.
    Put {
        /// User metadata stored with the value (returned by head).
        #[arg(long, value_name = "TEXT")]
        meta: Option<OsString>,
        /// Expire the object SECS seconds from now (0: already expired, so
        /// it reads as not found).
        #[arg(long, value_name = "SECS")]
        ttl: Option<u64>,
        #[command(flatten)]
        opts: WriteOptArgs,
        /// Bucket name.
        bucket: OsString,
        /// Key within the bucket.
        key: OsString,
    },
    /// Write the value of BUCKET/KEY to stdout (exit 1 if not found).
    Get {
        /// Bucket name.
        bucket: OsString,
        /// Key within the bucket.
        key: OsString,
    },
    /// Print the metadata of BUCKET/KEY as one JSON line (exit 1 if not found).
    Head {
        /// Bucket name.
        bucket: OsString,
        /// Key within the bucket.
        key: OsString,
    },
    /// Delete BUCKET/KEY (deleting a missing key is not an error).
    Delete {
        #[command(flatten)]
        opts: WriteOptArgs,
        /// Bucket name.
        bucket: OsString,
        /// Key within the bucket.
        key: OsString,
    },
    /// List the keys of BUCKET, one a line, sorted.
    Keys {
        /// Bucket name.
        bucket: OsString,
    },
    /// Print the store's shape (levels, memtable, SQNs, journal files) and
    /// counters as JSON. The counters start at zero when the store is
    /// opened, so they count what this process did (e.g. journal records
    /// replayed at open).
    Stats,
    /// Write lines `bucket<TAB>key<TAB>value` from stdin; print
    /// `ok<TAB>bucket<TAB>key` after each acknowledged write.
    ///
    /// Empty lines are skipped. An optional fourth column
    /// `field=term,field=term` adds index entries for the key (empty: none).
    /// A malformed line stops the import with an error naming its line
    /// number (the lines before it stay written).
    Import,
    /// Rebuild the ledger (and a damaged journal manifest) from the journal files.
    Repair,
    /// Query a secondary index: one result a line (`key`, or `term<TAB>key`
    /// with --return-terms); a full page ends with `continuation<TAB>C`.
    Index(IndexArgs),
    /// Fold over BUCKET on a snapshot, printing keys, heads (JSON lines) or
    /// objects (`key<TAB>value`); the rate goes to stderr.
    Fold(FoldArgs),
    /// List the buckets holding live objects, one a line, sorted.
    Buckets,
    /// Run journal compaction now, until nothing is worth compacting, and
    /// print a summary (runs, files, bytes before/after, records).
    Compact,
    /// Score every closed journal file now, as compaction does (sampled
    /// records judged against the ledger): one line per file, oldest first
    /// (`file=N bytes=B live_pct=P`), then a total line (`garbage files=N
    /// bytes=B garbage_bytes=G garbage_pct=P`). Reads only; changes nothing.
    Garbage,
    /// Hot backup into DEST; prints what was linked or copied.
    Backup(BackupArgs),
}

/// Runs one `kv` command.
pub fn run(args: KvArgs) -> Result<Outcome> {
    if args.backend != basalt_backends::DEFAULT_BACKEND {
        return run_backend(args);
    }
    let mut config = Config::new(&args.data_dir);
    config.value_bytes_max = args.value_max;
    config.index_terms = recorded_index_terms(&args.data_dir)?;
    if args.sync {
        config.sync = SyncStrategy::Sync;
    }
    if let KvCommand::Repair = args.command {
        return repair(config);
    }
    if matches!(args.command, KvCommand::Compact | KvCommand::Garbage) {
        // These two do the compactor's work in the foreground; the
        // background thread would only race them (and `garbage` promises
        // to change nothing).
        config.compaction_runs_per_day = 0;
        config.compaction_check_interval = std::time::Duration::ZERO;
    }
    let dir = config.dir.clone();
    let result = Store::open(config)
        .map_err(anyhow::Error::from)
        .and_then(|store| {
            let result = command(&store, args.command, args.value_max);
            let closed = store.close();
            let outcome = result?;
            closed?;
            Ok(outcome)
        });
    result.map_err(|e| with_repair_hint(e, &dir))
}

/// Damage in the ledger (an SST file) is repaired by rebuilding the ledger
/// from the journal; say so when an error reports such damage.
fn with_repair_hint(e: anyhow::Error, dir: &std::path::Path) -> anyhow::Error {
    let ledger_damage = e.chain().any(|c| match c.downcast_ref::<Error>() {
        Some(Error::Corrupt { path, .. }) => path.extension().is_some_and(|x| x == "sst"),
        Some(Error::Closed(why)) => why.starts_with("ledger:") && why.contains("corrupt"),
        _ => false,
    });
    if ledger_damage {
        e.context(format!(
            "ledger damage (rebuild the ledger from the journal with `basalt kv --data-dir {} repair`)",
            dir.display()
        ))
    } else {
        e
    }
}

fn command(store: &Store, command: KvCommand, value_max: u64) -> Result<Outcome> {
    let mut stdout = std::io::stdout().lock();
    match command {
        KvCommand::Put {
            meta,
            ttl,
            opts,
            bucket,
            key,
        } => {
            let opts = kv_features::write_options(&opts, ttl)?;
            let value = read_value(value_max)?;
            let meta = meta.map(OsString::into_vec).unwrap_or_default();
            store.put_with(&bucket.into_vec(), &key.into_vec(), &value, &meta, &opts)?;
        }
        KvCommand::Get { bucket, key } => {
            let (bucket, key) = names(bucket, key)?;
            match store.get(&bucket, &key)? {
                Some(obj) => {
                    stdout.write_all(&obj.value).context("write to stdout")?;
                    stdout.flush().context("write to stdout")?;
                }
                None => return Ok(not_found(&bucket, &key)),
            }
        }
        KvCommand::Head { bucket, key } => {
            let (bucket, key) = names(bucket, key)?;
            match store.head(&bucket, &key)? {
                Some(head) => {
                    writeln!(stdout, "{}", head_json(&bucket, &key, &head))
                        .context("write to stdout")?;
                }
                None => return Ok(not_found(&bucket, &key)),
            }
        }
        KvCommand::Delete { opts, bucket, key } => {
            let opts = kv_features::write_options(&opts, None)?;
            store.delete_with(&bucket.into_vec(), &key.into_vec(), &opts)?;
        }
        KvCommand::Keys { bucket } => {
            let bucket = bucket.into_vec();
            check_name("bucket", &bucket)?;
            let mut failed = None;
            store.fold_keys(&bucket, &mut |k| {
                let res = stdout.write_all(k).and_then(|()| stdout.write_all(b"\n"));
                failed = res.err();
                failed.is_none()
            })?;
            if let Some(e) = failed {
                return Err(e).context("write to stdout");
            }
            stdout.flush().context("write to stdout")?;
        }
        KvCommand::Stats => {
            let text = serde_json::to_string_pretty(&stats_json(&store.stats()))?;
            writeln!(stdout, "{text}").context("write to stdout")?;
        }
        KvCommand::Import => import(
            &mut |b, k, v, index| {
                let opts = PutOptions {
                    index,
                    ..PutOptions::default()
                };
                Ok(store.put_with(b, k, v, b"", &opts).map(|_| ())?)
            },
            &mut std::io::stdin().lock(),
            &mut stdout,
        )?,
        KvCommand::Repair => bail!("repair must run without an open store"),
        KvCommand::Index(args) => kv_features::index(store, args, &mut stdout)?,
        KvCommand::Fold(args) => kv_features::fold(store, args, &mut stdout)?,
        KvCommand::Buckets => kv_features::buckets(store, &mut stdout)?,
        KvCommand::Compact => kv_features::compact(store, &mut stdout)?,
        KvCommand::Garbage => kv_features::garbage(store, &mut stdout)?,
        KvCommand::Backup(args) => kv_features::backup(store, args, &mut stdout)?,
    }
    Ok(Outcome::Done)
}

fn names(bucket: OsString, key: OsString) -> Result<(Vec<u8>, Vec<u8>)> {
    let (bucket, key) = (bucket.into_vec(), key.into_vec());
    check_name("bucket", &bucket)?;
    check_name("key", &key)?;
    Ok((bucket, key))
}

fn not_found(bucket: &[u8], key: &[u8]) -> Outcome {
    eprintln!("basalt: not found: {}/{}", lossy(bucket), lossy(key));
    Outcome::NotFound
}

/// Reads the value of `put` from stdin, refusing more than `value_max` bytes
/// without reading an unbounded amount into memory.
fn read_value(value_max: u64) -> Result<Vec<u8>> {
    let mut value = Vec::new();
    std::io::stdin()
        .lock()
        .take(value_max.saturating_add(1))
        .read_to_end(&mut value)
        .context("read the value from stdin")?;
    if value.len() as u64 > value_max {
        bail!("invalid input: the value on stdin is larger than the limit of {value_max} bytes (--value-max)");
    }
    Ok(value)
}

/// Writes one imported object.
type PutFn<'a> = dyn FnMut(&[u8], &[u8], &[u8], Vec<IndexChange>) -> Result<()> + 'a;

fn import(put: &mut PutFn<'_>, input: &mut dyn BufRead, out: &mut dyn Write) -> Result<()> {
    let mut line = Vec::new();
    let mut line_no = 0u64;
    let mut written = 0u64;
    loop {
        line.clear();
        let n = input
            .read_until(b'\n', &mut line)
            .with_context(|| format!("read stdin line {}", line_no + 1))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line.is_empty() {
            continue;
        }
        let cols: Vec<&[u8]> = line.splitn(4, |&b| b == b'\t').collect();
        let [bucket, key, value, rest @ ..] = cols.as_slice() else {
            bail!(
                "stdin line {line_no}: expected bucket<TAB>key<TAB>value, found {} column(s)",
                cols.len()
            );
        };
        let index =
            kv_features::import_index_column(rest.first().copied().unwrap_or_default(), line_no)?;
        put(bucket, key, value, index).with_context(|| format!("stdin line {line_no}"))?;
        written += 1;
        let mut ack = Vec::with_capacity(bucket.len() + key.len() + 5);
        ack.extend_from_slice(b"ok\t");
        ack.extend_from_slice(bucket);
        ack.push(b'\t');
        ack.extend_from_slice(key);
        ack.push(b'\n');
        out.write_all(&ack)
            .and_then(|()| out.flush())
            .context("write to stdout")?;
    }
    tracing::info!("imported {written} objects from {line_no} lines");
    Ok(())
}

/// The 2i term source a store recorded (`INDEX_RECALC`), if this build
/// knows it: a node's vnode stores name the Riak object's. An unknown name
/// leaves it unset, and the store then refuses a rebuild with its own
/// error.
fn recorded_index_terms(dir: &std::path::Path) -> Result<Option<basalt_engine::IndexTerms>> {
    let source = basalt_engine::index::recalc::marker_source(dir)?;
    Ok(match source.as_deref() {
        Some(basalt_server::vnode::INDEX_TERMS_SOURCE) => Some(basalt_server::vnode::index_terms()),
        _ => None,
    })
}

fn repair(config: Config) -> Result<Outcome> {
    let dir = config.dir.clone();
    let report = Store::repair(config)?;
    println!(
        "repaired {}: rebuilt the ledger from the journal, replayed {} records, skipped {} corrupt records",
        dir.display(),
        report.replayed,
        report.corrupt_records
    );
    Ok(Outcome::Done)
}

fn journal_file_json(f: &JournalFileInfo) -> Value {
    json!({
        "file_no": f.file_no,
        "path": f.path.display().to_string(),
        "first_sqn": f.first_sqn,
        "last_sqn": f.last_sqn,
        "size_bytes": f.size_bytes,
        "active": f.active,
    })
}

fn stats_json(s: &StoreStats) -> Value {
    let counters: serde_json::Map<String, Value> = s
        .counters
        .iter()
        .map(|(name, v)| ((*name).to_string(), json!(v)))
        .collect();
    let levels: Vec<Value> = s
        .levels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            json!({
                "level": i,
                "files": l.files,
                "bytes": l.bytes,
                "entries": l.entries,
                "broken": l.broken,
            })
        })
        .collect();
    json!({
        "counters": counters,
        "levels": levels,
        "memtable_entries": s.memtable_entries,
        "persisted_sqn": s.persisted_sqn,
        "last_sqn": s.last_sqn,
        "block_cache": {"capacity_bytes": s.block_cache.0, "bytes": s.block_cache.1},
        "journal_garbage_estimate": s.journal_garbage.map(|e| json!({
            "files": e.files,
            "closed_bytes": e.closed_bytes,
            "garbage_bytes": e.garbage_bytes,
            "garbage_pct": e.pct(),
        })),
        "disk": s.disk.map(|d| json!({
            "free_bytes": d.free_bytes,
            "total_bytes": d.total_bytes,
            "free_pct": d.free_pct(),
        })),
        "disk_writes_refused": s.disk_writes_refused,
        "removal_queue": {"bytes": s.removal_queue.0, "files": s.removal_queue.1},
        "journal_file_count": s.journal_files.len(),
        "journal_files": s.journal_files.iter().map(journal_file_json).collect::<Vec<_>>(),
    })
}

/// Runs one `kv` command on a backend other than leveled, through the
/// `basalt_backend::Backend` trait (leveled keeps the engine's own path for
/// its engine-specific `stats` and `repair`).
fn run_backend(args: KvArgs) -> Result<Outcome> {
    if let KvCommand::Repair = args.command {
        bail!(
            "repair rebuilds a leveled ledger; backend '{}' has no repair command",
            args.backend
        );
    }
    let cfg = basalt_backends::BackendConfig {
        sync: args.sync,
        ..Default::default()
    };
    let backend = basalt_backends::open_backend(&args.backend, &args.data_dir, &cfg)?;
    let result = backend_command(&*backend, args.command, args.value_max);
    let closed = backend.close();
    let outcome = result?;
    closed?;
    Ok(outcome)
}

fn backend_command(
    b: &dyn basalt_backend::Backend,
    command: KvCommand,
    value_max: u64,
) -> Result<Outcome> {
    use std::ops::ControlFlow;
    let mut stdout = std::io::stdout().lock();
    match command {
        KvCommand::Put {
            meta,
            ttl,
            opts: changes,
            bucket,
            key,
        } => {
            let opts = backend_write_options(kv_features::write_options(&changes, ttl)?);
            let value = read_value(value_max)?;
            let meta = meta.map(OsString::into_vec).unwrap_or_default();
            b.put(&bucket.into_vec(), &key.into_vec(), &value, &meta, &opts)?;
        }
        KvCommand::Get { bucket, key } => {
            let (bucket, key) = names(bucket, key)?;
            match b.get(&bucket, &key)? {
                Some(obj) => {
                    stdout.write_all(&obj.value).context("write to stdout")?;
                    stdout.flush().context("write to stdout")?;
                }
                None => return Ok(not_found(&bucket, &key)),
            }
        }
        KvCommand::Head { bucket, key } => {
            let (bucket, key) = names(bucket, key)?;
            match b.head(&bucket, &key)? {
                Some(head) => {
                    writeln!(stdout, "{}", head_json(&bucket, &key, &head))
                        .context("write to stdout")?;
                }
                None => return Ok(not_found(&bucket, &key)),
            }
        }
        KvCommand::Delete {
            opts: changes,
            bucket,
            key,
        } => {
            let opts = backend_write_options(kv_features::write_options(&changes, None)?);
            b.delete(&bucket.into_vec(), &key.into_vec(), &opts)?;
        }
        KvCommand::Keys { bucket } => {
            let bucket = bucket.into_vec();
            check_name("bucket", &bucket)?;
            let mut keys = Vec::new();
            b.fold_keys(&bucket, None, &mut |k| {
                keys.push(k.to_vec());
                ControlFlow::Continue(())
            })?;
            if !b.capabilities().ordered_keys {
                keys.sort_unstable();
            }
            for k in keys {
                stdout
                    .write_all(&k)
                    .and_then(|()| stdout.write_all(b"\n"))
                    .context("write to stdout")?;
            }
            stdout.flush().context("write to stdout")?;
        }
        KvCommand::Stats => {
            let s = b.stats()?;
            let counters: serde_json::Map<String, Value> = s
                .counters
                .iter()
                .map(|(n, v)| (n.clone(), json!(v)))
                .collect();
            let text = serde_json::to_string_pretty(&json!({
                "backend": s.backend,
                "capabilities": b.capabilities().describe(),
                "disk_bytes": s.disk_bytes,
                "counters": counters,
            }))?;
            writeln!(stdout, "{text}").context("write to stdout")?;
        }
        KvCommand::Import => import(
            &mut |bk, k, v, index| {
                let opts = basalt_backend::WriteOptions {
                    index,
                    ..basalt_backend::WriteOptions::default()
                };
                Ok(b.put(bk, k, v, b"", &opts)?)
            },
            &mut std::io::stdin().lock(),
            &mut stdout,
        )?,
        KvCommand::Repair => bail!("repair must run without an open store"),
        KvCommand::Buckets => {
            for bucket in b.list_buckets()? {
                stdout
                    .write_all(&bucket)
                    .and_then(|()| stdout.write_all(b"\n"))
                    .context("write to stdout")?;
            }
            stdout.flush().context("write to stdout")?;
        }
        KvCommand::Index(args) => kv_features::index_backend(b, args, &mut stdout)?,
        KvCommand::Fold(args) => kv_features::fold_backend(b, args, &mut stdout)?,
        KvCommand::Compact | KvCommand::Garbage | KvCommand::Backup(_) => {
            bail!(
                "journal compaction and hot backup belong to the leveled engine; --backend {} has neither",
                b.name()
            )
        }
    }
    Ok(Outcome::Done)
}

/// The engine's write options in the backend trait's terms.
fn backend_write_options(o: PutOptions) -> basalt_backend::WriteOptions {
    basalt_backend::WriteOptions {
        sync: o.sync == Some(basalt_engine::SyncStrategy::Sync),
        index: o.index,
        expires_at: o.expires_at,
        last_modified_us: o.last_modified_us,
    }
}
