//! `basalt kv` commands over the engine's secondary indexes, folds, journal
//! compaction and hot backup, and the index/TTL options of `put`, `delete`
//! and `import`.
//!
//! Kept apart from `kv.rs` (which dispatches here) so the two evolve
//! independently. Output conventions follow `kv keys`: buckets, keys and
//! terms are written as raw bytes, one result a line.

use crate::kv_common::{check_name, head_json, lossy};
use anyhow::{bail, Context, Result};
use basalt_engine::{
    BackupReport, CompactionReport, FoldOptions, GarbageEstimate, IndexChange, IndexQuery,
    PutOptions, Store,
};
use clap::{Args, ValueEnum};
use std::ffi::OsString;
use std::io::Write;
use std::ops::ControlFlow;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Most journal compaction runs one `kv compact` performs.
pub const COMPACT_RUNS_MAX: u32 = 100;

// ------------------------------------------------------------ put / delete

/// Index and TTL options of `put` and `delete`.
#[derive(Debug, Args)]
pub struct WriteOptArgs {
    /// Add the index entry FIELD=TERM for this key (repeatable). FIELD ends
    /// in `_bin` (byte-string terms) or `_int` (integer terms of any size).
    #[arg(long = "index", value_name = "FIELD=TERM")]
    add: Vec<OsString>,
    /// Remove the index entry FIELD=TERM of this key (repeatable). As in
    /// Riak, the caller supplies the diffs: a delete does not remove the
    /// key's index entries unless told to.
    #[arg(long = "remove-index", value_name = "FIELD=TERM")]
    remove: Vec<OsString>,
}

/// Splits `FIELD=TERM` at the first `=` (field names hold no `=`).
fn split_pair(pair: &[u8]) -> Option<(&[u8], &[u8])> {
    let eq = pair.iter().position(|&b| b == b'=')?;
    let (field, term) = (pair.get(..eq)?, pair.get(eq + 1..)?);
    (!field.is_empty()).then_some((field, term))
}

impl WriteOptArgs {
    /// The index changes of the write: removals first, then additions (a
    /// later change of the same entry wins, so `--index` beats
    /// `--remove-index` of the same FIELD=TERM).
    fn changes(&self) -> Result<Vec<IndexChange>> {
        let mut out = Vec::with_capacity(self.add.len() + self.remove.len());
        for (flag, pairs) in [("--remove-index", &self.remove), ("--index", &self.add)] {
            for pair in pairs {
                let bytes = pair.as_bytes();
                let Some((field, term)) = split_pair(bytes) else {
                    bail!("invalid input: {flag} '{}' is not FIELD=TERM", lossy(bytes));
                };
                out.push(if flag == "--index" {
                    IndexChange::add(field, term)
                } else {
                    IndexChange::remove(field, term)
                });
            }
        }
        Ok(out)
    }
}

/// The engine options of a `put` (with `ttl`) or `delete` (without).
///
/// `--ttl SECS` sets `expires_at = now + SECS` (seconds since the Unix
/// epoch). An object is dead once `expires_at <= now`, so `--ttl 0` stores
/// an object that is already expired: it reads as not found.
pub fn write_options(args: &WriteOptArgs, ttl: Option<u64>) -> Result<PutOptions> {
    let expires_at = match ttl {
        None => 0,
        Some(secs) => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .context("the system clock is before 1970")?
                .as_secs();
            now.saturating_add(secs)
        }
    };
    Ok(PutOptions {
        expires_at,
        index: args.changes()?,
        ..PutOptions::default()
    })
}

/// Parses the 4th column of an import line: `field=term,field=term` index
/// additions (empty: none). `line_no` names the line in errors.
pub fn import_index_column(column: &[u8], line_no: u64) -> Result<Vec<IndexChange>> {
    if column.is_empty() {
        return Ok(Vec::new());
    }
    column
        .split(|&b| b == b',')
        .map(|pair| match split_pair(pair) {
            Some((field, term)) => Ok(IndexChange::add(field, term)),
            None => bail!(
                "stdin line {line_no}: index change '{}' in the 4th column is not field=term (expected field=term,field=term)",
                lossy(pair)
            ),
        })
        .collect()
}

// ------------------------------------------------------------------ index

/// `kv index`: a secondary-index query.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Bucket name.
    bucket: OsString,
    /// Index field: `..._bin`, `..._int`, `$bucket` (every key of the
    /// bucket; START and END are ignored) or `$key` (keys in START..=END).
    field: OsString,
    /// First term (inclusive), or the term of an equality query. Optional
    /// for `$bucket` only. Negative numbers are terms; put `--` before a
    /// term that starts with `-` otherwise.
    #[arg(allow_negative_numbers = true)]
    start: Option<OsString>,
    /// Last term (inclusive); without it the query is an equality on START.
    #[arg(allow_negative_numbers = true)]
    end: Option<OsString>,
    /// Print `term<TAB>key` per result. As in Riak, terms are returned for
    /// range queries (END given) on `_bin`, `_int` and `$key` only;
    /// otherwise only the key is printed.
    #[arg(long)]
    return_terms: bool,
    /// Keep only results whose term (the key for `$key` / `$bucket`)
    /// matches this regular expression; not for `_int` fields.
    #[arg(long, value_name = "R")]
    regex: Option<String>,
    /// Page size: when the page is full, its last line is
    /// `continuation<TAB>C`; pass C to --continuation for the next page.
    #[arg(long, value_name = "N")]
    max_results: Option<u32>,
    /// Resume after the page that printed this continuation.
    #[arg(long, value_name = "C")]
    continuation: Option<String>,
    /// Print only the number of matching results (after --continuation if
    /// given; --max-results and --return-terms are ignored).
    #[arg(long)]
    count: bool,
}

/// Runs `kv index`.
pub fn index(store: &Store, args: IndexArgs, out: &mut dyn Write) -> Result<()> {
    let field = args.field.into_vec();
    let start = match args.start {
        Some(s) => s.into_vec(),
        None if field == basalt_engine::index::BUCKET_FIELD => Vec::new(),
        None => bail!(
            "invalid input: an index query on '{}' needs a START term",
            lossy(&field)
        ),
    };
    let query = IndexQuery {
        bucket: args.bucket.into_vec(),
        field,
        start,
        end: args.end.map(OsString::into_vec),
        return_terms: args.return_terms,
        term_regex: args.regex,
        max_results: args.max_results,
        continuation: args.continuation,
        start_after: None,
    };
    if args.count {
        let n = store.index_count(&query)?;
        writeln!(out, "{n}").context("write to stdout")?;
        return Ok(());
    }
    let page = store.index_query(&query)?;
    write_page(
        page.results
            .iter()
            .map(|r| (r.term.as_deref(), r.key.as_slice())),
        page.continuation.as_deref(),
        out,
    )
}

/// Prints an index page: `term<TAB>key` (or `key`) lines, then
/// `continuation<TAB>C` when the page is full.
fn write_page<'a>(
    results: impl Iterator<Item = (Option<&'a [u8]>, &'a [u8])>,
    continuation: Option<&str>,
    out: &mut dyn Write,
) -> Result<()> {
    let mut buf = Vec::new();
    for (term, key) in results {
        if let Some(term) = term {
            buf.extend_from_slice(term);
            buf.push(b'\t');
        }
        buf.extend_from_slice(key);
        buf.push(b'\n');
    }
    if let Some(c) = continuation {
        buf.extend_from_slice(b"continuation\t");
        buf.extend_from_slice(c.as_bytes());
        buf.push(b'\n');
    }
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .context("write to stdout")
}

// ------------------------------------------------------------------- fold

/// What `kv fold` prints per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FoldKind {
    /// One key per line.
    Keys,
    /// One JSON line per key, shaped like `kv head`.
    Heads,
    /// `key<TAB>value`; the value as text if it is UTF-8 without TAB,
    /// CR or newline and does not start with `0x`, else `0x` + hex.
    Objects,
}

/// `kv fold`: walk a bucket on a snapshot.
#[derive(Debug, Args)]
pub struct FoldArgs {
    /// What to print per key.
    kind: FoldKind,
    /// Bucket name.
    bucket: OsString,
}

/// A value as one TAB/newline-free field: text when unambiguous, else hex.
pub fn value_field(value: &[u8]) -> String {
    match std::str::from_utf8(value) {
        Ok(s) if !s.contains(['\t', '\n', '\r']) && !s.starts_with("0x") => s.to_owned(),
        _ => {
            let mut h = String::with_capacity(2 + 2 * value.len());
            h.push_str("0x");
            for b in value {
                h.push_str(&format!("{b:02x}"));
            }
            h
        }
    }
}

/// Runs `kv fold`; prints the rate to stderr afterwards.
pub fn fold(store: &Store, args: FoldArgs, out: &mut dyn Write) -> Result<()> {
    let bucket = args.bucket.into_vec();
    check_name("bucket", &bucket)?;
    let started = Instant::now();
    let mut n = 0u64;
    let mut failed: Option<std::io::Error> = None;
    let mut line = Vec::new();
    // Writes one line; false (stop the fold) once stdout fails.
    let mut emit = |line: &[u8]| -> bool {
        match out.write_all(line) {
            Ok(()) => {
                n += 1;
                true
            }
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    };
    let flow = |go: bool| {
        if go {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    };
    match args.kind {
        FoldKind::Keys => store.fold_keys(&bucket, &mut |k| {
            line.clear();
            line.extend_from_slice(k);
            line.push(b'\n');
            emit(&line)
        })?,
        FoldKind::Heads => {
            store.fold_heads(Some(&bucket), None, &FoldOptions::default(), |b, k, h| {
                line.clear();
                line.extend_from_slice(head_json(b, k, h).to_string().as_bytes());
                line.push(b'\n');
                flow(emit(&line))
            })?;
        }
        FoldKind::Objects => {
            store.fold_objects(&bucket, None, |_, k, obj| {
                line.clear();
                line.extend_from_slice(k);
                line.push(b'\t');
                line.extend_from_slice(value_field(&obj.value).as_bytes());
                line.push(b'\n');
                flow(emit(&line))
            })?;
        }
    }
    if let Some(e) = failed {
        return Err(e).context("write to stdout");
    }
    out.flush().context("write to stdout")?;
    eprintln!("{}", rate_line(n, started.elapsed()));
    Ok(())
}

/// `folded N keys in X ms (Y keys/s)`.
pub fn rate_line(n: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 { n as f64 / secs } else { 0.0 };
    format!(
        "folded {n} keys in {:.1} ms ({rate:.0} keys/s)",
        secs * 1000.0
    )
}

// ---------------------------------------------------------------- buckets

/// Runs `kv buckets`: every bucket holding a live object, one a line.
pub fn buckets(store: &Store, out: &mut dyn Write) -> Result<()> {
    let mut buf = Vec::new();
    for b in store.list_buckets()? {
        buf.extend_from_slice(&b);
        buf.push(b'\n');
    }
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .context("write to stdout")
}

// ---------------------------------------------------------------- compact

/// The sum of a `kv compact`'s runs.
#[derive(Debug, Default)]
struct CompactTotals {
    runs: u32,
    files_in: usize,
    files_out: usize,
    bytes_in: u64,
    bytes_out: u64,
    records_kept: u64,
    records_dropped: u64,
    key_deltas: u64,
    tombstoned: u64,
    duration: Duration,
}

impl CompactTotals {
    fn add(&mut self, r: &CompactionReport) {
        self.runs += 1;
        self.files_in += r.files_in.len();
        self.files_out += r.files_out.len();
        self.bytes_in += r.bytes_in;
        self.bytes_out += r.bytes_out;
        self.records_kept += r.records_kept;
        self.records_dropped += r.records_dropped;
        self.key_deltas += r.key_deltas;
        self.tombstoned += r.tombstoned;
    }

    fn line(&self) -> String {
        format!(
            "compacted runs={} files_in={} files_out={} bytes_before={} bytes_after={} bytes_reclaimed={} records_kept={} records_dropped={} key_deltas={} tombstoned={} ms={}",
            self.runs,
            self.files_in,
            self.files_out,
            self.bytes_in,
            self.bytes_out,
            self.bytes_in.saturating_sub(self.bytes_out),
            self.records_kept,
            self.records_dropped,
            self.key_deltas,
            self.tombstoned,
            self.duration.as_millis()
        )
    }
}

/// Runs `kv compact`: journal compaction runs until none is worth doing
/// (at most [`COMPACT_RUNS_MAX`]), then one summary line. Only closed
/// journal files are compacted, never the active one.
pub fn compact(store: &Store, out: &mut dyn Write) -> Result<()> {
    let started = Instant::now();
    let mut totals = CompactTotals::default();
    loop {
        if totals.runs >= COMPACT_RUNS_MAX {
            eprintln!(
                "basalt: stopped after {COMPACT_RUNS_MAX} compaction runs; run `compact` again for more"
            );
            break;
        }
        let report = store.compact_journal().with_context(|| {
            format!(
                "journal compaction run {} failed after {} completed run(s) (the store is unchanged by the failed run)",
                totals.runs + 1,
                totals.runs
            )
        })?;
        if !report.compacted {
            break;
        }
        totals.add(&report);
    }
    totals.duration = started.elapsed();
    writeln!(out, "{}", totals.line()).context("write to stdout")
}

/// Runs `kv garbage`: every closed journal file scored now, one line each
/// (oldest first), then the total. Opening the store for this command
/// never compacts (see `kv::run`), so the figures are the store's as found.
pub fn garbage(store: &Store, out: &mut dyn Write) -> Result<()> {
    let scores = store.journal_garbage().context("score the journal files")?;
    for f in &scores {
        writeln!(
            out,
            "file={} bytes={} live_pct={:.1}",
            f.file_no, f.bytes, f.live_pct
        )
        .context("write to stdout")?;
    }
    let est = GarbageEstimate::from_scores(&scores);
    writeln!(
        out,
        "garbage files={} bytes={} garbage_bytes={} garbage_pct={:.1}",
        est.files,
        est.closed_bytes,
        est.garbage_bytes,
        est.pct()
    )
    .context("write to stdout")
}

// ----------------------------------------------------------------- backup

/// `kv backup`: hot backup into DEST.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// Destination directory (created if missing; an earlier backup there
    /// is updated incrementally). Open it with `kv --data-dir DEST`.
    dest: PathBuf,
}

/// `path` made absolute through its longest existing ancestor, so a
/// destination that does not exist yet can be compared with the store's.
fn resolve(path: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut cur = path;
    loop {
        if let Ok(c) = cur.canonicalize() {
            return Some(rest.iter().rev().fold(c, |acc, part| acc.join(part)));
        }
        rest.push(cur.file_name()?.to_owned());
        cur = cur.parent()?;
        if cur.as_os_str().is_empty() {
            cur = Path::new(".");
        }
    }
}

/// Runs `kv backup`.
pub fn backup(store: &Store, args: BackupArgs, out: &mut dyn Write) -> Result<()> {
    let dest = args.dest;
    if let (Some(d), Some(s)) = (resolve(&dest), resolve(&store.config().dir)) {
        if d.starts_with(&s) || s.starts_with(&d) {
            bail!(
                "invalid input: backup destination {} overlaps the store directory {}",
                dest.display(),
                store.config().dir.display()
            );
        }
    }
    let r: BackupReport = store
        .backup(&dest)
        .with_context(|| format!("backup to {}", dest.display()))?;
    writeln!(
        out,
        "backed up to {}: files={} linked={} copied={} skipped={} removed={} bytes={} last_sqn={} ms={}",
        dest.display(),
        r.files,
        r.files_linked,
        r.files_copied,
        r.files_skipped,
        r.files_removed,
        r.bytes,
        r.last_sqn,
        r.duration.as_millis()
    )
    .context("write to stdout")
}

// ------------------------------------------- the same through the Backend trait

/// `kv index` on any backend with the `indexes` capability (others answer
/// with their typed "not supported" error). `--count` pages through every
/// result, as the trait has no count-only query.
pub fn index_backend(
    b: &dyn basalt_backend::Backend,
    args: IndexArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let field = args.field.into_vec();
    let start = match args.start {
        Some(s) => s.into_vec(),
        None if field == basalt_engine::index::BUCKET_FIELD => Vec::new(),
        None => bail!(
            "invalid input: an index query on '{}' needs a START term",
            lossy(&field)
        ),
    };
    let mut query = basalt_backend::IndexQuery {
        bucket: args.bucket.into_vec(),
        field,
        start,
        end: args.end.map(OsString::into_vec),
        return_terms: args.return_terms,
        term_regex: args.regex,
        max_results: args.max_results,
        continuation: args.continuation,
        start_after: None,
    };
    if args.count {
        query.max_results = Some(10_000);
        let mut n = 0u64;
        loop {
            let page = b.index_query(&query)?;
            n += page.results.len() as u64;
            match page.continuation {
                Some(c) => query.continuation = Some(c),
                None => break,
            }
        }
        writeln!(out, "{n}").context("write to stdout")?;
        return Ok(());
    }
    let page = b.index_query(&query)?;
    write_page(
        page.results
            .iter()
            .map(|r| (r.term.as_deref(), r.key.as_slice())),
        page.continuation.as_deref(),
        out,
    )
}

/// `kv fold` on any backend. Keys come out sorted even from an unordered
/// backend (bitcask); `heads` needs the `fold_heads` capability.
pub fn fold_backend(
    b: &dyn basalt_backend::Backend,
    args: FoldArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let bucket = args.bucket.into_vec();
    check_name("bucket", &bucket)?;
    let started = Instant::now();
    let mut lines: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    match args.kind {
        FoldKind::Keys => {
            b.fold_keys(&bucket, None, &mut |k| {
                let mut line = k.to_vec();
                line.push(b'\n');
                lines.push((k.to_vec(), line));
                ControlFlow::Continue(())
            })?;
        }
        FoldKind::Heads => {
            b.fold_heads(
                Some(&bucket),
                None,
                &basalt_backend::FoldOptions::default(),
                &mut |bk, k, h| {
                    let mut line = head_json(bk, k, h).to_string().into_bytes();
                    line.push(b'\n');
                    lines.push((k.to_vec(), line));
                    ControlFlow::Continue(())
                },
            )?;
        }
        FoldKind::Objects => {
            b.fold_objects(&bucket, None, &mut |_, k, obj| {
                let mut line = k.to_vec();
                line.push(b'\t');
                line.extend_from_slice(value_field(&obj.value).as_bytes());
                line.push(b'\n');
                lines.push((k.to_vec(), line));
                ControlFlow::Continue(())
            })?;
        }
    }
    if !b.capabilities().ordered_keys {
        lines.sort_unstable_by(|x, y| x.0.cmp(&y.0));
    }
    for (_, line) in &lines {
        out.write_all(line).context("write to stdout")?;
    }
    out.flush().context("write to stdout")?;
    eprintln!("{}", rate_line(lines.len() as u64, started.elapsed()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_split_at_the_first_equals_sign() {
        assert_eq!(split_pair(b"f_bin=a=b"), Some((&b"f_bin"[..], &b"a=b"[..])));
        assert_eq!(split_pair(b"f_bin="), Some((&b"f_bin"[..], &b""[..])));
        assert_eq!(split_pair(b"=t"), None);
        assert_eq!(split_pair(b"no-equals"), None);
    }

    #[test]
    fn import_column_parses_or_names_the_line() {
        let c = import_index_column(b"a_bin=x,n_int=5", 7).unwrap();
        assert_eq!(
            c,
            vec![
                IndexChange::add("a_bin", "x"),
                IndexChange::add("n_int", "5")
            ]
        );
        assert!(import_index_column(b"", 1).unwrap().is_empty());
        let e = import_index_column(b"a_bin=x,oops", 7).unwrap_err();
        assert!(e.to_string().contains("stdin line 7"), "{e}");
        assert!(import_index_column(b"a_bin=x,", 2).is_err());
    }

    #[test]
    fn values_print_as_text_only_when_unambiguous() {
        assert_eq!(value_field(b"hello world"), "hello world");
        assert_eq!(value_field(b""), "");
        assert_eq!(value_field(b"a\tb"), "0x610962");
        assert_eq!(value_field(b"a\nb"), "0x610a62");
        assert_eq!(value_field(b"\xff"), "0xff");
        assert_eq!(value_field(b"0x12"), "0x30783132");
    }

    #[test]
    fn rate_line_never_divides_by_zero() {
        assert_eq!(
            rate_line(0, Duration::ZERO),
            "folded 0 keys in 0.0 ms (0 keys/s)"
        );
        assert_eq!(
            rate_line(10, Duration::from_millis(500)),
            "folded 10 keys in 500.0 ms (20 keys/s)"
        );
    }
}
