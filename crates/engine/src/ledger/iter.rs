//! Merging iterators over several sorted sources of ledger entries.
//!
//! Sources are given newest first. For a key present in several sources the
//! newest source's entry wins and the others are skipped; this is how reads
//! see the latest version and how merges drop replaced versions.

use crate::entry::LedgerValue;
use crate::error::Result;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A sorted stream of ledger entries.
pub type EntryIter = Box<dyn Iterator<Item = Result<(Vec<u8>, LedgerValue)>> + Send>;

/// K-way merge of sorted sources, newest source first, one entry per key.
pub struct MergeIter {
    sources: Vec<EntryIter>,
    values: Vec<Option<LedgerValue>>,
    heap: BinaryHeap<Reverse<(Vec<u8>, usize)>>,
    failed: Option<crate::Error>,
    done: bool,
}

impl std::fmt::Debug for MergeIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergeIter")
            .field("sources", &self.sources.len())
            .finish()
    }
}

impl MergeIter {
    /// Merges `sources`, which must each be sorted by key; index 0 is newest.
    pub fn new(sources: Vec<EntryIter>) -> MergeIter {
        let n = sources.len();
        let mut it = MergeIter {
            sources,
            values: vec![None; n],
            heap: BinaryHeap::with_capacity(n),
            failed: None,
            done: false,
        };
        for i in 0..n {
            if let Err(e) = it.advance(i) {
                it.failed = Some(e);
                break;
            }
        }
        it
    }

    fn advance(&mut self, idx: usize) -> Result<()> {
        let Some(source) = self.sources.get_mut(idx) else {
            return Ok(());
        };
        match source.next() {
            Some(Ok((k, v))) => {
                self.values[idx] = Some(v);
                self.heap.push(Reverse((k, idx)));
                Ok(())
            }
            Some(Err(e)) => Err(e),
            None => {
                self.values[idx] = None;
                Ok(())
            }
        }
    }

    fn step(&mut self) -> Result<Option<(Vec<u8>, LedgerValue)>> {
        let Some(Reverse((key, idx))) = self.heap.pop() else {
            return Ok(None);
        };
        let Some(value) = self.values.get_mut(idx).and_then(Option::take) else {
            return Err(crate::Error::InvalidInput(
                "merge iterator lost a source value".into(),
            ));
        };
        self.advance(idx)?;
        // Skip older versions of the same key in later sources.
        while let Some(Reverse((k, _))) = self.heap.peek() {
            if *k != key {
                break;
            }
            let Some(Reverse((_, older))) = self.heap.pop() else {
                break;
            };
            if let Some(old) = self.values.get_mut(older).and_then(Option::take) {
                debug_assert!(
                    old.sqn <= value.sqn,
                    "newer source holds an older version: {} < {}",
                    value.sqn,
                    old.sqn
                );
            }
            self.advance(older)?;
        }
        Ok(Some((key, value)))
    }
}

impl Iterator for MergeIter {
    type Item = Result<(Vec<u8>, LedgerValue)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(e) = self.failed.take() {
            self.done = true;
            return Some(Err(e));
        }
        match self.step() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Status;

    fn v(sqn: u64) -> LedgerValue {
        LedgerValue {
            sqn,
            status: Status::Active,
            expires_at: 0,
            value_hash: 0,
            size: 0,
            last_modified_us: 0,
            metadata: vec![],
        }
    }

    fn src(items: &[(&str, u64)]) -> EntryIter {
        let v: Vec<_> = items
            .iter()
            .map(|(k, s)| Ok((k.as_bytes().to_vec(), v(*s))))
            .collect();
        Box::new(v.into_iter())
    }

    #[test]
    fn newest_source_wins() {
        let m = MergeIter::new(vec![
            src(&[("b", 10), ("d", 11)]),
            src(&[("a", 1), ("b", 2), ("c", 3), ("d", 4)]),
            src(&[("d", 0), ("e", 0)]),
        ]);
        let got: Vec<_> = m
            .map(|r| r.unwrap())
            .map(|(k, v)| (String::from_utf8(k).unwrap(), v.sqn))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a".into(), 1),
                ("b".into(), 10),
                ("c".into(), 3),
                ("d".into(), 11),
                ("e".into(), 0)
            ]
        );
    }

    #[test]
    fn error_ends_the_stream() {
        let bad: EntryIter = Box::new(
            vec![
                Ok((b"a".to_vec(), v(1))),
                Err(crate::Error::corrupt("x", 0, "boom")),
            ]
            .into_iter(),
        );
        let items: Vec<_> = MergeIter::new(vec![bad, src(&[("b", 1)])]).collect();
        assert!(items.iter().any(|r| r.is_err()));
        assert!(items.last().unwrap().is_err());
    }
}
