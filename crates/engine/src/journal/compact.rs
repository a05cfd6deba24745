//! Journal compaction mechanics: rewrite a run of closed files keeping only
//! what a [`Liveness`] callback says is still needed, then swap the run for
//! the new files in the manifest. The policy (which run, when) is in
//! [`crate::compaction`].
//!
//! Steps of [`Journal::compact_run`]:
//!
//! 1. Scan every record of the run (oldest first). For each, ask
//!    [`Liveness::keep`]: keep the record, keep only its index changes (a
//!    *key delta* record with the same SQN and key, kind 3, no value and no
//!    metadata), rewrite it as a tombstone (kind 2, same SQN and key), or drop
//!    it. Kept records are copied with their stored bytes (compressed values
//!    stay compressed); with [`CompressionPoint::OnCompact`] an uncompressed
//!    value is compressed now.
//! 2. Write the output into new files with new numbers (`.jnl`, fsynced, then
//!    its `.jix` written atomically), rolling at the journal's file size.
//!    SQNs are unchanged, so the output covers a sub-range of the run's SQN
//!    range and **the ledger is never rewritten** (it addresses values by key
//!    and SQN, not by file).
//! 3. Under the active-file lock (which also serialises rolls, the other
//!    manifest writer) replace the run by the new files in the in-memory list
//!    and write the manifest atomically. This is the commit point: a crash
//!    before it leaves the old run listed (the unlisted new files are removed
//!    at the next open); a crash after it leaves the new files listed (the
//!    unlisted old files are removed at the next open).
//! 4. Mark the old files obsolete. Each is unlinked when its last `Arc` is
//!    dropped (deferred deletion), so a concurrent fetch, a
//!    [`super::JournalView`] or a backup never sees a file vanish. The
//!    journal holds one `Arc` itself until it is the last
//!    ([`super::Journal::reap_retired`]), so the unlink runs on a
//!    background thread rather than in the GET that let go last.
//!
//! Any error before the commit point (disk full, I/O error, an injected
//! fault) abandons the run: the partial output files are deleted and the
//! journal is unchanged. Appends are never blocked except for the manifest
//! write of step 3, as with a roll.

use super::compress::{self, CompressionPoint};
use super::file::{self, ClosedFile};
use super::record::{self, Compression, JournalRecord, NewRecord, RecordKind};
use super::{create_data_file, Journal};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{drop_cached, no_readahead, write_atomic};
use crate::stats::Stats;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What compaction does with one journal record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keep {
    /// Copy the record unchanged.
    Record,
    /// Replace the record by a key-delta record carrying only these index
    /// changes (opaque bytes, see the record's `index` field).
    KeyDelta(Vec<u8>),
    /// Replace the record by a tombstone with the same SQN and key (value,
    /// metadata and index dropped): for a put whose ledger entry is gone
    /// (an expired value reaped by the ledger) but which must still shadow
    /// older versions of the key when the ledger is rebuilt from the journal.
    Tombstone,
    /// Leave the record out.
    Drop,
}

/// Decides, for journal compaction, whether a record is still needed. The
/// store implements it from its ledger.
pub trait Liveness {
    /// The fate of `rec`. `rec.value` is **empty** (compaction does not
    /// decompress values to ask): decide from the kind, key, SQN, expiry,
    /// metadata and index changes.
    fn keep(&self, rec: &JournalRecord) -> Result<Keep>;

    /// Called once before a run (copying or in place) that may drop what
    /// [`Liveness::keep`] says, and not before scoring: an error abandons
    /// the run before it reads anything. (The store writes its 2i
    /// `INDEX_RECALC` marker here.)
    fn before_run(&self) -> Result<()> {
        Ok(())
    }
}

/// What one [`Journal::compact_run`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactedRun {
    /// Numbers of the files replaced.
    pub files_in: Vec<u64>,
    /// Numbers of the files written.
    pub files_out: Vec<u64>,
    /// Bytes of the files replaced.
    pub bytes_in: u64,
    /// Bytes of the files written.
    pub bytes_out: u64,
    /// Records copied as they were (or recompressed).
    pub records_kept: u64,
    /// Records left out.
    pub records_dropped: u64,
    /// Records reduced to key deltas.
    pub key_deltas: u64,
    /// Puts rewritten as tombstones.
    pub tombstoned: u64,
    /// Damaged records found (and left out) while reading the run.
    pub damaged_records: u64,
    /// Files a reclaim in place left as they were because it cannot punch
    /// them (linked by a backup, damaged): for copying.
    pub punch_skipped: usize,
}

/// An output file being written.
struct OutFile {
    file_no: u64,
    path: PathBuf,
    file: File,
    size: u64,
    /// Bytes of the file already made durable and dropped from the page
    /// cache (see [`super::JournalOptions::stream_bytes`]).
    synced: u64,
    index: Vec<(u64, u64)>,
}

impl Journal {
    /// The closed files, oldest first (shared handles).
    pub fn closed_files(&self) -> Vec<Arc<ClosedFile>> {
        self.closed.read().clone()
    }

    /// Reads up to `n` records of `file`, evenly spaced over its index,
    /// without their values: `(record, stored record length in bytes)`.
    /// Damaged records are skipped.
    pub fn sample(&self, file: &ClosedFile, n: usize) -> Result<Vec<(JournalRecord, u64)>> {
        let count = file.index.len();
        let take = n.min(count);
        let mut out = Vec::with_capacity(take);
        for i in 0..take {
            // Evenly spaced, deterministic positions.
            let pos = i * count / take;
            let Some(&(_, off)) = file.index.get(pos).filter(|e| !file::is_punched(**e)) else {
                continue;
            };
            let end = file
                .index
                .get(pos + 1)
                .map_or(file.size, |e| file::entry_offset(*e));
            match file::read_record_at_opt(&file.file, &file.path, off, file.size, false) {
                Ok(rec) => out.push((rec, end.saturating_sub(off))),
                Err(e) if e.is_corruption() => {
                    tracing::warn!(path = %file.path.display(), offset = off, error = %e, "damaged journal record while scoring; ignoring it");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Test hook: the next compaction run fails with an injected "no space
    /// left on device" error after writing `records` output records, or just
    /// before its manifest swap if it writes fewer (`u64::MAX` clears it).
    #[doc(hidden)]
    pub fn fail_compaction_after(&self, records: u64) {
        self.compact_fault.store(records, Ordering::Release);
    }

    fn check_fault(&self, path: &std::path::Path, at_install: bool) -> Result<()> {
        let left = self.compact_fault.load(Ordering::Acquire);
        if left == u64::MAX {
            return Ok(());
        }
        if left == 0 || at_install {
            self.compact_fault.store(u64::MAX, Ordering::Release);
            return Err(Error::io(
                "write (injected fault)",
                path,
                std::io::Error::from_raw_os_error(28),
            ));
        }
        self.compact_fault.store(left - 1, Ordering::Release);
        Ok(())
    }

    /// Sets the compaction read pace in bytes a second (0: unpaced; `None`:
    /// back to [`super::JournalOptions::compaction_pace`]). A run in
    /// progress follows it from its next chunk.
    pub fn set_compaction_pace(&self, bytes_per_sec: Option<u64>) {
        let v = bytes_per_sec.map_or(u64::MAX, |b| b.min(u64::MAX - 1));
        self.compaction_pace.store(v, Ordering::Relaxed);
    }

    /// Lifts the pace for good, also for a run in progress (checked per
    /// chunk read): the store is closing and waits for that run, which
    /// paced could take seconds (1 GiB at 64 MiB/s is 16 s).
    pub fn hurry_compaction(&self) {
        self.compaction_hurry.store(true, Ordering::Relaxed);
    }

    /// The compaction read pace right now, bytes a second (0: unpaced).
    pub fn compaction_pace(&self) -> u64 {
        if self.compaction_hurry.load(Ordering::Relaxed) {
            return 0;
        }
        match self.compaction_pace.load(Ordering::Relaxed) {
            u64::MAX => self.opts.compaction_pace,
            set => set,
        }
    }

    /// Compacts `run`, a sequence of adjacent closed files (oldest first, as
    /// returned by [`Journal::closed_files`]). See the module docs. Runs are
    /// serialised; on error nothing changed and the partial output is gone.
    pub fn compact_run(
        &self,
        run: &[Arc<ClosedFile>],
        live: &dyn Liveness,
    ) -> Result<CompactedRun> {
        let _serial = self.compact_lock.lock();
        self.reap_retired();
        if run.is_empty() {
            return Ok(CompactedRun::default());
        }
        self.check_adjacent(run)?;
        live.before_run()?;
        let mut outs: Vec<OutFile> = Vec::new();
        let mut report = CompactedRun {
            files_in: run.iter().map(|c| c.file_no).collect(),
            bytes_in: run.iter().map(|c| c.size).sum(),
            ..CompactedRun::default()
        };
        match self.write_run(run, live, &mut outs, &mut report) {
            Ok(()) => {}
            Err(e) => {
                self.discard(&outs);
                return Err(e);
            }
        }
        if let Err(e) = self.check_fault(&self.dir.join(super::MANIFEST_NAME), true) {
            self.discard(&outs);
            return Err(e);
        }
        report.files_out = outs.iter().map(|o| o.file_no).collect();
        report.bytes_out = outs.iter().map(|o| o.size).sum();
        self.install(run, outs)?;
        Ok(report)
    }

    fn check_adjacent(&self, run: &[Arc<ClosedFile>]) -> Result<usize> {
        let closed = self.closed.read();
        let start = run
            .first()
            .and_then(|f| closed.iter().position(|c| Arc::ptr_eq(c, f)));
        let ok = start.is_some_and(|s| {
            run.iter()
                .enumerate()
                .all(|(i, f)| closed.get(s + i).is_some_and(|c| Arc::ptr_eq(c, f)))
        });
        match (ok, start) {
            (true, Some(s)) => Ok(s),
            _ => Err(Error::InvalidInput(
                "journal compaction run is not a sequence of adjacent closed files".into(),
            )),
        }
    }

    fn write_run(
        &self,
        run: &[Arc<ClosedFile>],
        live: &dyn Liveness,
        outs: &mut Vec<OutFile>,
        report: &mut CompactedRun,
    ) -> Result<()> {
        let mut buf = Vec::new();
        let mut pacer = Pacer::default();
        for cf in run {
            // Its own handle, with the kernel's read-ahead off: `scan`
            // reads in 1 MiB chunks of its own. Sequential read-ahead would
            // read up to twice the device's `read_ahead_kb` ahead (16 MiB on
            // this project's VMs) in requests of up to `max_sectors_kb`, and
            // GETs' value reads queued behind them (measured with fio: 16
            // random 8 KiB readers beside a paced 64 MiB/s scan had a p99.9
            // of 11-13 ms and maxima of 20-24 ms with read-ahead, 3 ms and
            // 8-10 ms with 1 MiB reads and no read-ahead).
            let seq = File::open(&cf.path).ctx("open", &cf.path)?;
            no_readahead(&seq, &cf.path);
            // Bytes read since the last drop from the cache (holes are
            // not read, so a sparse file is paced by what it holds).
            let mut dropped = 0u64;
            let mut read = 0u64;
            let outcome = cf.scan_records(&seq, &mut |off, len, view| {
                read += len;
                if read >= self.opts.stream_bytes {
                    drop_cached(&seq, &cf.path, dropped, off + len - dropped);
                    pacer.read(read, self.compaction_pace());
                    dropped = off + len;
                    read = 0;
                }
                let meta = view.to_record_meta();
                buf.clear();
                match live.keep(&meta)? {
                    Keep::Record => {
                        self.encode_kept(&view, &mut buf)?;
                        report.records_kept += 1;
                    }
                    Keep::KeyDelta(ix) => {
                        let rec = NewRecord {
                            kind: RecordKind::KeyDelta,
                            metadata: &[],
                            value: &[],
                            index: &ix,
                            ..view.as_stored()
                        };
                        record::encode_record(&rec, &mut buf)?;
                        report.key_deltas += 1;
                    }
                    Keep::Tombstone => {
                        let rec = NewRecord {
                            kind: RecordKind::Delete,
                            metadata: &[],
                            value: &[],
                            index: &[],
                            ..view.as_stored()
                        };
                        record::encode_record(&rec, &mut buf)?;
                        report.tombstoned += 1;
                    }
                    Keep::Drop => {
                        report.records_dropped += 1;
                        return Ok(());
                    }
                }
                self.emit(outs, view.sqn, &buf)
            })?;
            for (d, why) in outcome.damage.iter().zip(&outcome.reasons) {
                tracing::warn!(path = %cf.path.display(), offset = d.offset, len = d.len, reason = %why, "damaged region in a journal file being compacted; its records are lost");
                report.damaged_records += 1;
                Stats::incr(&self.stats.journal_corrupt_records);
            }
            drop_cached(&seq, &cf.path, dropped, cf.size.saturating_sub(dropped));
            pacer.read(read, self.compaction_pace());
        }
        Stats::add(
            &self.stats.compaction_paced_ms,
            pacer.slept.as_millis() as u64,
        );
        if let Some(last) = outs.last_mut() {
            Self::finish(&self.dir, last)?;
        }
        Ok(())
    }

    /// Encodes a kept record: its stored bytes as they are, or compressed now
    /// when compression happens at compaction and the value is uncompressed.
    fn encode_kept(&self, view: &record::RecordView<'_>, buf: &mut Vec<u8>) -> Result<()> {
        let recompress = self.opts.compression_point == CompressionPoint::OnCompact
            && self.opts.compression != Compression::None
            && view.compression == Compression::None
            && !view.value.is_empty();
        if !recompress {
            return record::encode_stored(&view.as_stored(), view.compression, buf);
        }
        let (method, stored) =
            compress::compress(self.opts.compression, self.opts.zstd_level, view.value);
        Stats::add(&self.stats.compression_bytes_in, view.value.len() as u64);
        Stats::add(&self.stats.compression_bytes_out, stored.len() as u64);
        record::encode_stored(
            &NewRecord {
                value: &stored,
                ..view.as_stored()
            },
            method,
            buf,
        )
    }

    /// Appends one encoded record to the current output file, starting a new
    /// one when needed.
    fn emit(&self, outs: &mut Vec<OutFile>, sqn: u64, bytes: &[u8]) -> Result<()> {
        let need_new = outs.last().is_none_or(|o| o.size >= self.opts.file_bytes);
        if need_new {
            if let Some(last) = outs.last_mut() {
                Self::finish(&self.dir, last)?;
            }
            let file_no = self.active.lock().take_file_no()?;
            let (path, file) = create_data_file(&self.dir, file_no)?;
            outs.push(OutFile {
                file_no,
                path,
                file,
                size: file::JNL_HEADER_LEN,
                synced: 0,
                index: Vec::new(),
            });
        }
        let Some(o) = outs.last_mut() else {
            return Err(Error::InvalidInput("no compaction output file".into()));
        };
        self.check_fault(&o.path, false)?;
        debug_assert!(o.index.last().is_none_or(|e| e.0 < sqn));
        o.file.write_all_at(bytes, o.size).ctx("write", &o.path)?;
        o.index.push((sqn, o.size));
        o.size += bytes.len() as u64;
        if o.size - o.synced >= self.opts.stream_bytes {
            Self::stream_out(o)?;
            Stats::incr(&self.stats.compaction_stream_syncs);
        }
        Ok(())
    }

    /// Makes the output written since the last chunk durable and drops it
    /// from the page cache: compaction writes at the disk's pace, with at
    /// most one chunk of it dirty. Without it a run left ~250 MB of output
    /// dirty for one fsync at the end (a burst that queued GETs' value reads
    /// behind it and, in a memory cgroup, pushed reclaim into dirty pages).
    fn stream_out(o: &mut OutFile) -> Result<()> {
        o.file.sync_data().ctx("fsync", &o.path)?;
        drop_cached(&o.file, &o.path, o.synced, o.size - o.synced);
        o.synced = o.size;
        Ok(())
    }

    /// Makes an output file durable and writes its index.
    fn finish(dir: &std::path::Path, o: &mut OutFile) -> Result<()> {
        o.file.sync_all().ctx("fsync", &o.path)?;
        drop_cached(&o.file, &o.path, o.synced, o.size - o.synced);
        o.synced = o.size;
        write_atomic(
            &dir.join(file::jix_name(o.file_no)),
            &file::encode_index(&o.index),
        )
    }

    /// Deletes the output files of an abandoned run.
    fn discard(&self, outs: &[OutFile]) {
        for o in outs {
            for p in [o.path.clone(), self.dir.join(file::jix_name(o.file_no))] {
                if let Err(e) = crate::remover::remove(&p, None, true, 0) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        // The next open removes it anyway (not in the manifest).
                        tracing::warn!(path = %p.display(), error = %e, "could not delete a partial compaction output file");
                    }
                }
            }
        }
    }

    /// Swaps the run for the output files and writes the manifest (the commit
    /// point), then marks the run obsolete.
    fn install(&self, run: &[Arc<ClosedFile>], outs: Vec<OutFile>) -> Result<()> {
        let a = self.active.lock();
        let start = match self.check_adjacent(run) {
            Ok(s) => s,
            Err(e) => {
                drop(a);
                self.discard(&outs);
                return Err(e);
            }
        };
        let new_files: Vec<Arc<ClosedFile>> = {
            let closed = self.closed.read();
            let mut hi = start
                .checked_sub(1)
                .and_then(|i| closed.get(i))
                .map_or(0, |c| c.search_hi);
            outs.iter()
                .map(|o| {
                    let last = o.index.last().map_or(0, |e| e.0);
                    hi = hi.max(last);
                    // The read-write handle reads as well as a read-only one.
                    let file = o.file.try_clone().ctx("dup", &o.path)?;
                    if self.opts.fadvise_random {
                        no_readahead(&file, &o.path);
                    }
                    let direct = self.opts.direct_handle(&o.path);
                    let file = Arc::new(file);
                    let queue = &self.punch_sink;
                    Ok(Arc::new(ClosedFile {
                        file_no: o.file_no,
                        gate: super::gate::PunchGate::new(&file, &o.path, queue),
                        path: o.path.clone(),
                        file,
                        direct,
                        size: o.size,
                        punched: 0,
                        index: o.index.clone(),
                        damage: Vec::new(),
                        search_hi: hi,
                        obsolete: Default::default(),
                    }))
                })
                .collect::<Result<_>>()
        }
        .inspect_err(|_| self.discard(&outs))?;
        let old: Vec<Arc<ClosedFile>> = self
            .closed
            .write()
            .splice(start..start + run.len(), new_files.iter().cloned())
            .collect();
        if let Err(e) = self.write_manifest(&a, &self.closed.read()) {
            // Put the run back. If the old list can be written again the new
            // files are surely unlisted and can go; otherwise leave both sets
            // (the next open keeps whichever the manifest lists).
            self.closed
                .write()
                .splice(start..start + new_files.len(), old.iter().cloned());
            if self.write_manifest(&a, &self.closed.read()).is_ok() {
                for f in &new_files {
                    f.obsolete.mark(self.opts.remove_bytes_per_sec);
                }
            }
            return Err(e);
        }
        drop(a);
        for f in &old {
            f.obsolete.mark(self.opts.remove_bytes_per_sec);
        }
        self.retired.extend(old);
        Ok(())
    }

    /// Rolls the active file if it holds any record, and returns the closed
    /// files then (all data written before the call is in them) and the next
    /// file number. Used by hot backup.
    pub fn roll_and_list(&self) -> Result<(Vec<Arc<ClosedFile>>, u64)> {
        self.check_poison()?;
        let _appending = self.append_lock.lock();
        let has_records = !self.active.lock().index.is_empty();
        if has_records {
            if let Err(e) = self.roll() {
                self.poison(format!("journal roll failed earlier: {e}"));
                return Err(e);
            }
        }
        let a = self.active.lock();
        let closed = self.closed.read().clone();
        Ok((closed, a.next_file_no))
    }
}

/// Keeps a run's reads at or under a pace that may change from one chunk
/// to the next ([`Journal::compaction_pace`]): each chunk read at
/// `bytes_per_sec` is due `bytes / bytes_per_sec` after the previous one,
/// and the pacer sleeps until then. A run that falls behind (its own
/// encoding and writes took longer) keeps no credit, so it never bursts to
/// catch up; an unpaced chunk (0) is never waited for.
#[derive(Debug)]
pub(crate) struct Pacer {
    start: std::time::Instant,
    /// Time since `start` at which the reads so far are due.
    due: std::time::Duration,
    pub(crate) slept: std::time::Duration,
}

impl Default for Pacer {
    fn default() -> Pacer {
        Pacer {
            start: std::time::Instant::now(),
            due: std::time::Duration::ZERO,
            slept: std::time::Duration::ZERO,
        }
    }
}

impl Pacer {
    /// Counts `bytes` read at `bytes_per_sec` (0: unpaced) and sleeps
    /// until they are due.
    pub(crate) fn read(&mut self, bytes: u64, bytes_per_sec: u64) {
        let now = self.start.elapsed();
        if bytes_per_sec > 0 {
            self.due += std::time::Duration::from_secs_f64(bytes as f64 / bytes_per_sec as f64);
        }
        if self.due <= now {
            self.due = now;
            return;
        }
        let ahead = self.due - now;
        std::thread::sleep(ahead);
        self.slept += ahead;
    }
}

#[cfg(test)]
mod pacer_tests {
    use super::Pacer;
    use std::time::{Duration, Instant};

    #[test]
    fn a_pacer_sleeps_to_its_rate_and_an_unpaced_one_never() {
        let t = Instant::now();
        let mut p = Pacer::default();
        for _ in 0..4 {
            p.read(64 * 1024, 1024 * 1024);
        }
        // 256 KiB at 1 MiB/s: at least 250 ms.
        assert!(
            t.elapsed() >= Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
        assert!(p.slept > Duration::ZERO);
        let mut u = Pacer::default();
        u.read(1 << 40, 0);
        assert_eq!(u.slept, Duration::ZERO);
    }

    #[test]
    fn a_pacer_follows_its_rate_changes_and_keeps_no_credit() {
        let mut p = Pacer::default();
        // Unpaced reads leave nothing due: the next paced chunk waits its
        // own share only (64 KiB at 1 MiB/s, 62.5 ms), not the 1 TiB's.
        p.read(1 << 40, 0);
        let t = Instant::now();
        p.read(64 * 1024, 1024 * 1024);
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(60), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        // A chunk whose own work took longer than its share (200 ms) is
        // not waited for, and leaves no credit: the chunk after it, read at
        // once, waits its full share (no burst to catch up).
        std::thread::sleep(Duration::from_millis(200));
        let before = p.slept;
        p.read(64 * 1024, 1024 * 1024);
        assert_eq!(p.slept, before);
        let t = Instant::now();
        p.read(64 * 1024, 1024 * 1024);
        assert!(
            t.elapsed() >= Duration::from_millis(60),
            "{:?}",
            t.elapsed()
        );
        // A faster pace waits less: 64 KiB at 64 MiB/s is 1 ms.
        let before = p.slept;
        p.read(64 * 1024, 64 * 1024 * 1024);
        assert!(p.slept - before < Duration::from_millis(50));
    }
}
