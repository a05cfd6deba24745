//! Opening a store: checking and locking its directory, opening the
//! journal and the ledger, replaying the journal records the ledger has
//! not persisted (a store that recalculates its 2i entries derives them
//! from object metadata when the ledger starts empty:
//! [`crate::index::recalc`]), starting the background threads; and
//! [`Store::repair`].

use super::maintenance::start_compaction;
use super::{RepairReport, Store, WriteState};
use crate::config::{Config, SyncStrategy};
use crate::entry::{value_hash, LedgerValue, Status};
use crate::error::{Error, Result};
use crate::index;
use crate::journal::flusher::{FlushPlan, Flusher};
use crate::journal::{Journal, JournalOptions, RecordKind, ValueCache};
use crate::ledger::sst::SstOptions;
use crate::ledger::{BlockCache, Ledger, LedgerOptions};
use crate::lock::{check_marker, DirLock, STORE_MARKER};
use crate::snapshot::SnapshotRegistry;
use crate::stats::Stats;
use crate::tictac::LiveTree;
use crate::write_group::WriteQueue;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

impl Store {
    /// Opens the store in `config.dir`, creating it if the directory is new.
    pub fn open(config: Config) -> Result<Store> {
        Self::open_inner(config, false)
    }

    fn open_inner(config: Config, repair: bool) -> Result<Store> {
        config.validate()?;
        crate::fsutil::ensure_dir(&config.dir)?;
        let lock = DirLock::acquire(&config.dir)?;
        let created = check_marker(&config.dir, STORE_MARKER)?;
        // A store that recalculated with another source is not this one's
        // (compaction writes the marker before it first relies on it).
        if let Some(t) = &config.index_terms {
            index::recalc::check_rebuild(&config.dir, Some(t))?;
        }
        let stats = Arc::new(Stats::default());
        let journal = Arc::new(Journal::open(
            &config.dir.join("journal"),
            JournalOptions {
                file_bytes: config.journal_file_bytes,
                repair_manifest: repair,
                compression: config.compression,
                zstd_level: config.zstd_level,
                compression_point: config.compression_point,
                one_read: config.journal_one_read,
                fadvise_random: config.journal_fadvise_random,
                skip_active_lock: config.journal_skip_active_lock,
                stream_bytes: config.compaction_stream_bytes,
                compaction_pace: config.compaction_read_bytes_per_sec,
                remove_bytes_per_sec: config.remove_bytes_per_sec,
                direct_reads: config.journal_direct_reads,
                value_cache: config
                    .value_cache
                    .clone()
                    .or_else(|| ValueCache::new(config.value_cache_bytes)),
                preallocate: config.journal_preallocate,
                release_written: config.journal_release_written,
                refresh_cached: config.value_cache_refresh,
            },
            Arc::clone(&stats),
        )?);
        let hook_journal = Arc::clone(&journal);
        let ledger = Arc::new(Ledger::open(
            &config.dir.join("ledger"),
            LedgerOptions {
                memtable_bytes: config.memtable_bytes,
                memtable_journal_bytes: config.memtable_journal_bytes,
                sst: SstOptions {
                    block_bytes: config.sst_block_bytes,
                    bloom_bits_per_key: config.bloom_bits_per_key,
                    sync_bytes: config.ledger_sync_bytes,
                    compression: config.ledger_compression,
                    zstd_level: config.zstd_level,
                },
                sst_file_bytes: config.sst_file_bytes,
                l0_merge_trigger: config.l0_merge_trigger,
                l0_stall_files: config.l0_stall_files,
                frozen_memtables_max: config.frozen_memtables_max,
                l1_files: config.l1_files,
                level_fanout: config.level_fanout,
                background: config.background_merges,
                merge_nice: config.background_nice,
                remove_bytes_per_sec: config.remove_bytes_per_sec,
                block_cache: config
                    .block_cache
                    .clone()
                    .or_else(|| BlockCache::new(config.block_cache_bytes)),
                memtable_budget: config.memtable_budget.clone(),
            },
            Arc::clone(&stats),
            Box::new(move |sqn| hook_journal.sync_to(sqn)),
            created || repair,
        )?);
        let persisted = ledger.persisted_sqn();
        // An empty ledger is rebuilt from the whole journal: a store that
        // recalculates its index entries needs its term source for that.
        let rebuild = persisted == 0 && journal.last_sqn() > 0;
        if rebuild {
            index::recalc::check_rebuild(&config.dir, config.index_terms.as_ref())?;
        }
        let mut fallback = index::recalc::Fallback::default();
        let mut replayed = 0u64;
        let mut max_seen = persisted;
        journal.replay(persisted, &mut |rec| {
            max_seen = max_seen.max(rec.sqn);
            replayed += 1;
            // A rebuild recalculates every record's changes, replay after a
            // crash those of the records written without them (the index
            // blob 2); a key delta carries only index changes, no object
            // entry.
            let recalc = index::recalc::is_recalc_blob(&rec.index);
            let mut batch = match &config.index_terms {
                Some(t) if rebuild || recalc => {
                    index::recalc::recalc_entries(&ledger, t, &rec, &mut fallback)?
                }
                None if recalc => return Err(index::recalc::needs_source(&config.dir, rec.sqn)),
                _ => index::replay_entries(&rec)?,
            };
            if let Some(v) = ledger_value(&rec) {
                batch.push((rec.key, v));
            }
            ledger.admit()?;
            ledger.insert_batch(batch)
        })?;
        Stats::add(&stats.journal_replayed_records, replayed);
        if replayed > 0 {
            tracing::info!(target: "basalt::store", "B0001 replayed {replayed} journal records after sqn {persisted}");
        }
        Stats::add(&stats.index_recalc_skipped, fallback.skipped);
        if fallback.records > 0 {
            tracing::warn!(target: "basalt::store", records = fallback.records, "I0024 rebuilt the 2i entries of {} records from the changes they were written with: their metadata gave no terms", fallback.records);
        }
        let next_sqn = journal.last_sqn().max(max_seen) + 1;
        let recalc_mark = config
            .index_terms
            .as_ref()
            .map(|t| Arc::new(index::recalc::Mark::new(&config.dir, t)));
        let (compactor, scheduler) =
            start_compaction(&config, &journal, &ledger, &stats, recalc_mark.clone())?;
        let flusher = if config.sync == SyncStrategy::None {
            let plan = FlushPlan {
                step_bytes: config.journal_sync_bytes,
                mode: config.journal_flush,
                fsync_bytes: config.journal_fsync_bytes,
            };
            Flusher::start(Arc::clone(&journal), plan, &config.dir)?
        } else {
            None
        };
        let store = Store {
            tictac: config.tictac.map(LiveTree::new),
            recalc_mark,
            config,
            journal,
            ledger,
            write: Mutex::new(WriteState {
                next_sqn,
                group_buf: Vec::new(),
            }),
            queue: WriteQueue::default(),
            stats,
            closed: AtomicBool::new(false),
            snapshots: SnapshotRegistry::default(),
            compactor,
            scheduler: Mutex::new(scheduler),
            flusher: Mutex::new(flusher),
            _lock: lock,
        };
        if store.tictac.is_some() {
            store.rebuild_tictac()?;
        }
        Ok(store)
    }

    /// Rebuilds the ledger (and, if damaged, the journal manifest) from the
    /// journal files. The store must not be open elsewhere.
    pub fn repair(config: Config) -> Result<RepairReport> {
        crate::fsutil::ensure_dir(&config.dir)?;
        {
            let _lock = DirLock::acquire(&config.dir)?;
            // Refused before anything is deleted.
            index::recalc::check_rebuild(&config.dir, config.index_terms.as_ref())?;
            let ledger_dir = config.dir.join("ledger");
            if ledger_dir.exists() {
                std::fs::remove_dir_all(&ledger_dir)
                    .map_err(|e| Error::io("remove ledger directory", &ledger_dir, e))?;
            }
        }
        let store = Self::open_inner(config, true)?;
        let report = RepairReport {
            replayed: store.stats.journal_replayed_records.load(Ordering::Relaxed),
            corrupt_records: store.stats.journal_corrupt_records.load(Ordering::Relaxed),
        };
        store.close()?;
        Ok(report)
    }
}
/// The object ledger entry a journal record implies (used by replay); key
/// deltas imply none.
fn ledger_value(rec: &crate::journal::JournalRecord) -> Option<LedgerValue> {
    let status = match rec.kind {
        RecordKind::Put => Status::Active,
        RecordKind::Delete => Status::Tombstone,
        RecordKind::KeyDelta => return None,
    };
    Some(LedgerValue {
        sqn: rec.sqn,
        status,
        expires_at: rec.expires_at,
        value_hash: if rec.kind == RecordKind::Put {
            value_hash(&rec.value)
        } else {
            0
        },
        size: rec.value.len() as u64,
        last_modified_us: rec.last_modified_us,
        metadata: rec.metadata.clone(),
    })
}
