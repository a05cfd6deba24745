//! The shared logic of the ordered key/value backends (`memory`, `rocksdb`,
//! `rocksdb-blob`): one ordered byte keyspace holding objects and index
//! entries, with the leveled engine's key encoding (`basalt_engine::key`).
//!
//! ```text
//! object key  := key::object(bucket, key)                    ('o' ...)
//! object val  := version:u8 (=1) | version:u64 | last_modified_us:u64 | expires_at:u64
//!                | value_hash:u64 | meta_len:u32 | metadata | value
//! index key   := key::encode(Index, [bucket, field, stored_term, key])  ('i' ...)
//! index val   := expires_at:u64
//! ```
//!
//! All integers little-endian. Index removals delete the index key (no
//! tombstones: these stores delete in place). `stored_term` is the engine's
//! (`index::encode_term`: bytes for `_bin`, sign-flipped big-endian for
//! `_int`), so index queries are range scans in (term, key) order, as in
//! the engine. Continuations are `base64(version:u8 (=1) | crc32c:u32 |
//! query_tag:u32 | last scanned key)`, `query_tag` = low 32 bits of xxh3 of
//! the scanned prefix. A `start_after` cursor becomes the scan's lower bound
//! (`basalt_engine::index::seek_after`), so the store seeks past it.

use crate::{expired, now_secs, now_us};
use basalt_backend::{
    segment_of, value_hash, BackendError, BackendSnapshot, FoldOptions, FoldOutcome, Head, HeadFn,
    IndexChange, IndexOp, IndexPage, IndexQuery, IndexResult, KeyFn, KeyRange, Object, ObjectFn,
    Reads, Result, WriteOptions,
};
use basalt_engine::index::{decode_term, encode_term, field_kind, seek_after, FieldKind};
use basalt_engine::key::{self, KeyKind};
use base64::Engine as _;
use std::ops::ControlFlow;

/// Scan callback: (encoded key, stored value) → continue or stop.
pub(crate) type ScanFn<'a> = dyn FnMut(&[u8], &[u8]) -> Result<ControlFlow<()>> + 'a;

/// What an ordered store offers to the shared logic.
pub(crate) trait Kv: Send + Sync {
    /// The stored value of an encoded key.
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Visits `[lo, hi)` in key order.
    fn scan(&self, lo: &[u8], hi: Option<&[u8]>, f: &mut ScanFn<'_>) -> Result<()>;
    /// Where corruption is reported.
    fn path(&self) -> std::path::PathBuf;
}

/// One change of a write batch.
#[derive(Debug)]
pub(crate) enum Op {
    /// Set key to value.
    Put(Vec<u8>, Vec<u8>),
    /// Remove key.
    Delete(Vec<u8>),
}

const RECORD_VERSION: u8 = 1;
const HEADER_BYTES: usize = 1 + 8 * 4 + 4;

/// Encodes an object value.
pub(crate) fn encode_object(head: &Head, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + head.metadata.len() + value.len());
    out.push(RECORD_VERSION);
    out.extend_from_slice(&head.version.to_le_bytes());
    out.extend_from_slice(&head.last_modified_us.to_le_bytes());
    out.extend_from_slice(&head.expires_at.to_le_bytes());
    out.extend_from_slice(&head.value_hash.to_le_bytes());
    out.extend_from_slice(&(head.metadata.len() as u32).to_le_bytes());
    out.extend_from_slice(&head.metadata);
    out.extend_from_slice(value);
    out
}

fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Decodes an object value into its head and the value bytes.
pub(crate) fn decode_object(raw: &[u8]) -> Option<(Head, &[u8])> {
    if *raw.first()? != RECORD_VERSION {
        return None;
    }
    let meta_len = u32::from_le_bytes(raw.get(33..37)?.try_into().ok()?) as usize;
    let metadata = raw.get(HEADER_BYTES..HEADER_BYTES.checked_add(meta_len)?)?;
    let value = raw.get(HEADER_BYTES + meta_len..)?;
    Some((
        Head {
            version: le64(raw, 1)?,
            last_modified_us: le64(raw, 9)?,
            expires_at: le64(raw, 17)?,
            value_hash: le64(raw, 25)?,
            size: value.len() as u64,
            metadata: metadata.to_vec(),
        },
        value,
    ))
}

/// The expiry stored in an index value.
fn index_expiry(raw: &[u8]) -> Option<u64> {
    le64(raw, 0)
}

fn corrupt(kv: &dyn Kv, k: &[u8], what: &str) -> BackendError {
    BackendError::corrupt(
        kv.path(),
        format!("{what} under key {}", key::display_bytes(k)),
    )
}

/// Checks index changes and turns them into batch operations.
pub(crate) fn index_ops(bucket: &[u8], k: &[u8], changes: &[IndexChange]) -> Result<Vec<Op>> {
    if changes.len() > basalt_engine::limits::INDEX_CHANGES_MAX_DEFAULT {
        return Err(BackendError::InvalidInput(format!(
            "{} index changes; the limit is {}",
            changes.len(),
            basalt_engine::limits::INDEX_CHANGES_MAX_DEFAULT
        )));
    }
    let mut ops = Vec::with_capacity(changes.len());
    for c in changes {
        let kind = checked_kind(&c.field)?;
        if c.term.len() > basalt_engine::limits::INDEX_TERM_BYTES_MAX_DEFAULT {
            return Err(BackendError::InvalidInput(format!(
                "index term of {} bytes in field '{}'; the limit is {} bytes",
                c.term.len(),
                key::display_bytes(&c.field),
                basalt_engine::limits::INDEX_TERM_BYTES_MAX_DEFAULT
            )));
        }
        let stored = encode_term(kind, &c.field, &c.term).map_err(crate::from_engine)?;
        let ik = key::encode(KeyKind::Index, &[bucket, &c.field, &stored, k]);
        ops.push(match c.op {
            IndexOp::Add => Op::Put(ik, Vec::new()),
            IndexOp::Remove => Op::Delete(ik),
        });
    }
    Ok(ops)
}

fn checked_kind(field: &[u8]) -> Result<FieldKind> {
    if field.len() > basalt_engine::limits::INDEX_FIELD_BYTES_MAX {
        return Err(BackendError::InvalidInput(format!(
            "index field '{}' is {} bytes; the limit is {} bytes",
            key::display_bytes(field),
            field.len(),
            basalt_engine::limits::INDEX_FIELD_BYTES_MAX
        )));
    }
    field_kind(field).ok_or_else(|| {
        BackendError::InvalidInput(format!(
            "index field '{}' must end in _bin or _int",
            key::display_bytes(field)
        ))
    })
}

/// The batch of a put: the object and its index changes (index values get
/// the object's expiry).
pub(crate) fn put_ops(
    bucket: &[u8],
    k: &[u8],
    value: &[u8],
    metadata: &[u8],
    opts: &WriteOptions,
    version: u64,
) -> Result<Vec<Op>> {
    crate::check_write(bucket, k, value, metadata)?;
    let mut ops = index_ops(bucket, k, &opts.index)?;
    for op in &mut ops {
        if let Op::Put(_, v) = op {
            *v = opts.expires_at.to_le_bytes().to_vec();
        }
    }
    let head = Head {
        version,
        size: value.len() as u64,
        value_hash: value_hash(value),
        last_modified_us: opts.last_modified_us.unwrap_or_else(now_us),
        expires_at: opts.expires_at,
        metadata: metadata.to_vec(),
    };
    ops.push(Op::Put(key::object(bucket, k), encode_object(&head, value)));
    Ok(ops)
}

/// The batch of a delete: the object and its index changes.
pub(crate) fn delete_ops(bucket: &[u8], k: &[u8], opts: &WriteOptions) -> Result<Vec<Op>> {
    crate::check_name("bucket", bucket)?;
    crate::check_name("key", k)?;
    let mut ops = index_ops(bucket, k, &opts.index)?;
    for op in &mut ops {
        if let Op::Put(_, v) = op {
            *v = opts.expires_at.to_le_bytes().to_vec();
        }
    }
    ops.push(Op::Delete(key::object(bucket, k)));
    Ok(ops)
}

fn live_object<'a>(
    kv: &dyn Kv,
    k: &[u8],
    raw: &'a [u8],
    now: u64,
) -> Result<Option<(Head, &'a [u8])>> {
    let (head, value) = decode_object(raw).ok_or_else(|| corrupt(kv, k, "undecodable object"))?;
    if expired(head.expires_at, now) {
        return Ok(None);
    }
    if value_hash(value) != head.value_hash {
        return Err(corrupt(kv, k, "value does not match its hash"));
    }
    Ok(Some((head, value)))
}

/// Callback of `View::walk`: (bucket, key, head, value).
type WalkFn<'a> = dyn FnMut(&[u8], &[u8], Head, &[u8]) -> ControlFlow<()> + 'a;

/// Read side shared by the backends and their snapshots.
pub(crate) struct View<'a>(pub(crate) &'a dyn Kv);

fn object_bounds(
    bucket: Option<&[u8]>,
    range: Option<&KeyRange>,
) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
    match (bucket, range) {
        (Some(b), Some(r)) => {
            let mut end = key::object(b, &r.end);
            end.push(0);
            Ok((key::object(b, &r.start), Some(end)))
        }
        (Some(b), None) => {
            let p = key::prefix(KeyKind::Object, &[b]);
            let e = key::prefix_end(&p);
            Ok((p, e))
        }
        (None, None) => {
            let p = key::prefix(KeyKind::Object, &[]);
            let e = key::prefix_end(&p);
            Ok((p, e))
        }
        (None, Some(_)) => Err(BackendError::InvalidInput(
            "a key range needs a bucket".into(),
        )),
    }
}

impl View<'_> {
    /// Walks live objects of the bounds: (bucket, key, head, value).
    fn walk(
        &self,
        bucket: Option<&[u8]>,
        range: Option<&KeyRange>,
        check_hash: bool,
        f: &mut WalkFn<'_>,
    ) -> Result<bool> {
        let (lo, hi) = object_bounds(bucket, range)?;
        let now = now_secs();
        let kv = self.0;
        let mut complete = true;
        kv.scan(&lo, hi.as_deref(), &mut |k, raw| {
            let (b, key) =
                key::decode_object(k).map_err(|_| corrupt(kv, k, "malformed object key"))?;
            let (head, value) = if check_hash {
                match live_object(kv, k, raw, now)? {
                    Some(x) => x,
                    None => return Ok(ControlFlow::Continue(())),
                }
            } else {
                let (h, v) =
                    decode_object(raw).ok_or_else(|| corrupt(kv, k, "undecodable object"))?;
                if expired(h.expires_at, now) {
                    return Ok(ControlFlow::Continue(()));
                }
                (h, v)
            };
            let flow = f(&b, &key, head, value);
            if flow.is_break() {
                complete = false;
            }
            Ok(flow)
        })?;
        Ok(complete)
    }

    pub(crate) fn get(&self, bucket: &[u8], k: &[u8]) -> Result<Option<Object>> {
        let ek = key::object(bucket, k);
        let Some(raw) = self.0.get_raw(&ek)? else {
            return Ok(None);
        };
        Ok(
            live_object(self.0, &ek, &raw, now_secs())?.map(|(head, value)| Object {
                value: value.to_vec(),
                head,
            }),
        )
    }

    pub(crate) fn head(&self, bucket: &[u8], k: &[u8]) -> Result<Option<Head>> {
        let ek = key::object(bucket, k);
        let Some(raw) = self.0.get_raw(&ek)? else {
            return Ok(None);
        };
        let (head, _) =
            decode_object(&raw).ok_or_else(|| corrupt(self.0, &ek, "undecodable object"))?;
        Ok((!expired(head.expires_at, now_secs())).then_some(head))
    }

    pub(crate) fn fold_keys(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut KeyFn<'_>,
    ) -> Result<FoldOutcome> {
        let mut passed = 0;
        let complete = self.walk(Some(bucket), range, false, &mut |_, k, _, _| {
            passed += 1;
            f(k)
        })?;
        Ok(FoldOutcome {
            passed,
            complete,
            missing_in_journal: 0,
        })
    }

    pub(crate) fn fold_heads(
        &self,
        bucket: Option<&[u8]>,
        range: Option<&KeyRange>,
        opts: &FoldOptions,
        f: &mut HeadFn<'_>,
    ) -> Result<FoldOutcome> {
        let mut out = FoldOutcome::default();
        if opts.max_objects == Some(0) {
            return Ok(out);
        }
        let mut limited = false;
        let complete = self.walk(bucket, range, false, &mut |b, k, head, _| {
            if let Some((lo, hi)) = opts.modified_range {
                if head.last_modified_us < lo || head.last_modified_us > hi {
                    return ControlFlow::Continue(());
                }
            }
            if let Some((size, ids)) = &opts.segments {
                if !ids.contains(&segment_of(b, k, *size)) {
                    return ControlFlow::Continue(());
                }
            }
            out.passed += 1;
            let flow = f(b, k, &head);
            if opts.max_objects.is_some_and(|m| out.passed >= m) {
                limited = true;
                return ControlFlow::Break(());
            }
            flow
        })?;
        out.complete = complete && !limited;
        Ok(out)
    }

    pub(crate) fn fold_objects(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut ObjectFn<'_>,
    ) -> Result<FoldOutcome> {
        let mut passed = 0;
        let complete = self.walk(Some(bucket), range, true, &mut |b, k, head, value| {
            passed += 1;
            f(
                b,
                k,
                Object {
                    value: value.to_vec(),
                    head,
                },
            )
        })?;
        Ok(FoldOutcome {
            passed,
            complete,
            missing_in_journal: 0,
        })
    }

    pub(crate) fn list_buckets(&self) -> Result<Vec<Vec<u8>>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        let (mut lo, hi) = object_bounds(None, None)?;
        let now = now_secs();
        let kv = self.0;
        loop {
            let mut found: Option<Vec<u8>> = None;
            kv.scan(&lo, hi.as_deref(), &mut |k, raw| {
                let (head, _) =
                    decode_object(raw).ok_or_else(|| corrupt(kv, k, "undecodable object"))?;
                if expired(head.expires_at, now) {
                    return Ok(ControlFlow::Continue(()));
                }
                let (b, _) =
                    key::decode_object(k).map_err(|_| corrupt(kv, k, "malformed object key"))?;
                found = Some(b);
                Ok(ControlFlow::Break(()))
            })?;
            let Some(b) = found else { break };
            match key::prefix_end(&key::prefix(KeyKind::Object, &[&b])) {
                Some(next) => lo = next,
                None => {
                    out.push(b);
                    break;
                }
            }
            out.push(b);
        }
        Ok(out)
    }

    pub(crate) fn index_query(&self, q: &IndexQuery) -> Result<IndexPage> {
        index_query(self.0, q)
    }
}

impl BackendSnapshot for View<'_> {}

impl Reads for View<'_> {
    fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        View::get(self, bucket, key)
    }
    fn head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Head>> {
        View::head(self, bucket, key)
    }
    fn fold_keys(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut KeyFn<'_>,
    ) -> Result<FoldOutcome> {
        View::fold_keys(self, bucket, range, f)
    }
    fn fold_heads(
        &self,
        bucket: Option<&[u8]>,
        range: Option<&KeyRange>,
        opts: &FoldOptions,
        f: &mut HeadFn<'_>,
    ) -> Result<FoldOutcome> {
        View::fold_heads(self, bucket, range, opts, f)
    }
    fn fold_objects(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut ObjectFn<'_>,
    ) -> Result<FoldOutcome> {
        View::fold_objects(self, bucket, range, f)
    }
    fn list_buckets(&self) -> Result<Vec<Vec<u8>>> {
        View::list_buckets(self)
    }
}

// ------------------------------------------------------------ index queries

#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Index(FieldKind),
    Bucket,
    Key,
}

const CONTINUATION_VERSION: u8 = 1;

fn encode_continuation(tag: u32, last: &[u8]) -> String {
    let mut body = tag.to_le_bytes().to_vec();
    body.extend_from_slice(last);
    let mut raw = vec![CONTINUATION_VERSION];
    raw.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    raw.extend_from_slice(&body);
    base64::engine::general_purpose::STANDARD.encode(raw)
}

fn decode_continuation(c: &str, tag: u32) -> Result<Vec<u8>> {
    let bad = |why: &str| BackendError::InvalidInput(format!("continuation is invalid: {why}"));
    let raw = base64::engine::general_purpose::STANDARD
        .decode(c.as_bytes())
        .map_err(|_| bad("not base64"))?;
    if raw.first() != Some(&CONTINUATION_VERSION) {
        return Err(bad("unknown version"));
    }
    let sum = raw
        .get(1..5)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| bad("too short"))?;
    let body = raw.get(5..).unwrap_or_default();
    if crc32c::crc32c(body) != sum {
        return Err(bad("checksum mismatch"));
    }
    let t = body
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| bad("too short"))?;
    if t != tag {
        return Err(bad("it belongs to another bucket or field"));
    }
    Ok(body.get(4..).unwrap_or_default().to_vec())
}

/// Runs an index query over the ordered keyspace (the engine's semantics).
pub(crate) fn index_query(kv: &dyn Kv, q: &IndexQuery) -> Result<IndexPage> {
    q.check_resume()?;
    crate::check_name("bucket", &q.bucket)?;
    let target = match q.field.as_slice() {
        b"$bucket" => Target::Bucket,
        b"$key" => Target::Key,
        f => Target::Index(checked_kind(f)?),
    };
    let limit = match q.max_results {
        Some(0) => {
            return Err(BackendError::InvalidInput(
                "max_results must be at least 1".into(),
            ))
        }
        Some(n) => Some(n as usize),
        None => None,
    };
    let regex = match &q.term_regex {
        None => None,
        Some(_) if target == Target::Index(FieldKind::Int) => {
            return Err(BackendError::InvalidInput(format!(
                "term_regex applies to _bin fields only, not to integer field '{}'",
                key::display_bytes(&q.field)
            )))
        }
        Some(re) if re.len() > basalt_engine::limits::INDEX_REGEX_BYTES_MAX => {
            return Err(BackendError::InvalidInput("term_regex is too long".into()))
        }
        Some(re) => Some(
            regex::bytes::RegexBuilder::new(re)
                .size_limit(basalt_engine::limits::INDEX_REGEX_COMPILED_BYTES_MAX)
                .build()
                .map_err(|e| BackendError::InvalidInput(format!("term_regex is invalid: {e}")))?,
        ),
    };
    let b = q.bucket.as_slice();
    let end = q.end.as_deref().unwrap_or(&q.start);
    let (prefix, mut lo, hi) = match target {
        Target::Bucket => {
            let p = key::prefix(KeyKind::Object, &[b]);
            let hi = key::prefix_end(&p);
            (p.clone(), p, hi)
        }
        Target::Key => (
            key::prefix(KeyKind::Object, &[b]),
            key::prefix(KeyKind::Object, &[b, &q.start]),
            key::prefix_end(&key::prefix(KeyKind::Object, &[b, end])),
        ),
        Target::Index(kind) => {
            let f = q.field.as_slice();
            let s = encode_term(kind, f, &q.start).map_err(crate::from_engine)?;
            let e = encode_term(kind, f, end).map_err(crate::from_engine)?;
            (
                key::prefix(KeyKind::Index, &[b, f]),
                key::prefix(KeyKind::Index, &[b, f, &s]),
                key::prefix_end(&key::prefix(KeyKind::Index, &[b, f, &e])),
            )
        }
    };
    let tag = key::hash(&prefix) as u32;
    if let Some(c) = &q.continuation {
        let mut after = decode_continuation(c, tag)?;
        if !after.starts_with(&prefix) {
            return Err(BackendError::InvalidInput(
                "continuation is invalid: outside the query".into(),
            ));
        }
        after.push(0);
        lo = lo.max(after);
    }
    if let Some(c) = &q.start_after {
        // Seek: the scan starts at the smallest key after the cursor.
        let eq_term = q.end.is_none().then_some(q.start.as_slice());
        let after =
            seek_after(b, &q.field, eq_term, &c.term, &c.key).map_err(crate::from_engine)?;
        lo = lo.max(after);
    }
    let return_terms =
        q.return_terms && q.end.is_some() && matches!(target, Target::Index(_) | Target::Key);
    let mut page = IndexPage::default();
    if hi.as_deref().is_some_and(|h| h <= lo.as_slice()) {
        return Ok(page);
    }
    let now = now_secs();
    let mut last: Option<Vec<u8>> = None;
    kv.scan(&lo, hi.as_deref(), &mut |k, raw| {
        let rest = k
            .strip_prefix(prefix.as_slice())
            .ok_or_else(|| corrupt(kv, k, "key outside the scanned prefix"))?;
        let exp = match target {
            Target::Index(_) => index_expiry(raw),
            _ => decode_object(raw).map(|(h, _)| h.expires_at),
        }
        .ok_or_else(|| corrupt(kv, k, "undecodable entry"))?;
        if expired(exp, now) {
            return Ok(ControlFlow::Continue(()));
        }
        let (term, rest) = match target {
            Target::Index(_) => key::split_component(rest).map_err(|e| corrupt(kv, k, &e.0))?,
            _ => (Vec::new(), rest),
        };
        let (objkey, rest) = key::split_component(rest).map_err(|e| corrupt(kv, k, &e.0))?;
        if !rest.is_empty() {
            return Err(corrupt(kv, k, "trailing bytes"));
        }
        if let Some(re) = &regex {
            let subject = if matches!(target, Target::Index(_)) {
                &term
            } else {
                &objkey
            };
            if !re.is_match(subject) {
                return Ok(ControlFlow::Continue(()));
            }
        }
        let term = if return_terms {
            Some(match target {
                Target::Index(kind) => {
                    decode_term(kind, &term).map_err(|e| corrupt(kv, k, &e.0))?
                }
                _ => objkey.clone(),
            })
        } else {
            None
        };
        page.results.push(IndexResult { term, key: objkey });
        if limit.is_some_and(|n| page.results.len() >= n) {
            last = Some(k.to_vec());
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    })?;
    page.continuation = last.map(|l| encode_continuation(tag, &l));
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_backend::IndexCursor;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A `Kv` over a `BTreeMap` that counts the entries scans visit.
    #[derive(Default)]
    struct Counting {
        map: BTreeMap<Vec<u8>, Vec<u8>>,
        visited: AtomicUsize,
    }

    impl Kv for Counting {
        fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            Ok(self.map.get(key).cloned())
        }
        fn scan(&self, lo: &[u8], hi: Option<&[u8]>, f: &mut ScanFn<'_>) -> Result<()> {
            use std::ops::Bound;
            let upper = hi.map_or(Bound::Unbounded, Bound::Excluded);
            for (k, v) in self.map.range::<[u8], _>((Bound::Included(lo), upper)) {
                self.visited.fetch_add(1, Ordering::Relaxed);
                if f(k, v)?.is_break() {
                    break;
                }
            }
            Ok(())
        }
        fn path(&self) -> std::path::PathBuf {
            "(test)".into()
        }
    }

    #[test]
    fn a_cursor_seeks_instead_of_scanning_from_the_start() {
        let mut kv = Counting::default();
        for i in 0..5000u32 {
            let key = format!("k{i:05}");
            let opts = WriteOptions {
                index: vec![
                    IndexChange::add("t_bin", format!("t{}", i % 10)),
                    IndexChange::add("n_int", (i as i64 - 2500).to_string()),
                ],
                ..WriteOptions::default()
            };
            for op in put_ops(b"b", key.as_bytes(), b"v", b"", &opts, 1).expect("put ops") {
                if let Op::Put(k, v) = op {
                    kv.map.insert(k, v);
                }
            }
        }
        let cases: [(IndexQuery, IndexCursor); 4] = [
            (
                IndexQuery::range(b"b", b"t_bin", b"t0", b"t9"),
                IndexCursor::new("t8", "k04000"),
            ),
            (
                IndexQuery::range(b"b", b"n_int", b"-3000", b"3000"),
                IndexCursor::new("2000", "k04500"),
            ),
            (
                IndexQuery::eq(b"b", b"t_bin", b"t7"),
                IndexCursor::new("", "k04000"),
            ),
            (
                IndexQuery::range(b"b", b"$key", b"k00000", b"k09999"),
                IndexCursor::new("", "k04000"),
            ),
        ];
        for (mut q, cursor) in cases {
            q.return_terms = true;
            q.max_results = Some(5);
            q.start_after = Some(cursor);
            kv.visited.store(0, Ordering::Relaxed);
            let page = index_query(&kv, &q).expect("query");
            assert_eq!(page.results.len(), 5, "{q:?}");
            let visited = kv.visited.load(Ordering::Relaxed);
            assert_eq!(
                visited, 5,
                "{q:?}: visited {visited} entries for a page of 5"
            );
        }
    }
}
