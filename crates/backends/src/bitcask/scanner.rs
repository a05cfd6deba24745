//! Reading a data file's records in order through a bounded window, for
//! recovery (a file without a valid hint) and merge. Before, both read a
//! whole data file into memory (up to `max_file_bytes`, 256 MiB): a node
//! whose vnodes merged at once held one such file per merging vnode, and
//! three 512 MiB bitcask nodes under 50 KB inserts were OOM-killed
//! (`docs/benchmarks/2026-12-03-0300-bitcask-merge-memory.md`). Now a scan
//! holds at most [`SCAN_WINDOW_BYTES`], or one record if a record is larger.
//!
//! The scan is the one [`super::format`]'s grammar asks for: each record's
//! length from its header, its CRC checked; after damage it
//! resynchronises on the next record magic, counting each damaged region
//! once; a tail too short to be a record counts as damage too.

use super::format::{self, RECORD_FIXED, RECORD_MAGIC};
use std::io;

/// The most bytes of a data file a scan holds at once, unless one record
/// is larger (it is then read whole).
pub(crate) const SCAN_WINDOW_BYTES: usize = 4 << 20;

/// Positional reads (a [`std::fs::File`], or bytes in tests).
pub(crate) trait ReadAt {
    /// Fills `buf` from `offset`; fewer bytes only at the end of the data.
    fn read_full_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ReadAt for std::fs::File {
    fn read_full_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let mut done = 0;
        while done < buf.len() {
            let Some(rest) = buf.get_mut(done..) else {
                break;
            };
            match self.read_at(rest, offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}

impl<T: ReadAt + ?Sized> ReadAt for std::sync::Arc<T> {
    fn read_full_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (**self).read_full_at(buf, offset)
    }
}

impl<T: ReadAt + ?Sized> ReadAt for &T {
    fn read_full_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (**self).read_full_at(buf, offset)
    }
}

impl ReadAt for [u8] {
    fn read_full_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.len());
        let src = self.get(start..).unwrap_or_default();
        let n = src.len().min(buf.len());
        if let (Some(d), Some(s)) = (buf.get_mut(..n), src.get(..n)) {
            d.copy_from_slice(s);
        }
        Ok(n)
    }
}

/// A scan of one data file of `len` bytes (records start after the
/// header). [`Scanner::next`] gives each intact record in order.
pub(crate) struct Scanner<R: ReadAt> {
    src: R,
    len: u64,
    window: usize,
    /// Bytes of the file from `base`.
    buf: Vec<u8>,
    base: u64,
    /// Where the next record should start.
    at: u64,
    in_damage: bool,
    damaged: u64,
    done: bool,
}

impl<R: ReadAt> Scanner<R> {
    /// A scan of `src`, `len` bytes long, holding at most `window` bytes
    /// (at least one record header's worth).
    pub(crate) fn new(src: R, len: u64, window: usize) -> Scanner<R> {
        Scanner {
            src,
            len,
            window: window.max(RECORD_FIXED),
            buf: Vec::new(),
            base: 0,
            at: format::HEADER_BYTES,
            in_damage: false,
            damaged: 0,
            done: false,
        }
    }

    /// Damaged regions skipped so far (all of them once `next` gave `None`).
    pub(crate) fn damaged(&self) -> u64 {
        self.damaged
    }

    /// `n` bytes of the file from `at` (`at + n` must be within the file):
    /// from the window if it holds them, else read into it from `at`.
    fn bytes(&mut self, at: u64, n: usize) -> io::Result<&[u8]> {
        let have = at >= self.base && at + n as u64 <= self.base + self.buf.len() as u64;
        if !have {
            let want = (n.max(self.window) as u64).min(self.len - at) as usize;
            self.buf.clear();
            self.buf.resize(want, 0);
            let got = self.src.read_full_at(&mut self.buf, at)?;
            self.buf.truncate(got);
            self.base = at;
            if got < n {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "data file shorter than its length ({} < {})",
                        at + got as u64,
                        self.len
                    ),
                ));
            }
        }
        let from = (at - self.base) as usize;
        Ok(self.buf.get(from..from + n).unwrap_or_default())
    }

    /// The next intact record as (offset, its bytes), or `None` at the end.
    pub(crate) fn next(&mut self) -> io::Result<Option<(u64, &[u8])>> {
        let len = self.len;
        while !self.done && self.at + RECORD_FIXED as u64 <= len {
            let at = self.at;
            let header = self.bytes(at, RECORD_FIXED)?;
            let total = format::record_len(header).filter(|&n| at + n as u64 <= len);
            if let Some(n) = total {
                if format::decode_record(self.bytes(at, n)?).is_ok() {
                    self.at = at + n as u64;
                    self.in_damage = false;
                    let from = (at - self.base) as usize;
                    return Ok(Some((at, self.buf.get(from..from + n).unwrap_or_default())));
                }
            }
            if !self.in_damage {
                self.damaged += 1;
                self.in_damage = true;
            }
            match self.find_magic(at + 1)? {
                Some(next) => self.at = next,
                None => self.done = true,
            }
        }
        if !self.done {
            self.done = true;
            if self.at < self.len && !self.in_damage {
                // A torn tail: too short to be a record.
                self.damaged += 1;
            }
        }
        Ok(None)
    }

    /// The offset of the next record magic at or after `from`, window by
    /// window (consecutive windows overlap by 3 bytes so a magic split
    /// between them is found).
    fn find_magic(&mut self, mut from: u64) -> io::Result<Option<u64>> {
        let magic = RECORD_MAGIC.to_le_bytes();
        while from + 4 <= self.len {
            let n = (self.window as u64).min(self.len - from) as usize;
            let w = self.bytes(from, n)?;
            if let Some(p) = w.windows(4).position(|x| x == magic) {
                return Ok(Some(from + p as u64));
            }
            from += (n - 3) as u64;
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitcask::format::{encode_record, header, FLAG_PUT};
    use proptest::prelude::*;

    /// Every intact record's (offset, key) and the damage count, reading
    /// through a window of `window` bytes.
    fn scan_all(f: &[u8], window: usize) -> (Vec<(u64, Vec<u8>)>, u64) {
        let mut s = Scanner::new(f, f.len() as u64, window);
        let mut out = Vec::new();
        while let Some((at, raw)) = s.next().expect("scan") {
            let r = format::decode_record(raw).expect("intact");
            out.push((at, r.key.to_vec()));
        }
        (out, s.damaged())
    }

    fn file(values: &[usize]) -> Vec<u8> {
        let mut f = header().to_vec();
        for (i, &v) in values.iter().enumerate() {
            f.extend(encode_record(
                i as u64,
                0,
                FLAG_PUT,
                &[i as u8],
                b"m",
                &vec![7u8; v],
            ));
        }
        f
    }

    #[test]
    fn skips_damage_and_a_torn_tail_through_a_small_window() {
        let mut f = file(&[30; 5]);
        let rec_len = RECORD_FIXED + 1 + 1 + 30;
        f[16 + rec_len * 2 + 40] ^= 0xFF; // damage record 2's value
        for window in [RECORD_FIXED, 50, 64, 4096] {
            let (recs, damaged) = scan_all(&f, window);
            assert_eq!(damaged, 1, "window {window}");
            let keys: Vec<u8> = recs.iter().map(|(_, k)| k[0]).collect();
            assert_eq!(keys, vec![0, 1, 3, 4], "window {window}");
            let (recs, damaged) = scan_all(&f[..f.len() - 3], window);
            assert_eq!((recs.len(), damaged), (3, 2), "torn tail, window {window}");
        }
    }

    #[test]
    fn a_scan_holds_no_more_than_its_window() {
        let f = file(&[300; 40]);
        let mut s = Scanner::new(&f[..], f.len() as u64, 1000);
        let mut n = 0;
        while s.next().expect("scan").is_some() {
            n += 1;
        }
        assert_eq!(n, 40);
        assert!(
            f.len() > 10_000 && s.buf.capacity() <= 1000,
            "held {}",
            s.buf.capacity()
        );
    }

    #[test]
    fn a_record_larger_than_the_window_is_read_whole() {
        let f = file(&[10, 5000, 10]);
        let (recs, damaged) = scan_all(&f, 100);
        assert_eq!((recs.len(), damaged), (3, 0));
    }

    #[test]
    fn a_file_shorter_than_its_stated_length_is_an_error() {
        let f = file(&[10, 10]);
        let mut s = Scanner::new(&f[..], f.len() as u64 + 500, 64);
        let err = loop {
            match s.next() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error"),
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    proptest! {
        /// Whatever the damage, a small window finds what reading the
        /// whole file at once finds.
        #[test]
        fn any_window_finds_what_the_whole_file_holds(
            values in proptest::collection::vec(0usize..300, 0..12),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
            cut in any::<prop::sample::Index>(),
            window in RECORD_FIXED..700,
        ) {
            let mut f = file(&values);
            for (i, x) in flips {
                let i = i.index(f.len());
                f[i] ^= x;
            }
            let keep = 16 + cut.index(f.len() - 15);
            let f = &f[..keep.min(f.len())];
            let whole = scan_all(f, usize::MAX / 2);
            prop_assert_eq!(scan_all(f, window), whole.clone());
            // And what the in-memory scan finds.
            let (recs, damaged) = format::scan(f);
            let recs: Vec<(u64, Vec<u8>)> = recs.into_iter().map(|(at, r)| (at, r.key.to_vec())).collect();
            prop_assert_eq!((recs, damaged), whole);
        }
    }
}
