//! Journal upkeep of a store: starting the compaction thread, journal
//! compaction on demand, garbage scores, hot backup, journal views, and
//! the [`Liveness`] the compactor asks whether a record is still needed
//! (see [`crate::compaction`], [`crate::journal::compact`] and
//! [`crate::backup`]).

use super::Store;
use crate::backup::BackupReport;
use crate::compaction::{
    CompactionPolicy, CompactionReport, Compactor, Keep, Liveness, Schedule, Scheduler,
};
use crate::config::Config;
use crate::diskspace::DiskGuard;
use crate::error::{Error, Result};
use crate::journal::{Journal, JournalRecord, JournalView, RecordKind};
use crate::ledger::Ledger;
use crate::slowdown::Slowdown;
use crate::stats::Stats;
use std::path::Path;
use std::sync::Arc;

/// `path` made absolute through its nearest existing ancestor, so a
/// destination that does not exist yet still compares with real paths.
fn resolve_existing_prefix(path: &Path) -> std::io::Result<std::path::PathBuf> {
    let mut missing = Vec::new();
    let mut cur = path.to_path_buf();
    loop {
        match cur.canonicalize() {
            Ok(base) => {
                let mut out = base;
                for part in missing.iter().rev() {
                    out.push(part);
                }
                return Ok(out);
            }
            Err(e) => {
                let Some(name) = cur.file_name().map(|n| n.to_os_string()) else {
                    return Err(e);
                };
                missing.push(name);
                if !cur.pop() || cur.as_os_str().is_empty() {
                    cur = std::env::current_dir()?;
                }
            }
        }
    }
}

/// Creates the store's compactor and (if configured) its scheduler thread.
pub(super) fn start_compaction(
    config: &Config,
    journal: &Arc<Journal>,
    ledger: &Arc<Ledger>,
    stats: &Arc<Stats>,
    recalc: Option<Arc<crate::index::recalc::Mark>>,
) -> Result<(Arc<Compactor>, Option<Scheduler>)> {
    let l = Arc::clone(ledger);
    let compactor = Arc::new(
        Compactor::new(
            Arc::clone(journal),
            Arc::clone(stats),
            CompactionPolicy::from_config(config),
            Box::new(move || {
                Box::new(StoreLiveness {
                    ledger: Arc::clone(&l),
                    persisted_sqn: l.persisted_sqn(),
                    recalc: recalc.clone(),
                })
            }),
        )
        .with_slowdown(Arc::new(
            Slowdown::new(
                config
                    .journal_slowdown_garbage_pct
                    .max(config.compaction_max_garbage_pct),
            )
            .with_disk_pace(config.disk_pace.clone()),
        ))
        .with_disk_guard(Arc::new(DiskGuard::new(
            &config.dir,
            config.disk_low_free_pct,
            config.disk_min_free_pct,
        )))
        .with_slots(config.compaction_slots.clone()),
    );
    let scheduler = Scheduler::start(
        Arc::clone(&compactor),
        Schedule::from_config(config),
        &config.dir,
    )?;
    Ok((compactor, scheduler))
}

impl Store {
    /// Runs one journal compaction now, on the caller's thread: scores the
    /// closed journal files, rewrites the best run if worth it. Writers and
    /// readers continue meanwhile. An error abandons the run and leaves the
    /// store fully usable (it is also counted in `compaction_failures`).
    pub fn compact_journal(&self) -> Result<CompactionReport> {
        self.check_open()?;
        let report = self.compactor.run();
        // The run's inputs are no longer held by the compactor: unlink those
        // no reader holds now rather than at the flusher's next poll.
        self.journal.reap_retired();
        report
    }

    /// Scores every closed journal file now, as compaction does (sampled
    /// records judged against the ledger), oldest first: how much of each
    /// is live. Costs about `files × compaction_sample_records` small reads.
    pub fn journal_garbage(&self) -> Result<Vec<crate::FileScore>> {
        self.check_open()?;
        self.compactor.rescore()
    }

    /// The write slowdown (see [`crate::slowdown`]): the garbage estimate
    /// and reclaim rate it paces writes by, fed by journal compaction.
    pub fn journal_slowdown(&self) -> &Slowdown {
        self.compactor.slowdown()
    }

    /// Hot backup into `dest` (created if missing; an earlier backup there is
    /// updated incrementally). `Store::open` on `dest` then holds every write
    /// acknowledged before this call. Writers continue meanwhile. See
    /// [`crate::backup`].
    pub fn backup(&self, dest: &Path) -> Result<BackupReport> {
        self.check_open()?;
        let same = match (
            resolve_existing_prefix(dest),
            self.config.dir.canonicalize(),
        ) {
            (Ok(a), Ok(b)) => a.starts_with(&b) || b.starts_with(&a),
            _ => false,
        };
        if same {
            return Err(Error::InvalidInput(format!(
                "backup destination {} overlaps the store directory",
                dest.display()
            )));
        }
        crate::backup::backup_journal(&self.journal, &self.config.dir, dest, &self.stats)
    }

    /// A point-in-time view of the journal (for snapshots): it keeps reading
    /// the values of its moment whatever compaction does afterwards.
    pub fn journal_view(&self) -> JournalView {
        self.journal.view()
    }

    /// Test hook: the next journal compaction fails with an injected "no space
    /// left on device" error after writing `records` output records.
    #[doc(hidden)]
    pub fn fail_next_compaction_after(&self, records: u64) {
        self.journal.fail_compaction_after(records);
    }
}

/// Journal compaction's view of the store: which journal records the ledger
/// (or a replay after a crash, or a rebuild from the journal) still needs.
struct StoreLiveness {
    ledger: Arc<Ledger>,
    /// The ledger's persisted SQN when the run started: records above it are
    /// needed by replay after a crash, whatever the ledger says now.
    persisted_sqn: u64,
    /// The store recalculates its index entries on a rebuild
    /// (`Config::index_terms`): no key deltas are kept, and each run first
    /// makes sure its marker is written ([`Liveness::before_run`]).
    recalc: Option<Arc<crate::index::recalc::Mark>>,
}

impl StoreLiveness {
    /// **2i hook.** The index changes of a replaced (or key-delta) record
    /// that must survive compaction, as the bytes of a key-delta record;
    /// `None` drops the record entirely. A store that recalculates its
    /// index entries on a rebuild needs none ([`crate::index::recalc`]).
    /// Otherwise the whole index blob is kept when non-empty; the 2i engine
    /// narrows it to the changes whose index entries are still live in the
    /// ledger.
    fn index_changes_to_retain(&self, rec: &JournalRecord) -> Result<Option<Vec<u8>>> {
        // A record written without its changes (index blob 2) has none to
        // keep: the store's marker was written before it, so any rebuild
        // recalculates (and one without the source is refused).
        if self.recalc.is_some() || crate::index::recalc::is_recalc_blob(&rec.index) {
            return Ok(None);
        }
        Ok((!rec.index.is_empty()).then(|| rec.index.clone()))
    }

    /// A record the ledger no longer points at: keep its index changes only.
    fn replaced(&self, rec: &JournalRecord) -> Result<Keep> {
        Ok(match self.index_changes_to_retain(rec)? {
            Some(ix) => Keep::KeyDelta(ix),
            None => Keep::Drop,
        })
    }
}

impl Liveness for StoreLiveness {
    fn before_run(&self) -> Result<()> {
        match &self.recalc {
            Some(mark) => mark.ensure(),
            None => Ok(()),
        }
    }

    fn keep(&self, rec: &JournalRecord) -> Result<Keep> {
        if rec.sqn > self.persisted_sqn {
            return Ok(Keep::Record);
        }
        if rec.kind == RecordKind::KeyDelta {
            return self.replaced(rec);
        }
        match self.ledger.get(&rec.key)? {
            // Current, tombstones included: journal tombstones are never reaped.
            Some(v) if v.sqn == rec.sqn => Ok(Keep::Record),
            // Superseded by a newer put or delete, which replay applies later.
            Some(v) if v.sqn > rec.sqn => self.replaced(rec),
            // Unexpected (ledger older than a persisted record): keep.
            Some(_) => Ok(Keep::Record),
            // The ledger reaped the key. A tombstone stays: it must shadow
            // older puts of the key still in other journal files when the
            // ledger is rebuilt from the journal. A put with an expiry (reaped
            // once expired) becomes a tombstone for the same reason; a put
            // without one was deleted by a later tombstone, which is kept.
            None => Ok(match rec.kind {
                RecordKind::Delete => Keep::Record,
                _ if rec.expires_at != 0 => Keep::Tombstone,
                _ => self.replaced(rec)?,
            }),
        }
    }
}
