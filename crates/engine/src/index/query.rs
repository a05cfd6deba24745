//! Index queries: [`IndexQuery`] planned into a ledger scan, results in
//! pages ([`query`], [`count`]), continuations and cursors
//! ([`seek_after`]). Formats in [`super`].

use super::{checked_field_kind, decode_term, encode_term, invalid, show, FieldKind};
use crate::codec::{crc, DecodeError, Encode, Reader};
use crate::error::{Error, Result};
use crate::key::{self, KeyKind};
use crate::ledger::Ledger;
use crate::limits;
use base64::Engine as _;
use std::path::Path;

/// A secondary-index query (Riak's `RpbIndexReq`), a position in its
/// result order, one result and one page: the backend crate's types.
pub use basalt_backend::{IndexCursor, IndexPage, IndexQuery, IndexResult};

/// The smallest ledger key strictly after the cursor (`term`, `key`) in a
/// query of `field` (`_bin`, `_int`, `$bucket` or `$key`) on `bucket`;
/// `equality_term` is the query's term when it is an equality query (an
/// empty cursor term then stands for it). A scan from this key returns
/// exactly the entries after the cursor. Errors (`InvalidInput`): an `_int`
/// cursor term that is not an integer, an oversized term or key, a field
/// without a valid suffix.
pub fn seek_after(
    bucket: &[u8],
    field: &[u8],
    equality_term: Option<&[u8]>,
    term: &[u8],
    key: &[u8],
) -> Result<Vec<u8>> {
    if key.len() > limits::KEY_SIZE_BYTES_MAX {
        return Err(invalid(format!(
            "start_after: key is {} bytes; the limit is {} bytes",
            key.len(),
            limits::KEY_SIZE_BYTES_MAX
        )));
    }
    if term.len() > limits::INDEX_TERM_BYTES_CEILING {
        return Err(invalid(format!(
            "start_after: term is {} bytes; the limit is {} bytes",
            term.len(),
            limits::INDEX_TERM_BYTES_CEILING
        )));
    }
    let mut after = match field {
        BUCKET_FIELD | KEY_FIELD => key::object(bucket, key),
        f => {
            let kind = checked_field_kind(f)?;
            let term = match equality_term {
                Some(t) if term.is_empty() => t,
                _ => term,
            };
            let stored = encode_term(kind, f, term).map_err(|_| {
                invalid(format!(
                    "start_after: term '{}' of integer field '{}' is not an integer",
                    show(term),
                    show(f)
                ))
            })?;
            key::encode(KeyKind::Index, &[bucket, f, &stored, key])
        }
    };
    // Every encoded key ends in a component terminator, so the smallest key
    // greater than `after` is `after` followed by 0x00.
    after.push(0);
    Ok(after)
}

/// Name of the pseudo-index of every key in a bucket.
pub const BUCKET_FIELD: &[u8] = b"$bucket";
/// Name of the pseudo-index of object keys.
pub const KEY_FIELD: &[u8] = b"$key";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Index(FieldKind),
    Bucket,
    Key,
}

pub(super) struct Plan {
    target: Target,
    /// Every scanned ledger key starts with this.
    pub(super) prefix: Vec<u8>,
    pub(super) lo: Vec<u8>,
    hi: Option<Vec<u8>>,
    regex: Option<regex::bytes::Regex>,
    return_terms: bool,
    limit: Option<usize>,
    tag: u32,
}

const CONTINUATION_VERSION: u8 = 1;

pub(super) fn query_tag(prefix: &[u8]) -> u32 {
    key::hash(prefix) as u32
}

/// Encodes a continuation after (stored term, key) for the query whose
/// scanned prefix has tag `tag`.
pub(crate) fn encode_continuation(tag: u32, term: &[u8], key: &[u8]) -> String {
    let mut body = Vec::with_capacity(16 + term.len() + key.len());
    body.put_u32(tag);
    body.put_bytes32(term);
    body.put_bytes32(key);
    let mut raw = Vec::with_capacity(5 + body.len());
    raw.put_u8(CONTINUATION_VERSION);
    raw.put_u32(crc(&body));
    raw.extend_from_slice(&body);
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// Decodes a continuation into (stored term, key), checking it belongs to
/// the query with tag `tag`. Errors name the problem; never panics.
pub(crate) fn decode_continuation(c: &str, tag: u32) -> Result<(Vec<u8>, Vec<u8>)> {
    let bad = |why: &str| {
        invalid(format!(
            "continuation '{}' is invalid: {why}",
            show(c.as_bytes())
        ))
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(c.as_bytes())
        .map_err(|_| bad("not base64"))?;
    let mut r = Reader::new(&raw);
    let version = r.u8().map_err(|_| bad("too short"))?;
    if version != CONTINUATION_VERSION {
        return Err(bad("unknown version"));
    }
    let sum = r.u32().map_err(|_| bad("too short"))?;
    let body = r.take(r.remaining()).map_err(|_| bad("too short"))?;
    if crc(body) != sum {
        return Err(bad("checksum mismatch"));
    }
    let mut r = Reader::new(body);
    let parsed = (|| -> Result<(u32, Vec<u8>, Vec<u8>), DecodeError> {
        let t = r.u32()?;
        let term = r.bytes32()?.to_vec();
        let key = r.bytes32()?.to_vec();
        Ok((t, term, key))
    })();
    let (t, term, key) = parsed.map_err(|_| bad("truncated"))?;
    if !r.is_empty() {
        return Err(bad("trailing bytes"));
    }
    if t != tag {
        return Err(bad("it belongs to another bucket or field"));
    }
    Ok((term, key))
}

pub(super) fn plan(q: &IndexQuery) -> Result<Plan> {
    if q.bucket.is_empty() {
        return Err(invalid("index query: bucket must not be empty".into()));
    }
    if q.bucket.len() > limits::KEY_SIZE_BYTES_MAX {
        return Err(invalid(format!(
            "index query: bucket is {} bytes; the limit is {} bytes",
            q.bucket.len(),
            limits::KEY_SIZE_BYTES_MAX
        )));
    }
    let target = match q.field.as_slice() {
        BUCKET_FIELD => Target::Bucket,
        KEY_FIELD => Target::Key,
        f => Target::Index(checked_field_kind(f).map_err(|_| {
            invalid(format!(
                "index field '{}' must end in _bin or _int, or be $bucket or $key",
                show(f)
            ))
        })?),
    };
    let limit = match q.max_results {
        Some(0) => return Err(invalid("max_results must be at least 1".into())),
        Some(n) => Some(n as usize),
        None => None,
    };
    let regex = match &q.term_regex {
        None => None,
        Some(_) if target == Target::Index(FieldKind::Int) => {
            return Err(invalid(format!(
                "term_regex applies to _bin fields only, not to integer field '{}'",
                show(&q.field)
            )))
        }
        Some(re) if re.len() > limits::INDEX_REGEX_BYTES_MAX => {
            return Err(invalid(format!(
                "term_regex of {} bytes exceeds the limit of {} bytes",
                re.len(),
                limits::INDEX_REGEX_BYTES_MAX
            )))
        }
        Some(re) => Some(
            regex::bytes::RegexBuilder::new(re)
                .size_limit(limits::INDEX_REGEX_COMPILED_BYTES_MAX)
                .build()
                .map_err(|e| {
                    invalid(format!(
                        "term_regex '{}' is invalid: {e}",
                        show(re.as_bytes())
                    ))
                })?,
        ),
    };
    let b = q.bucket.as_slice();
    let end = q.end.as_deref().unwrap_or(&q.start);
    let (prefix, lo, hi) = match target {
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
            let s = encode_term(kind, f, &q.start)?;
            let e = encode_term(kind, f, end)?;
            (
                key::prefix(KeyKind::Index, &[b, f]),
                key::prefix(KeyKind::Index, &[b, f, &s]),
                key::prefix_end(&key::prefix(KeyKind::Index, &[b, f, &e])),
            )
        }
    };
    let tag = query_tag(&prefix);
    let mut lo = lo;
    if let Some(c) = &q.start_after {
        if q.continuation.is_some() {
            return Err(invalid(
                "index query: give either continuation or start_after, not both".into(),
            ));
        }
        let eq_term = q.end.is_none().then_some(q.start.as_slice());
        lo = lo.max(seek_after(b, &q.field, eq_term, &c.term, &c.key)?);
    }
    if let Some(c) = &q.continuation {
        let (term, objkey) = decode_continuation(c, tag)?;
        let mut after = match target {
            Target::Index(_) => key::encode(KeyKind::Index, &[b, &q.field, &term, &objkey]),
            Target::Bucket | Target::Key => key::object(b, &objkey),
        };
        // The smallest key greater than `after`.
        after.push(0);
        lo = lo.max(after);
    }
    let return_terms =
        q.return_terms && q.end.is_some() && matches!(target, Target::Index(_) | Target::Key);
    debug_assert!(lo.starts_with(&prefix));
    Ok(Plan {
        target,
        prefix,
        lo,
        hi,
        regex,
        return_terms,
        limit,
        tag,
    })
}

/// One matching entry: stored term (empty for `$bucket` / `$key`) and key.
struct Hit {
    term: Vec<u8>,
    key: Vec<u8>,
}

/// Scans the plan's range, calling `f` with each live, matching entry until
/// it returns false.
fn scan(
    ledger: &Ledger,
    ledger_dir: &Path,
    plan: &Plan,
    now_secs: u64,
    f: &mut dyn FnMut(Hit) -> Result<bool>,
) -> Result<()> {
    if plan
        .hi
        .as_deref()
        .is_some_and(|hi| hi <= plan.lo.as_slice())
    {
        return Ok(());
    }
    let bad = |k: &[u8], why: &str| {
        Error::corrupt(
            ledger_dir,
            0,
            format!("ledger key {} in an index scan: {why}", show(k)),
        )
    };
    for item in ledger.range(&plan.lo, plan.hi.as_deref()) {
        let (k, v) = item?;
        if v.is_dead(now_secs) {
            continue;
        }
        let rest = k
            .strip_prefix(plan.prefix.as_slice())
            .ok_or_else(|| bad(&k, "outside the scanned prefix"))?;
        let (term, rest) = match plan.target {
            Target::Index(_) => key::split_component(rest).map_err(|e| bad(&k, &e.0))?,
            Target::Bucket | Target::Key => (Vec::new(), rest),
        };
        let (objkey, rest) = key::split_component(rest).map_err(|e| bad(&k, &e.0))?;
        if !rest.is_empty() {
            return Err(bad(&k, "trailing bytes"));
        }
        if let Some(re) = &plan.regex {
            let subject = match plan.target {
                Target::Index(_) => &term,
                Target::Bucket | Target::Key => &objkey,
            };
            if !re.is_match(subject) {
                continue;
            }
        }
        if !f(Hit { term, key: objkey })? {
            break;
        }
    }
    Ok(())
}

/// Runs `q` over the ledger and returns one page of results.
pub fn query(
    ledger: &Ledger,
    ledger_dir: &Path,
    q: &IndexQuery,
    now_secs: u64,
) -> Result<IndexPage> {
    let plan = plan(q)?;
    let mut page = IndexPage::default();
    let mut last: Option<Hit> = None;
    let limit = plan.limit;
    scan(ledger, ledger_dir, &plan, now_secs, &mut |hit| {
        let term = if plan.return_terms {
            Some(match plan.target {
                Target::Index(kind) => decode_term(kind, &hit.term)
                    .map_err(|e| Error::corrupt(ledger_dir, 0, format!("index term: {e}")))?,
                Target::Bucket | Target::Key => hit.key.clone(),
            })
        } else {
            None
        };
        page.results.push(IndexResult {
            term,
            key: hit.key.clone(),
        });
        let full = limit.is_some_and(|n| page.results.len() >= n);
        if full {
            last = Some(hit);
        }
        Ok(!full)
    })?;
    debug_assert!(limit.is_none_or(|n| page.results.len() <= n));
    if let Some(hit) = last {
        page.continuation = Some(encode_continuation(plan.tag, &hit.term, &hit.key));
    }
    Ok(page)
}

/// Counts the entries `q` matches (after its continuation, if any),
/// ignoring `max_results` and `return_terms` (leveled #433's count-only query).
pub fn count(ledger: &Ledger, ledger_dir: &Path, q: &IndexQuery, now_secs: u64) -> Result<u64> {
    let mut plan = plan(q)?;
    plan.limit = None;
    let mut n = 0u64;
    scan(ledger, ledger_dir, &plan, now_secs, &mut |_| {
        n += 1;
        Ok(true)
    })?;
    Ok(n)
}
