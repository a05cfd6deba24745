//! Range scans of one SST file: [`SstReader::range`] and [`SstIter`],
//! reading the blocks ahead its range can reach in bounded spans.

use super::format::{decode_value, read_entry, RawEntry};
use super::reader::SstReader;
use super::{BlockHandle, RangeOptions};
use crate::codec::Reader;
use crate::entry::LedgerValue;
use crate::error::{Error, IoContext, Result};
use crate::ledger::block::Block;
use crate::limits::SST_ITER_READ_BYTES;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// The block an [`SstIter`] is walking.
pub(super) struct Cursor {
    pub(super) block: Block,
    pub(super) index: usize,
    pub(super) offset: u64,
    pub(super) pos: usize,
    pub(super) seen: u32,
}

impl Cursor {
    /// The next raw entry, `None` at the end of the block.
    fn next_raw(&mut self) -> Result<Option<RawEntry<'_>>, String> {
        let entries = self.block.entries();
        let rest = entries.get(self.pos..).unwrap_or_default();
        if rest.is_empty() {
            if self.seen != self.block.count {
                return Err(format!(
                    "block holds {} entries, its trailer says {}",
                    self.seen, self.block.count
                ));
            }
            return Ok(None);
        }
        let mut r = Reader::new(rest);
        let (k, v) = read_entry(&mut r).map_err(|e| format!("entry at +{}: {e}", self.pos))?;
        self.pos += r.position();
        self.seen += 1;
        Ok(Some((k, v)))
    }
}

/// Iterator over a key range of one SST file.
///
/// Reads the blocks ahead that its range can reach in one I/O of at most
/// [`SST_ITER_READ_BYTES`]. A damaged block yields one `Err` item, after
/// which the iterator ends.
pub struct SstIter {
    pub(super) reader: Arc<SstReader>,
    pub(super) start: Vec<u8>,
    pub(super) end: Option<Vec<u8>>,
    pub(super) next_block: usize,
    pub(super) cur: Option<Cursor>,
    pub(super) done: bool,
    pub(super) opts: RangeOptions,
    /// Blocks read ahead in one I/O.
    pub(super) ahead: Option<Span>,
}

impl SstIter {
    /// Block `i`. A modified-since filter skips blocks, so it reads them
    /// one at a time; otherwise [`SstReader::next_block`].
    fn load(&mut self, i: usize) -> Result<Block> {
        if self.opts.modified_since_us > 0 {
            return self.reader.load_block(i);
        }
        self.reader
            .next_block(&mut self.ahead, i, self.end.as_deref())
    }
}

/// Data blocks read in one I/O by a front-to-back reader.
pub(super) struct Span {
    /// Their indices.
    pub(super) blocks: std::ops::Range<usize>,
    /// File offset of the first.
    pub(super) at: u64,
    /// Their stored bytes.
    pub(super) bytes: Vec<u8>,
}

impl Span {
    /// The stored bytes of the block at `h`, if this span holds them.
    pub(super) fn raw(&self, h: &BlockHandle) -> Option<&[u8]> {
        let lo = usize::try_from(h.offset.checked_sub(self.at)?).ok()?;
        self.bytes.get(lo..lo.checked_add(h.len as usize)?)
    }
}

impl std::fmt::Debug for SstIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstIter")
            .field("path", &self.reader.path)
            .field("next_block", &self.next_block)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl Iterator for SstIter {
    type Item = Result<(Vec<u8>, LedgerValue)>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            let Some(cur) = self.cur.as_mut() else {
                if self.next_block >= self.reader.blocks.len() {
                    self.done = true;
                    return None;
                }
                let index = self.next_block;
                self.next_block += 1;
                let min_lm = self.opts.modified_since_us;
                if min_lm > 0
                    && self
                        .reader
                        .blocks
                        .get(index)
                        .is_some_and(|b| b.max_last_modified_us < min_lm)
                {
                    // Nothing in this block was modified recently enough.
                    if let (Some(b), Some(end)) =
                        (self.reader.blocks.get(index), self.end.as_deref())
                    {
                        if b.last_key.as_slice() >= end {
                            self.done = true;
                            return None;
                        }
                    }
                    continue;
                }
                match self.load(index) {
                    Ok(block) => {
                        let offset = self.reader.blocks.get(index).map_or(0, |b| b.offset);
                        self.cur = Some(Cursor {
                            block,
                            index,
                            offset,
                            pos: 0,
                            seen: 0,
                        });
                        continue;
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
            };
            let (index, offset) = (cur.index, cur.offset);
            let corrupt = |reason: String| {
                Error::corrupt(
                    &self.reader.path,
                    offset,
                    format!("data block {index}: {reason}"),
                )
            };
            match cur.next_raw() {
                Err(reason) => {
                    self.done = true;
                    return Some(Err(corrupt(reason)));
                }
                Ok(None) => {
                    // Skip reading the next block when no key can lie
                    // between this block's last key and `end`.
                    let last = self.reader.blocks.get(index).map(|b| b.last_key.as_slice());
                    if let (Some(last), Some(end)) = (last, self.end.as_deref()) {
                        if nothing_between(last, end) {
                            self.done = true;
                            return None;
                        }
                    }
                    self.cur = None;
                }
                Ok(Some((k, v))) => {
                    if k < self.start.as_slice() {
                        continue;
                    }
                    if self.end.as_deref().is_some_and(|end| k >= end) {
                        self.done = true;
                        return None;
                    }
                    if !self.opts.accepts(k) {
                        continue;
                    }
                    match decode_value(v) {
                        Ok(v) => return Some(Ok((k.to_vec(), v))),
                        Err(e) => {
                            self.done = true;
                            return Some(Err(corrupt(e.0)));
                        }
                    }
                }
            }
        }
    }
}

impl std::iter::FusedIterator for SstIter {}

/// True if no byte string `k` satisfies `last < k < end`, i.e. `end` is at
/// most the immediate successor `last ++ [0]` of `last`.
pub(super) fn nothing_between(last: &[u8], end: &[u8]) -> bool {
    end <= last || (end.len() == last.len() + 1 && end.starts_with(last) && end.last() == Some(&0))
}

impl SstReader {
    /// Iterates entries with `start <= key < end` (`end = None`: to the last key).
    pub fn range(self: &Arc<Self>, start: &[u8], end: Option<&[u8]>) -> SstIter {
        self.range_with(start, end, RangeOptions::default())
    }

    /// [`SstReader::range`] with filters: blocks whose maximum last-modified
    /// time is below `opts.modified_since_us` are not read at all, and keys
    /// the key filter rejects are skipped before their value is decoded.
    pub fn range_with(
        self: &Arc<Self>,
        start: &[u8],
        end: Option<&[u8]>,
        opts: RangeOptions,
    ) -> SstIter {
        let empty = end.is_some_and(|e| e <= start) || start > self.summary.max_key.as_slice();
        let next_block = if empty {
            self.blocks.len()
        } else {
            self.blocks
                .partition_point(|b| b.last_key.as_slice() < start)
        };
        SstIter {
            reader: Arc::clone(self),
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
            next_block,
            cur: None,
            done: false,
            opts,
            ahead: None,
        }
    }

    /// The blocks an iterator reads in one I/O from block `first`: `first`
    /// and the contiguous blocks after it, up to [`SST_ITER_READ_BYTES`],
    /// stopping after the first block whose last key reaches `end`.
    pub(super) fn span_from(&self, first: usize, end: Option<&[u8]>) -> std::ops::Range<usize> {
        let mut last = first;
        let mut bytes = self.blocks.get(first).map_or(0, |b| u64::from(b.len));
        while let (Some(prev), Some(next)) = (self.blocks.get(last), self.blocks.get(last + 1)) {
            let contiguous = prev.offset + u64::from(prev.len) == next.offset;
            let past_end = end.is_some_and(|e| nothing_between(&prev.last_key, e));
            if !contiguous || past_end || bytes + u64::from(next.len) > SST_ITER_READ_BYTES {
                break;
            }
            bytes += u64::from(next.len);
            last += 1;
        }
        first..last + 1
    }

    /// Reads blocks `blocks` with one positional read.
    fn read_span(&self, blocks: std::ops::Range<usize>) -> Result<Span> {
        let (Some(a), Some(b)) = (
            self.blocks.get(blocks.start),
            self.blocks.get(blocks.end - 1),
        ) else {
            return Err(Error::corrupt(
                &self.path,
                0,
                format!("data blocks {blocks:?} are not in the index"),
            ));
        };
        let len = b.offset + u64::from(b.len) - a.offset;
        debug_assert!(blocks.len() == 1 || len <= SST_ITER_READ_BYTES);
        let mut bytes = vec![0u8; len as usize];
        self.file
            .read_exact_at(&mut bytes, a.offset)
            .ctx("read SST blocks", &self.path)?;
        Ok(Span {
            blocks,
            at: a.offset,
            bytes,
        })
    }

    /// Block `i` for a front-to-back reader (an iterator, a verify scan):
    /// from `ahead` when it holds it, else read in one I/O with the blocks
    /// after it that a range ending at `end` can reach
    /// ([`SstReader::span_from`]), which then replace `ahead`. A failed span
    /// read falls back to the single block, whose error (I/O or damage) is
    /// then the one reported.
    pub(super) fn next_block(
        &self,
        ahead: &mut Option<Span>,
        i: usize,
        end: Option<&[u8]>,
    ) -> Result<Block> {
        if !ahead.as_ref().is_some_and(|a| a.blocks.contains(&i)) {
            let span = self.span_from(i, end);
            *ahead = if span.len() > 1 {
                self.read_span(span).ok()
            } else {
                None
            };
        }
        let handle = self.handle(i)?;
        match ahead.as_ref().and_then(|a| a.raw(handle)) {
            Some(raw) => self.block_from_raw(i, handle, raw.to_vec()),
            None => self.load_block(i),
        }
    }
}
