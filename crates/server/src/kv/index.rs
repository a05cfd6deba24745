//! 2i queries over a covering set of vnodes: merged, deduplicated, ordered
//! by (term, key) (`_int` terms numerically) and paged.

use super::Kv;
use crate::error::RequestError;
use crate::vnode::request::{VnodeReply, VnodeReq};
use basalt_backend::{IndexCursor, IndexPage, IndexQuery, IndexResult};
use futures_util::stream::StreamExt;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

impl Kv {
    /// A 2i query over a covering set of vnodes. A page of `max_results`
    /// asks each covering vnode for at most `max_results` results strictly
    /// after the page's cursor (its backend seeks there), so a page reads
    /// O(`max_results` × vnodes) index entries whatever the bucket's size;
    /// the replies are merged, deduplicated and ordered by (term, key)
    /// here, and the first `max_results` are the page (each vnode's first
    /// N after the cursor hold every result of the merged first N). The
    /// continuation is `base64(term_len:u32 | term | key)` of the page's
    /// last result. Without `max_results` every vnode's whole result is
    /// merged: the client asked for all of it.
    pub async fn index_query(&self, q: IndexQuery) -> Result<IndexPage, RequestError> {
        let _timer = self.stats.latency.timer(crate::latency::Op::Index);
        let props = self.props.get(&q.bucket);
        let after = match &q.continuation {
            None => q.start_after.clone().map(|c| (c.term, c.key)),
            Some(c) => Some(
                decode_continuation(c)
                    .ok_or_else(|| RequestError::Invalid("invalid continuation".into()))?,
            ),
        };
        let want_terms = q.return_terms;
        let mut sub = q.clone();
        sub.max_results = q.max_results.filter(|m| *m > 0);
        sub.continuation = None;
        sub.start_after = after
            .as_ref()
            .map(|(term, key)| IndexCursor::new(term.clone(), key.clone()));
        sub.return_terms = q.end.is_some() || q.field == b"$key";
        let mut all: BTreeSet<IndexResult> = BTreeSet::new();
        let targets = self.router.coverage_or_err(props.n_val)?;
        let mut replies = self
            .router
            .fan_out(&targets, || VnodeReq::Index(sub.clone()));
        while let Some((_, res)) = replies.next().await {
            match res? {
                VnodeReply::Index(page) => {
                    debug_assert!(sub
                        .max_results
                        .is_none_or(|m| page.results.len() <= m as usize));
                    self.stats
                        .index_results_read
                        .fetch_add(page.results.len() as u64, Ordering::Relaxed);
                    all.extend(page.results)
                }
                _ => return Err(RequestError::Storage("unexpected index reply".into())),
            }
        }
        drop(replies);
        // `_int` terms order numerically (as Riak), not as decimal text.
        let int = q.field.ends_with(b"_int");
        let cmp = |ta: &[u8], ka: &[u8], tb: &[u8], kb: &[u8]| {
            index_term_cmp(int, ta, tb).then_with(|| ka.cmp(kb))
        };
        let mut results: Vec<IndexResult> = all
            .into_iter()
            .filter(|r| {
                after.as_ref().is_none_or(|(t, k)| {
                    cmp(r.term.as_deref().unwrap_or_default(), &r.key, t, k)
                        == std::cmp::Ordering::Greater
                })
            })
            .collect();
        results.sort_by(|a, b| {
            cmp(
                a.term.as_deref().unwrap_or_default(),
                &a.key,
                b.term.as_deref().unwrap_or_default(),
                &b.key,
            )
        });
        let mut continuation = None;
        if let Some(max) = q.max_results.filter(|m| *m > 0) {
            if results.len() >= max as usize {
                results.truncate(max as usize);
                if let Some(last) = results.last() {
                    continuation = Some(encode_continuation(
                        last.term.as_deref().unwrap_or_default(),
                        &last.key,
                    ));
                }
            }
        }
        // As Riak: terms for range queries only, and never for `$key`
        // (its "term" is the key itself; `return_terms` is ignored).
        if !(want_terms && q.end.is_some() && q.field != b"$key") {
            for r in &mut results {
                r.term = None;
            }
        }
        Ok(IndexPage {
            results,
            continuation,
        })
    }
}

/// Orders two 2i terms: numerically when `int` and both are integers
/// (`_int` fields; any size, as Riak), else bytewise.
fn index_term_cmp(int: bool, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    match int
        .then(|| basalt_backends::intterm::cmp_text(a, b))
        .flatten()
    {
        Some(o) => o,
        None => a.cmp(b),
    }
}

pub(crate) fn encode_continuation(term: &[u8], key: &[u8]) -> String {
    let mut raw = (term.len() as u32).to_be_bytes().to_vec();
    raw.extend_from_slice(term);
    raw.extend_from_slice(key);
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, raw)
}

pub(crate) fn decode_continuation(c: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let raw = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, c).ok()?;
    let len = u32::from_be_bytes(raw.get(..4)?.try_into().ok()?) as usize;
    let term = raw.get(4..4usize.checked_add(len)?)?.to_vec();
    let key = raw.get(4 + len..)?.to_vec();
    Some((term, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_terms_order_numerically() {
        use std::cmp::Ordering::*;
        assert_eq!(index_term_cmp(true, b"-2", b"-1"), Less);
        assert_eq!(index_term_cmp(true, b"9", b"10"), Less);
        assert_eq!(index_term_cmp(true, b"-1", b"0"), Less);
        assert_eq!(index_term_cmp(false, b"9", b"10"), Greater);
    }

    #[test]
    fn continuation_roundtrip() {
        let c = encode_continuation(b"t", b"k");
        assert_eq!(
            decode_continuation(&c),
            Some((b"t".to_vec(), b"k".to_vec()))
        );
        assert_eq!(decode_continuation("!!"), None);
    }
}
