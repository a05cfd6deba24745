//! The journal's write path: encoding and appending records, rolling the
//! active file, preparing the next one, and the group-commit
//! [`Journal::sync_to`] (with the poisoning an fsync failure causes).

use super::compress::CompressionPoint;
use super::file::{self, ClosedFile};
use super::gate::PunchGate;
use super::open::create_active_file;
use super::record::{Compression, NewRecord};
use super::{compress, record, Journal, RolledFile, Spare, ROLLED_CACHED_MAX};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{drop_cached, write_unsynced};
use crate::stats::Stats;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// The page size [`Journal::start_writeback`] rounds its steps down to
/// (Linux's on the machines we run on; a larger page only means a partly
/// filled one is still sometimes written twice).
const WRITEBACK_PAGE: u64 = 4096;

impl Journal {
    /// Encodes an appended record, compressing its value at receipt if so
    /// configured.
    fn encode_for_append(&self, rec: &NewRecord<'_>, buf: &mut Vec<u8>) -> Result<()> {
        if self.opts.compression_point != CompressionPoint::OnReceipt
            || self.opts.compression == Compression::None
            || rec.value.is_empty()
        {
            return record::encode_record(rec, buf);
        }
        let (method, stored) =
            compress::compress(self.opts.compression, self.opts.zstd_level, rec.value);
        Stats::add(&self.stats.compression_bytes_in, rec.value.len() as u64);
        Stats::add(&self.stats.compression_bytes_out, stored.len() as u64);
        record::encode_stored(
            &NewRecord {
                value: &stored,
                ..*rec
            },
            method,
            buf,
        )
    }

    pub(super) fn check_poison(&self) -> Result<()> {
        match &self.sync.lock().poisoned {
            Some(why) => Err(Error::Closed(why.clone())),
            None => Ok(()),
        }
    }

    pub(super) fn poison(&self, why: String) {
        let mut s = self.sync.lock();
        if s.poisoned.is_none() {
            s.poisoned = Some(why);
        }
        drop(s);
        self.sync_cv.notify_all();
    }

    /// Highest SQN written to the journal (0 when empty).
    pub fn last_sqn(&self) -> u64 {
        self.active.lock().last_sqn
    }

    /// Appends one record; `rec.sqn` must be greater than `last_sqn()`
    /// ([`Error::InvalidInput`] otherwise).
    ///
    /// The record reaches the kernel before this returns (not the disk: see
    /// [`Journal::sync_to`]). If the append fills the active file, the file is
    /// rolled; a failed write or roll poisons the journal (the record may or
    /// may not be in the file).
    pub fn append(&self, rec: &NewRecord<'_>) -> Result<()> {
        self.check_poison()?;
        // Encoding (and compressing) needs no lock: GETs of recent values
        // wait on the active lock only for the write itself.
        let buf = self.encode(rec)?;
        self.append_encoded(&buf, &[(rec.sqn, 0)])
    }

    /// Encodes (and compresses) `rec` as [`Journal::append`] would, without
    /// any lock. Its `sqn` may be a placeholder: [`record::reseal`] sets the
    /// real one before [`Journal::append_encoded`].
    pub fn encode(&self, rec: &NewRecord<'_>) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.encode_for_append(rec, &mut buf)?;
        Ok(buf)
    }

    /// Appends encoded records laid end to end in `buf` with one positional
    /// write. `records` lists each one's `(sqn, offset in buf)`, SQNs
    /// ascending and above the journal's last, offsets ascending from 0.
    /// The active file rolls afterwards if it reached its size (a group may
    /// take it past `file_bytes` by up to the group's size).
    pub fn append_encoded(&self, buf: &[u8], records: &[(u64, u64)]) -> Result<()> {
        self.write_and_publish(buf, records)?;
        if self.opts.refresh_cached {
            self.refresh_cached(buf, records);
        }
        Ok(())
    }

    /// Puts the new version of every key whose older version the value
    /// cache holds in its place (see [`ValueCache::refresh`]): a hot key's
    /// next GET is then a hit, not a read of the file just written. Runs
    /// on the appending thread, after the append lock is released (the
    /// store's write lock is still held: ~a hash lookup per record, and a
    /// CRC and a copy per record refreshed).
    fn refresh_cached(&self, buf: &[u8], records: &[(u64, u64)]) {
        let Some(cache) = &self.opts.value_cache else {
            return;
        };
        for &(_, at) in records {
            let Some(rec) = usize::try_from(at).ok().and_then(|at| buf.get(at..)) else {
                continue;
            };
            if cache.refresh(self.cache_user, rec) {
                Stats::incr(&self.stats.journal_value_cache_refreshes);
            }
        }
    }

    /// [`Journal::append_encoded`] without the value cache's refresh: the
    /// write, under the append lock, and its publication in the index.
    fn write_and_publish(&self, buf: &[u8], records: &[(u64, u64)]) -> Result<()> {
        self.check_poison()?;
        debug_assert!(records.first().is_some_and(|r| r.1 == 0));
        debug_assert!(records
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        let (Some(&(first_sqn, _)), Some(&(last_sqn, _))) = (records.first(), records.last())
        else {
            return Ok(());
        };
        let _appending = self.append_lock.lock();
        // Reserve the place under the active lock, write without it, then
        // publish (size, index) under it: a reader sees a record only once
        // its bytes are in the file. Appends and rolls are serialised by
        // `append_lock`, so nothing moves the active file meanwhile.
        let (file, offset) = {
            let a = self.active.lock();
            if first_sqn <= a.last_sqn {
                return Err(Error::InvalidInput(format!(
                    "journal append of sqn {first_sqn} is not above the last sqn {}",
                    a.last_sqn
                )));
            }
            (Arc::clone(&a.file), a.size)
        };
        if let Err(e) = file.write_all_at(buf, offset) {
            let err = Error::io("write", &self.active.lock().path, e);
            self.poison(format!("journal write failed earlier: {err}"));
            return Err(err);
        }
        let mut a = self.active.lock();
        debug_assert_eq!(a.size, offset, "an append or roll ran beside this one");
        let len = buf.len() as u64;
        a.size += len;
        a.index
            .extend(records.iter().map(|&(sqn, at)| (sqn, offset + at)));
        a.last_sqn = last_sqn;
        Stats::add(&self.stats.journal_records_written, records.len() as u64);
        Stats::add(&self.stats.journal_bytes_written, len);
        let before = self
            .unsynced
            .fetch_add(len, std::sync::atomic::Ordering::Relaxed);
        if let Some(wake) = self.flush_wake.get() {
            wake.appended(before, before + len);
        }
        self.unfsynced
            .fetch_add(len, std::sync::atomic::Ordering::Relaxed);
        if a.size >= self.opts.file_bytes {
            drop(a);
            let rolling = std::time::Instant::now();
            let rolled = self.roll();
            self.stats.journal_roll.since(rolling);
            if let Err(e) = rolled {
                self.poison(format!("journal roll failed earlier: {e}"));
                return Err(e);
            }
        }
        Ok(())
    }

    /// Whether an append of `bytes` now would wait for the disk: it would
    /// roll the active file (a roll fsyncs the old one and creates the
    /// next), or the journal has failed (the error belongs to a writer
    /// that may wait).
    pub fn append_would_wait(&self, bytes: u64) -> bool {
        self.check_poison().is_err() || self.active.lock().size + bytes >= self.opts.file_bytes
    }

    /// Bytes appended since the flusher's last step, sync or roll
    /// (approximate).
    pub fn unsynced_bytes(&self) -> u64 {
        self.unsynced.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes appended since the journal was opened (all files).
    pub fn appended_bytes(&self) -> u64 {
        self.stats
            .journal_bytes_written
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes appended since the active file was last fsynced, by a sync or
    /// a roll (approximate; write-back steps do not count).
    pub fn unfsynced_bytes(&self) -> u64 {
        self.unfsynced.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Drops the retired closed files nothing else holds any more (see
    /// `retired`), unlinking them on this thread; returns how many. Called by
    /// the flusher, by each compaction run, by `Store::settle` and at close.
    pub fn reap_retired(&self) -> usize {
        self.retired.reap()
    }

    /// Creates the next active file ahead of the roll (see `spare`) once the
    /// active file is past half its size and no spare exists. Called by the
    /// flusher thread, the only creator of spares; returns whether it made
    /// one (never once the journal is closed or poisoned).
    pub fn prepare_next_file(&self) -> Result<bool> {
        if self.sync.lock().poisoned.is_some() || self.spare.lock().is_some() {
            return Ok(false);
        }
        let file_no = {
            let mut a = self.active.lock();
            if a.size < self.opts.file_bytes / 2 {
                return Ok(false);
            }
            a.take_file_no()?
        };
        let (path, file) = create_active_file(&self.dir, file_no, &self.opts)?;
        let mut spare = self.spare.lock();
        debug_assert!(spare.is_none(), "spares are made by one thread");
        *spare = Some(Spare {
            file_no,
            path,
            file,
        });
        Ok(true)
    }

    /// Closes the active file and starts the next one. The caller holds
    /// `append_lock` (so the active file does not change meanwhile) and not
    /// the active lock: the slow parts (the old file's fsync, its `.jix`)
    /// run without it, so GETs of records in the active file wait only for
    /// the swap and the manifest write. Writers wait for all of it, so the
    /// next file is usually created beforehand ([`Journal::prepare_next_file`])
    /// and the `.jix` is written without an fsync: a `.jix` that a power
    /// loss leaves torn or missing fails its checksum and is rebuilt from
    /// the data file at open, which the fsync here makes durable first.
    pub(super) fn roll(&self) -> Result<()> {
        let spare = self.spare.lock().take();
        let (old_file, old_path, old_no, jix_bytes, new_no, old_size) = {
            let mut a = self.active.lock();
            debug_assert!(!a.index.is_empty());
            // Without a spare, the new file's number is taken now:
            // compaction allocates numbers for its output files under the
            // same lock.
            let new_no = match &spare {
                Some(sp) => sp.file_no,
                None => a.take_file_no()?,
            };
            let jix = file::encode_index(&a.index);
            let f = Arc::clone(&a.file);
            (f, a.path.clone(), a.file_no, jix, new_no, a.size)
        };
        if self.opts.preallocate && old_size < self.opts.file_bytes {
            // Rolled early (a backup's roll): give back the blocks reserved
            // past its end (on ext4 a truncate to the same size does).
            if let Err(e) = old_file.set_len(old_size) {
                tracing::warn!(target: "basalt::journal", path = %old_path.display(), error = %e, "I0015 could not give back a rolled journal file's reserved blocks (they stay until the file is removed)");
            }
        }
        old_file.sync_all().ctx("fsync", &old_path)?;
        self.unsynced.store(0, std::sync::atomic::Ordering::Relaxed);
        self.unfsynced
            .store(0, std::sync::atomic::Ordering::Relaxed);
        write_unsynced(&self.dir.join(file::jix_name(old_no)), &jix_bytes)?;
        let (new_path, new_file) = match spare {
            Some(sp) => (sp.path, sp.file),
            None => create_active_file(&self.dir, new_no, &self.opts)?,
        };
        let direct = self.opts.direct_handle(&old_path);
        let mut a = self.active.lock();
        debug_assert_eq!(a.file_no, old_no, "the active file changed during a roll");
        let prev_hi = self.closed.read().last().map_or(0, |c| c.search_hi);
        let gate = PunchGate::new(&old_file, &a.path, &self.punch_sink);
        a.gate.replaced_by(Vec::new(), &gate);
        let old = ClosedFile {
            file_no: a.file_no,
            gate,
            path: std::mem::replace(&mut a.path, new_path),
            // The handle it was written through (advised as every active
            // file is): views made before the roll hold it too.
            file: old_file,
            direct,
            size: a.size,
            punched: 0,
            index: std::mem::take(&mut a.index),
            damage: std::mem::take(&mut a.damage),
            search_hi: prev_hi.max(a.last_sqn),
            obsolete: Default::default(),
        };
        a.file = Arc::new(new_file);
        a.gate = PunchGate::new(&a.file, &a.path, &self.punch_sink);
        a.file_no = new_no;
        a.size = file::JNL_HEADER_LEN;
        a.written_back = file::JNL_HEADER_LEN;
        a.last_step = file::JNL_HEADER_LEN;
        a.released = file::JNL_HEADER_LEN;
        if self.releases_written() {
            // Fsynced above, so every page is clean: the flusher drops them
            // all, the released ones too (reads of the active file bring
            // pages back). Without a flusher to drain the queue, the roll
            // drops the oldest itself, so no handle is held for long.
            let mut q = self.rolled_cached.lock();
            if q.len() >= ROLLED_CACHED_MAX {
                let r = q.remove(0);
                drop_cached(&r.file, &r.path, 0, r.size);
            }
            q.push(RolledFile {
                file: Arc::clone(&old.file),
                path: old.path.clone(),
                size: old.size,
            });
        }
        self.closed.write().push(Arc::new(old));
        self.active_floor
            .store(a.last_sqn, std::sync::atomic::Ordering::Release);
        // The active lock (held) orders this manifest with compaction's;
        // readers of the closed list are not blocked while it is written.
        self.write_manifest(&a, &self.closed.read())?;
        Stats::incr(&self.stats.journal_rolls);
        let mut s = self.sync.lock();
        s.synced_sqn = s.synced_sqn.max(a.last_sqn);
        drop(s);
        self.sync_cv.notify_all();
        Ok(())
    }

    /// Starts the kernel's write-back of what was appended to the active file
    /// since the last call, without waiting for it and without flushing the
    /// disk's cache (RocksDB's `bytes_per_sync` does the same with
    /// `sync_file_range`): the page cache then never holds much of the
    /// journal dirty, yet no fsync (a journal commit and a cache flush that
    /// GETs' reads queue behind) is paid. Not a durability point: only
    /// [`Journal::sync_to`] and rolls are. Uses `posix_fadvise(DONTNEED)`,
    /// which on Linux starts write-back of the range's dirty pages and frees
    /// only pages already clean, which the just-written ones are not.
    ///
    /// With [`JournalOptions::release_written`], it also releases the pages
    /// whose write-back the step before last started: clean by now (or
    /// skipped by the kernel if not), and never read through the cache
    /// again once the file is closed.
    ///
    /// It stops at the last whole page: the partly filled page at the end
    /// waits for the next step, by when appends have usually filled it.
    /// Written back partly filled, the next append dirties it again and the
    /// disk gets it twice (a page a step; in a memory cgroup at its limit
    /// the same happens on reclaim's write-back, see
    /// `scripts/experiments/append-recount.py`).
    pub fn start_writeback(&self) -> Result<()> {
        self.check_poison()?;
        let (f, path, from, to, release) = {
            let mut a = self.active.lock();
            let from = a.written_back.min(a.size);
            let whole = a.size - a.size % WRITEBACK_PAGE;
            a.written_back = whole.max(from);
            let release = (a.released, a.last_step);
            a.released = a.released.max(a.last_step);
            a.last_step = from;
            (
                Arc::clone(&a.file),
                a.path.clone(),
                from,
                a.written_back,
                release,
            )
        };
        self.unsynced.store(0, std::sync::atomic::Ordering::Relaxed);
        drop_cached(&f, &path, from, to - from);
        if self.releases_written() && release.1 > release.0 {
            drop_cached(&f, &path, release.0, release.1 - release.0);
        }
        Stats::incr(&self.stats.journal_writebacks);
        Ok(())
    }

    /// Whether written-back pages are released: asked for, and closed files
    /// are read around the page cache.
    fn releases_written(&self) -> bool {
        self.opts.release_written && self.opts.direct_reads
    }

    /// Drops rolled files' pages from the page cache (the flusher's job,
    /// so that no writer pays for it; see [`Journal::start_writeback`]).
    pub fn release_rolled(&self) {
        let rolled = std::mem::take(&mut *self.rolled_cached.lock());
        for r in rolled {
            drop_cached(&r.file, &r.path, 0, r.size);
        }
    }

    /// Returns once every record up to `sqn` is on stable storage (group commit).
    pub fn sync_to(&self, sqn: u64) -> Result<()> {
        let mut s = self.sync.lock();
        loop {
            if let Some(why) = &s.poisoned {
                return Err(Error::Closed(why.clone()));
            }
            if s.synced_sqn >= sqn {
                Stats::incr(&self.stats.journal_syncs_shared);
                return Ok(());
            }
            if s.leader_active {
                self.sync_cv.wait(&mut s);
                continue;
            }
            s.leader_active = true;
            break;
        }
        drop(s);
        let (f, path, upto) = {
            let a = self.active.lock();
            (Arc::clone(&a.file), a.path.clone(), a.last_sqn)
        };
        let syncing = std::time::Instant::now();
        let res = f.sync_data();
        self.stats.journal_fsync.since(syncing);
        let mut s = self.sync.lock();
        s.leader_active = false;
        let out = match res {
            Ok(()) => {
                Stats::incr(&self.stats.journal_syncs);
                self.unsynced.store(0, std::sync::atomic::Ordering::Relaxed);
                self.unfsynced
                    .store(0, std::sync::atomic::Ordering::Relaxed);
                s.synced_sqn = s.synced_sqn.max(upto);
                if upto < sqn {
                    Err(Error::InvalidInput(format!(
                        "sync_to({sqn}) beyond the last written sqn {upto}"
                    )))
                } else {
                    Ok(())
                }
            }
            Err(e) => {
                let err = Error::io("fsync", &path, e);
                if s.poisoned.is_none() {
                    s.poisoned = Some(format!("journal fsync failed earlier: {err}"));
                }
                Err(err)
            }
        };
        drop(s);
        self.sync_cv.notify_all();
        out
    }
}
