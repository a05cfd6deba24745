//! A consistent, immutable view of the ledger at one moment: its memtables
//! (newest first) and its [`Version`]. Reads through a view take no ledger
//! lock. Holding a view pins its SST files on disk (see deferred deletion in
//! [`Table`]); it does not hold up flushes or merges.

use super::iter::{EntryIter, MergeIter};
use super::memtable::Memtable;
use super::sst::RangeOptions;
use super::version::{Table, Version};
use crate::entry::LedgerValue;
use crate::error::Result;
use crate::limits::LEVELS;
use crate::stats::Stats;
use std::sync::Arc;

/// Memtables plus version, as of one moment.
#[derive(Debug, Clone)]
pub struct LedgerView {
    /// The memtables, newest first.
    pub mems: Vec<Arc<Memtable>>,
    /// The SST files.
    pub version: Arc<Version>,
    /// Where damaged blocks met through this view are counted
    /// (`ledger_corrupt_blocks`): point reads and folds alike.
    pub stats: Option<Arc<Stats>>,
}

impl LedgerView {
    /// The newest entry for `key` (tombstones included).
    pub fn get(&self, key: &[u8]) -> Result<Option<LedgerValue>> {
        self.get_timed(key, None)
            .inspect_err(|e| self.count_damage(e))
    }

    /// Counts a corruption error met through this view.
    fn count_damage(&self, e: &crate::error::Error) {
        if let (true, Some(s)) = (e.is_corruption(), &self.stats) {
            Stats::incr(&s.ledger_corrupt_blocks);
        }
    }

    /// An SST source that counts the damaged blocks it meets.
    fn counted(&self, it: EntryIter) -> EntryIter {
        match &self.stats {
            None => it,
            Some(s) => {
                let s = Arc::clone(s);
                Box::new(it.inspect(move |r| {
                    if matches!(r, Err(e) if e.is_corruption()) {
                        Stats::incr(&s.ledger_corrupt_blocks);
                    }
                }))
            }
        }
    }

    /// [`LedgerView::get`], counting block-cache hits and timing each SST
    /// data-block read in `stats`.
    pub fn get_timed(&self, key: &[u8], stats: Option<&Stats>) -> Result<Option<LedgerValue>> {
        for m in &self.mems {
            if let Some(v) = m.get(key) {
                return Ok(Some(v));
            }
        }
        let hash = crate::key::hash(key);
        for t in self.version.level(0) {
            if t.covers(key) {
                if let Some(v) = t.get_timed(key, hash, stats)? {
                    return Ok(Some(v));
                }
            }
        }
        for level in 1..LEVELS {
            if let Some(t) = self.version.find_in_level(level, key) {
                if let Some(v) = t.get_timed(key, hash, stats)? {
                    return Ok(Some(v));
                }
            }
        }
        Ok(None)
    }

    /// The newest entry of every key with `start <= key < end`, in key order
    /// (tombstones and expired entries included; callers filter).
    pub fn range(&self, start: &[u8], end: Option<&[u8]>) -> MergeIter {
        self.range_with(start, end, &RangeOptions::default())
    }

    /// [`LedgerView::range`] with fold filters. The key filter applies to
    /// every source; the last-modified bound skips SST blocks only, so the
    /// caller must still filter each entry by date.
    pub fn range_with(&self, start: &[u8], end: Option<&[u8]>, opts: &RangeOptions) -> MergeIter {
        let mut sources: Vec<EntryIter> = Vec::new();
        for m in &self.mems {
            let it = m.range_iter(start, end);
            match opts.key_filter.clone() {
                Some(f) => sources.push(Box::new(it.filter(move |(k, _)| f(k)).map(Ok))),
                None => sources.push(Box::new(it.map(Ok))),
            }
        }
        for t in self.version.level(0) {
            if t.overlaps(start, end) {
                sources.push(self.counted(t.range_with(start, end, opts.clone())));
            }
        }
        for level in 1..LEVELS {
            let tables: Vec<Arc<Table>> = self
                .version
                .level(level)
                .iter()
                .filter(|t| t.overlaps(start, end))
                .cloned()
                .collect();
            if tables.is_empty() {
                continue;
            }
            let (s, e, o) = (start.to_vec(), end.map(<[u8]>::to_vec), opts.clone());
            sources.push(
                self.counted(Box::new(
                    tables
                        .into_iter()
                        .flat_map(move |t| t.range_with(&s, e.as_deref(), o.clone())),
                )),
            );
        }
        MergeIter::new(sources)
    }

    /// Number of SST files this view pins.
    pub fn files(&self) -> usize {
        self.version.all().count()
    }
}
