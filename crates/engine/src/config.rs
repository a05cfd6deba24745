//! Store configuration with documented defaults.

use crate::ledger::{BlockCache, MemtableBudget};
use crate::limits;
use crate::tictac::TreeSize;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::journal::{Compression, CompressionPoint};

/// The default [`Config::memtable_bytes`]: 32 MiB (16 MiB until
/// 2026-12-02, when an entry's count grew to its measured memory: the same
/// entries now count about twice the bytes). Each L0 merge rewrites
/// all of L1 (64 MiB by default) when keys are spread over the key space,
/// so the L0 batch's size sets the ledger's write amplification: with the
/// 8 KB scenario's PUT stream (`pareto_int` keys over 2 M), 16 MiB wrote
/// 120 ledger bytes a PUT where 4 MiB wrote 384 (2i with two terms: 923
/// against 2,076); `docs/benchmarks/2026-11-28-0000-ledger-write-amplification.md`.
/// A node's vnodes, which each hold a share of the keys,
/// set their own (`basalt-server`'s `VNODE_MEMTABLE_BYTES`).
pub const MEMTABLE_BYTES_DEFAULT: usize = 32 * 1024 * 1024;

/// When journal writes reach stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncStrategy {
    /// Leave flushing to the OS. A put survives a process crash (the write
    /// reached the kernel) but not a power loss.
    #[default]
    None,
    /// Every put returns only after an fsync covering its journal record.
    /// Concurrent writers share fsyncs (group commit).
    Sync,
}

/// What the background flusher of a `sync = None` store does every
/// `Config::journal_sync_bytes` appended to the active journal file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JournalFlush {
    /// `fdatasync` the file: a power loss takes at most about
    /// `journal_sync_bytes` of acknowledged no-sync writes. Each one is a
    /// file-system journal commit and a disk cache flush, which GETs' value
    /// reads queue behind.
    Fsync,
    /// Start the kernel's write-back of the new bytes and go on (RocksDB's
    /// `bytes_per_sync`): the page cache never holds much of the journal
    /// dirty, without a commit and flush each time; the flusher fsyncs
    /// only every `Config::journal_fsync_bytes`, so a power loss may take
    /// about that much of the acknowledged no-sync writes (all since the
    /// last fsync when it is 0); a process crash still takes nothing.
    #[default]
    Writeback,
}

/// How journal compaction gives garbage back (`Config::compaction_punch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Punch {
    /// Always copy a chosen file's live records into new files.
    Off,
    /// Reclaim in place where the file system punches holes while the
    /// process's remover keeps up with them, copying a run instead while
    /// more than `journal::punch::PUNCH_BACKLOG_MAX` of holes wait (on a
    /// file system mounted with online `discard` each freed extent waits
    /// for the device: 3.4–4.6 ms a punch under load on one of this
    /// project's VMs, 70 µs on another); copy wherever holes cannot be
    /// punched.
    #[default]
    Auto,
    /// Reclaim in place wherever the file system punches holes, however
    /// many wait. In every mode a run is copied where punching would free
    /// under half of what copying frees (`compaction::PUNCH_MIN_SHARE`:
    /// a punch pass keeps key deltas and tombstone rewrites whole).
    On,
}

/// Everything `Store::open` needs. Build with [`Config::new`] and adjust fields.
#[derive(Debug, Clone)]
pub struct Config {
    /// The store's data directory (created if missing).
    pub dir: PathBuf,
    /// Default durability of puts; each put may override it.
    pub sync: SyncStrategy,
    /// A journal file is closed and a new one started past this size.
    pub journal_file_bytes: u64,
    /// The ledger's in-memory cache is frozen and written as an L0 file past
    /// this many bytes ([`MEMTABLE_BYTES_DEFAULT`]). Up to `1 +
    /// frozen_memtables_max` of them are in memory; a snapshot copies the
    /// active one (its key range) under the write lock.
    pub memtable_bytes: usize,
    /// The memtable is also frozen once the journal has grown this many
    /// bytes since the last freeze (0: only by size). Journal compaction
    /// keeps every record newer than the ledger's persisted SQN (a crash
    /// replays them into the memtable), so a memtable that never fills
    /// pins the whole journal: overwrites of a small hot key set hold a few
    /// kilobytes of keys against gigabytes of values (50 KB inserts over
    /// 30,000 keys filled 65 GB of disk in three minutes, 2026-12-05). It
    /// also bounds the journal a restart replays. Default 256 MiB (one
    /// default journal file).
    pub memtable_journal_bytes: u64,
    /// Target size of one SST file written by a merge.
    pub sst_file_bytes: u64,
    /// Target size of an SST data block before its checksum.
    pub sst_block_bytes: usize,
    /// Bloom filter bits per object key in each SST file (8 = about 1 byte per key).
    pub bloom_bits_per_key: usize,
    /// Merge L0 into L1 once L0 holds this many files.
    pub l0_merge_trigger: usize,
    /// Writers wait (back-pressure) while L0 holds this many files or more.
    pub l0_stall_files: usize,
    /// Writers wait while this many frozen memtables are waiting to be written.
    pub frozen_memtables_max: usize,
    /// Level 1 holds at most this many SST files before merging down.
    pub l1_files: usize,
    /// Each level below L1 holds this many times the files of the one above.
    pub level_fanout: usize,
    /// Largest value accepted by `put`.
    pub value_bytes_max: u64,
    /// Largest user metadata accepted by `put`.
    pub metadata_bytes_max: u64,
    /// Run the background merge thread (tests may turn it off to control timing).
    pub background_merges: bool,
    /// Most secondary-index changes one put or delete may carry.
    pub index_changes_max: usize,
    /// Largest secondary-index term accepted by `put`, in bytes (as given).
    pub index_term_bytes_max: usize,
    /// Default lifetime of a snapshot taken for a fold (leveled's
    /// `snapshot_timeout_long`): after it, the snapshot releases its files
    /// and answers `Error::SnapshotExpired`.
    pub snapshot_timeout: Duration,
    /// Lifetime of snapshots the store takes for short queries such as
    /// `list_buckets` (leveled's `snapshot_timeout_short`).
    pub snapshot_timeout_short: Duration,
    /// Keep a tictac tree of this size up to date on every put and delete
    /// (`None`: no tree, no extra cost on writes).
    pub tictac: Option<TreeSize>,
    /// With `sync = None`, a background thread flushes the active journal
    /// file (see `journal_flush`) whenever this many bytes were appended
    /// since it last did, so a file roll never has to write out a huge
    /// backlog while writers and readers wait (RocksDB's `bytes_per_sync`).
    /// 0 turns it off. Default 1 MiB (8 MiB until 2026-11-28: each flush
    /// then sent 8 MiB to the disk at once, and GETs' reads queued behind
    /// it; 1 MiB halved the GET p99.9,
    /// `docs/benchmarks/2026-11-28-0930-disk-stalls-behind-get-maxima.md`).
    pub journal_sync_bytes: u64,
    /// A ledger SST being written (by a memtable flush or a merge) is
    /// fsynced every this many bytes, and once more when finished, so the
    /// disk takes a merge's ~100 MB of output in small steps instead of one
    /// file's worth at a time that GETs' reads queue behind (as
    /// `journal_sync_bytes` for the journal). 0: only when finished.
    /// Default 1 MiB.
    pub ledger_sync_bytes: u64,
    /// Journal compaction's and the ledger merge clerk's threads run this
    /// many nice steps below the process (0..=19; see
    /// [`crate::background`]), so GETs and PUTs that wake up get a core
    /// before them. Default 19 (since 2026-11-28; GET mean(max) −2 ms in
    /// the 8 KB scenario, `docs/benchmarks/2026-11-28-1251-where-get-maxima-wait.md`);
    /// 0 leaves them alone.
    pub background_nice: i32,
    /// What the flusher does every `journal_sync_bytes`. Default
    /// [`JournalFlush::Writeback`].
    pub journal_flush: JournalFlush,
    /// With [`JournalFlush::Writeback`], the flusher also fsyncs the active
    /// journal file once this many bytes were appended since its last
    /// fsync (by the flusher, a sync or a roll), on its own thread, not a
    /// writer's. Write-back hands the bytes to the disk, but a disk with a
    /// volatile cache keeps them there until a cache flush, and a virtual
    /// disk's flush can hold every read for as long as its backlog takes:
    /// with only the roll's fsync (every 256 MiB) GETs waited ~300–500 ms
    /// at each roll on the 2026-11-29 VM, ~40 ms with 4 MiB steps
    /// (`docs/benchmarks/2026-11-29-0718-new-vm-cache-flush-stalls.md`).
    /// 0: only rolls (and syncs) fsync, as before.
    /// Also bounds what a power loss can take from a no-sync store to about
    /// this much. Default 4 MiB.
    pub journal_fsync_bytes: u64,
    /// Each new journal file reserves `journal_file_bytes` of disk blocks
    /// when it is created (`fallocate` with `KEEP_SIZE`; the spare is made
    /// by the flusher, off the write path), so appends never allocate
    /// blocks. On ext4 an append that allocates waits for the block-map
    /// lock that the write-back of the same file holds: up to ~2 ms in the
    /// 8 KB scenario, with the store's write lock held
    /// (`docs/benchmarks/2026-11-28-2144-what-a-write-waits-on.md`). The active file and the
    /// spare may so hold up to twice `journal_file_bytes` not yet written
    /// (a node's vnodes, one store per partition, turn it off for that
    /// reason); a file rolled early gives its rest back. Default true.
    pub journal_preallocate: bool,
    /// Drop the active journal file's pages from the page cache two
    /// write-back steps after theirs began (by then clean), and a rolled
    /// file's after its roll, both on the flusher thread, when closed files
    /// are read with `O_DIRECT` (`journal_direct_reads`). Without it those
    /// pages fill the page cache with data no read takes from it: ~450 MiB
    /// of a 1.5 GiB memory budget in the 8 KB scenario, which then reclaims
    /// on every page it charges. With it that budget was never reached, and
    /// GET / UPDATE mean(max) fell by 3.0 / 4.4 ms at the same throughput
    /// (`docs/benchmarks/2026-11-29-0036-journal-release-written-pages.md`, 00:48).
    /// Values of the active file
    /// are then read from the disk. Default true.
    pub journal_release_written: bool,
    /// How journal values are compressed. Default lz4 (leveled's default):
    /// it costs little CPU even on incompressible values (which are then
    /// stored as they are) and usually shrinks Riak objects noticeably.
    pub compression: Compression,
    /// zstd level (when `compression` or `ledger_compression` is zstd).
    /// Default 1.
    pub zstd_level: i32,
    /// How the ledger's SST data blocks (keys and metadata, ~4 KiB each)
    /// are compressed. Default lz4, as leveled compresses its SST blocks:
    /// a Riak object's ledger entry (key, vclock, content metadata, ~360
    /// bytes) shrinks to about a third, so merges write a third of the
    /// bytes and the page cache holds three times the ledger. A block
    /// compressing to no less is stored as is. Reads of format version 1
    /// files (uncompressed, older builds) are unaffected.
    pub ledger_compression: Compression,
    /// Compress at put (default) or only when journal compaction rewrites a value.
    pub compression_point: CompressionPoint,
    /// Scheduled journal compaction runs per day, spread over the window with
    /// jitter (Riak's default 24). 0 turns the scheduler off;
    /// `Store::compact_journal` still works.
    pub compaction_runs_per_day: u32,
    /// Hours of the day (UTC, inclusive, `low > high` wraps midnight) in
    /// which scheduled compaction runs. Default (0, 23): all day.
    pub compaction_window_hours: (u8, u8),
    /// Most adjacent journal files compacted in one run (Riak's default 4).
    pub compaction_max_run_length: usize,
    /// A single file is compacted if under this percentage of its sampled
    /// bytes is live (Riak's default 25.0).
    pub compaction_singlefile_pct: f64,
    /// A run of `compaction_max_run_length` files is compacted if under this
    /// percentage of its bytes is live; shorter runs interpolate linearly
    /// (Riak's default 75.0).
    pub compaction_maxrun_pct: f64,
    /// Records sampled per journal file to score it. Default 200.
    pub compaction_sample_records: usize,
    /// A file's cached score is recomputed after this many runs. Default 12
    /// (Riak: 24 runs per day over 2 scorings per day).
    pub compaction_score_cache_runs: u32,
    /// Journal compaction reclaims garbage in place
    /// ([`crate::journal::punch`]): a chosen file's runs of garbage records
    /// leave its index and their whole 4 KiB blocks are punched out
    /// (`fallocate(PUNCH_HOLE)`), instead of its live records being copied
    /// into new files. Nothing is written but the file's index, so cold
    /// records are never copied again; files only a few percent full are
    /// merged by copying (`compaction_merge_below_pct`). Falls back to
    /// copying on a file system that cannot punch holes and, in
    /// [`Punch::Auto`] (the default), for a run made while the remover is
    /// behind (`journal::punch::PUNCH_BACKLOG_MAX` of holes waiting;
    /// punches slower than `journal::punch::PUNCH_SLOW` are logged as
    /// I0023).
    pub compaction_punch: Punch,
    /// With `compaction_punch`: adjacent closed files each holding under
    /// this percentage of `journal_file_bytes` on disk are merged into one
    /// by copying, so the number of files stays bounded. Default 10.0.
    pub compaction_merge_below_pct: f64,
    /// Garbage trigger: every `compaction_check_interval` the compaction
    /// thread estimates, from the files' scores, how much of the closed
    /// journal files is garbage; above this percentage it runs compactions
    /// back to back (inside or outside the window, whatever the schedule)
    /// until the estimate falls below it or no run is worth doing. 60.0
    /// (default) bounds the closed files at about 2.5× their live bytes
    /// under any write rate the compaction can keep up with; 50.0 bounds
    /// them at 2× for more compaction (in the 8 KB scenario WA
    /// 1.17 at 50 against 1.08–1.09 at 60, 2026-11-27); 70.0 gave WA
    /// 1.10–1.11 against 1.15 over 30 minutes for a journal ~30 % larger,
    /// with no throughput difference over two alternated pairs
    /// (2026-11-28); 100.0 turns the trigger off (the schedule alone then
    /// bounds nothing).
    pub compaction_max_garbage_pct: f64,
    /// Write slowdown (see [`crate::slowdown`]): above this percentage of
    /// garbage in the closed journal files (the garbage trigger's
    /// estimate), each write group waits so that the journal is written no
    /// faster than compaction reclaims space, and the journal's size stays
    /// bounded under any write rate. Default 75.0 (closed files at about
    /// 4× their live bytes, 15 points above the trigger, where its runs
    /// stop pacing their reads); a value below `compaction_max_garbage_pct`
    /// counts as that (writes never slow before compaction starts); 100.0
    /// turns it off, as does a trigger that is off.
    pub journal_slowdown_garbage_pct: f64,
    /// Disk space guard (see [`crate::diskspace`]): below this percentage
    /// of the journal's filesystem free, the garbage trigger compacts at
    /// half its limit and unpaced, writes are paced to what compaction
    /// reclaims, more so the fuller the disk (see [`crate::slowdown`]),
    /// and a warning is logged; from twice this down to it, the trigger's
    /// limit falls linearly to that half (`crate::diskspace`). Default 5.0;
    /// 0.0 turns it off.
    pub disk_low_free_pct: f64,
    /// Below this percentage free, write groups that store values are
    /// refused (an I/O error of kind `StorageFull`) before anything is
    /// written, so the store stays open and compaction keeps room to work;
    /// reads and deletes go on. Default 1.0; 0.0 turns it off; at most
    /// `disk_low_free_pct` unless that is off.
    pub disk_min_free_pct: f64,
    /// How often the garbage trigger checks (default 10 s). Zero turns the
    /// trigger off.
    pub compaction_check_interval: Duration,
    /// Read a value record with one positional read covering header and
    /// body, its length taken from the in-memory index (the next record's
    /// offset), instead of a read of the 12-byte header and then one of the
    /// body. Default true. With the kernel's read-ahead off
    /// (`journal_fadvise_random`) the header read alone would bring in only
    /// one page and the body read would go to the disk a second time.
    pub journal_one_read: bool,
    /// Advise the kernel (`posix_fadvise(POSIX_FADV_RANDOM)`) that the
    /// journal file handles used for value reads are read at random, so a
    /// GET of an 8 KB value that misses the page cache reads those pages
    /// and no read-ahead window around them (which evicts useful pages once
    /// the data outgrows the cache). Scans (replay, compaction) read in
    /// 1 MiB chunks; compaction opens its own handle, always without
    /// read-ahead.
    /// Default true.
    pub journal_fadvise_random: bool,
    /// A GET whose record is older than the active journal file reads it
    /// without taking the active file's lock (which appends hold for their
    /// write and a roll for its fsyncs). Default true.
    pub journal_skip_active_lock: bool,
    /// Concurrent writers share one trip through the write lock: one of
    /// them writes the queued records as a group with one journal write and
    /// (for sync puts) one fsync (see `write_group`). Default true; false
    /// takes the write lock once per record (for A/B runs).
    pub write_group: bool,
    /// Journal compaction streams its I/O in chunks of this many bytes: it
    /// fsyncs each chunk of output as it is written and drops it, and each
    /// chunk of input once scanned, from the page cache. A run then writes
    /// at the disk's pace with at most one chunk dirty, instead of leaving
    /// its whole output (~250 MB) to one fsync at the end, and it does not
    /// evict the hot set with data it reads or writes once. Default 1 MiB
    /// (8 MiB until 2026-11-28, with `journal_sync_bytes`); at least 4096.
    pub compaction_stream_bytes: u64,
    /// Journal compaction reads its input at most this fast (bytes a
    /// second), so a run's I/O and CPU are spread instead of taking the
    /// disk for a few seconds (a run of 4 files, 1 GiB, took ~3.5 s; in
    /// one run every one of the six slowest intervals had a compaction in
    /// it). Against 128 MiB/s, two 10-minute pairs at 64 MiB/s had their
    /// lowest interval at 0.86 and 0.83 of the median instead of 0.72 and
    /// 0.65, for a journal 12–30 % larger; WA did not reliably change
    /// (docs/benchmarks/2026-11-25-0817-compaction-read-pace.md). The garbage trigger's runs
    /// read at least twice the journal's recent append rate more than 5
    /// points over its limit ([`crate::compaction::garbage_pace`]) and
    /// unpaced more than 15 points over it, so compaction keeps up with a
    /// write rate above this pace. 0: unpaced. Default 64 MiB/s.
    pub compaction_read_bytes_per_sec: u64,
    /// Files replaced by journal compaction or a ledger merge are removed
    /// by a background thread (`crate::remover`), shrunk a step at a time
    /// at most this fast (bytes a second), so that the space they free
    /// reaches the device as a trickle of small discards instead of a
    /// burst that reads queue behind (a compaction run's gigabyte went in
    /// 0.3–0.6 s, docs/benchmarks/2026-11-28-1251-where-get-maxima-wait.md, part 5). Unpaced
    /// while the disk is low or more than 4 GiB wait. 0: removed at once
    /// by whoever drops the file last. Default 256 MiB/s, several times a
    /// write-heavy run's compaction reclaim here.
    pub remove_bytes_per_sec: u64,
    /// Bytes of the ledger's block cache for point lookups (see
    /// [`crate::ledger::block_cache`]): the SST data blocks that GETs and
    /// HEADs read stay in memory whatever the journal's values do to the
    /// page cache. Default 64 MiB; 0 turns it off (every lookup reads its
    /// block from the file). Ignored when `block_cache` is set.
    pub block_cache_bytes: u64,
    /// A block cache shared with other stores (a node's vnodes), bounding
    /// the memory of all of them together; `None` (default): the store
    /// makes its own of `block_cache_bytes`.
    pub block_cache: Option<BlockCache>,
    /// A memtable budget shared with other stores (a node's vnodes): while
    /// their memtables together hold this much, a store freezes its own
    /// early (see [`crate::ledger::memtable_budget`]). `None` (default):
    /// each store's memtable grows to `memtable_bytes`.
    pub memtable_budget: Option<MemtableBudget>,
    /// A disk pace shared with the other stores on the same disk (a node's
    /// vnodes): while the disk is low, or their journals together hold more
    /// garbage than `journal_slowdown_garbage_pct`, their writes are paced
    /// together to what their compactions reclaim (see
    /// [`crate::diskpace`]). `None` (default): the store paces its garbage
    /// and a low disk alone (`crate::slowdown`).
    pub disk_pace: Option<crate::diskpace::DiskPace>,
    /// Journal compaction slots shared with the other stores on the same
    /// disk (a node's vnodes): a background run takes one first, so that
    /// no more runs than slots read and write at once (see
    /// [`crate::compaction::CompactionSlots`]). `None` (default): the
    /// store runs when its own trigger says.
    pub compaction_slots: Option<crate::compaction::CompactionSlots>,
    /// Read values from closed journal files with `O_DIRECT`, bypassing
    /// the page cache: a GET that misses costs one disk read of the pages
    /// holding its record and leaves nothing behind for the kernel to
    /// reclaim. Meant with a value cache (`value_cache_bytes`), which then
    /// holds the hot values instead of the page cache. Files on a file
    /// system that refuses `O_DIRECT` are read through the page cache.
    /// Default false.
    pub journal_direct_reads: bool,
    /// Bytes of the value cache (see [`crate::journal::value_cache`]):
    /// verified records of recent GETs kept in memory. Default 0 (none):
    /// the page cache holds hot values. Ignored when `value_cache` is set.
    pub value_cache_bytes: u64,
    /// A value cache shared with other stores (a node's vnodes); `None`
    /// (default): the store makes its own of `value_cache_bytes`.
    pub value_cache: Option<crate::journal::ValueCache>,
    /// A write of a key whose older version the value cache holds puts the
    /// new version in its place (CRC-checked from the bytes just written),
    /// so a hot key's next GET is a hit rather than a read of the journal.
    /// Keys not cached are not added: a write says nothing of reads.
    /// Default true.
    pub value_cache_refresh: bool,
    /// Where the store reads an object's whole 2i term set from its
    /// metadata (see [`crate::index::recalc`]). With one, journal
    /// compaction keeps no key deltas (a replaced record is dropped
    /// outright, so a punch pass frees what copying would) and a ledger
    /// rebuilt from the journal recalculates each object's index entries;
    /// the store records the source in its directory (`INDEX_RECALC`) and
    /// refuses a rebuild without it. `None` (default): writes' index
    /// changes are retained as key deltas (leveled's `retain`).
    pub index_terms: Option<crate::index::IndexTerms>,
}

impl Config {
    /// Defaults for a store in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Config {
            dir: dir.into(),
            sync: SyncStrategy::None,
            journal_file_bytes: 256 * 1024 * 1024,
            memtable_bytes: MEMTABLE_BYTES_DEFAULT,
            memtable_journal_bytes: 256 * 1024 * 1024,
            sst_file_bytes: 8 * 1024 * 1024,
            sst_block_bytes: 4096,
            bloom_bits_per_key: 8,
            l0_merge_trigger: 4,
            l0_stall_files: 16,
            frozen_memtables_max: 2,
            l1_files: 8,
            level_fanout: 8,
            value_bytes_max: limits::VALUE_SIZE_BYTES_MAX_DEFAULT,
            metadata_bytes_max: limits::METADATA_SIZE_BYTES_MAX_DEFAULT,
            background_merges: true,
            index_changes_max: limits::INDEX_CHANGES_MAX_DEFAULT,
            index_term_bytes_max: limits::INDEX_TERM_BYTES_MAX_DEFAULT,
            snapshot_timeout: Duration::from_secs(43_200),
            snapshot_timeout_short: Duration::from_secs(900),
            tictac: None,
            journal_sync_bytes: 1024 * 1024,
            journal_flush: JournalFlush::Writeback,
            journal_fsync_bytes: 4 * 1024 * 1024,
            journal_preallocate: true,
            journal_release_written: true,
            ledger_sync_bytes: 1024 * 1024,
            background_nice: 19,
            compression: Compression::Lz4,
            zstd_level: 1,
            ledger_compression: Compression::Lz4,
            compression_point: CompressionPoint::OnReceipt,
            compaction_runs_per_day: 24,
            compaction_window_hours: (0, 23),
            compaction_max_run_length: 4,
            compaction_singlefile_pct: 25.0,
            compaction_maxrun_pct: 75.0,
            compaction_sample_records: 200,
            compaction_score_cache_runs: 12,
            compaction_punch: Punch::Auto,
            compaction_merge_below_pct: 10.0,
            compaction_max_garbage_pct: 60.0,
            journal_slowdown_garbage_pct: 75.0,
            disk_low_free_pct: 5.0,
            disk_min_free_pct: 1.0,
            compaction_check_interval: Duration::from_secs(10),
            journal_one_read: true,
            journal_fadvise_random: true,
            journal_skip_active_lock: true,
            write_group: true,
            compaction_stream_bytes: 1024 * 1024,
            compaction_read_bytes_per_sec: 64 * 1024 * 1024,
            remove_bytes_per_sec: 256 * 1024 * 1024,
            block_cache_bytes: 64 * 1024 * 1024,
            block_cache: None,
            memtable_budget: None,
            disk_pace: None,
            compaction_slots: None,
            journal_direct_reads: false,
            value_cache_bytes: 0,
            value_cache_refresh: true,
            value_cache: None,
            index_terms: None,
        }
    }

    /// Small sizes so tests reach file rolls, flushes and merges quickly.
    /// Scheduled and garbage-triggered journal compaction are off (tests
    /// call `Store::compact_journal` when they want it). Merges run at the
    /// process's priority: tests that wait for them share two cores with
    /// other tests.
    pub fn test_min(dir: impl Into<PathBuf>) -> Self {
        Config {
            // Copying, whatever the test machine's mount (`Auto` would punch
            // on some and copy on others); punching tests ask for `On`.
            compaction_punch: Punch::Off,
            compaction_runs_per_day: 0,
            compaction_check_interval: Duration::ZERO,
            journal_file_bytes: 64 * 1024,
            compaction_stream_bytes: 8 * 1024,
            compaction_read_bytes_per_sec: 0,
            background_nice: 0,
            memtable_bytes: 16 * 1024,
            sst_file_bytes: 32 * 1024,
            sst_block_bytes: 512,
            l0_merge_trigger: 2,
            l0_stall_files: 8,
            l1_files: 2,
            level_fanout: 2,
            block_cache_bytes: 256 * 1024,
            ..Config::new(dir)
        }
    }

    /// Checks the settings are coherent.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |m: &str| Err(crate::Error::InvalidInput(format!("config: {m}")));
        if self.journal_file_bytes < 4096 {
            return bad("journal_file_bytes must be at least 4096");
        }
        if !(0..=crate::background::NICE_MAX).contains(&self.background_nice) {
            return bad("background_nice must be in 0..=19");
        }
        if self.compaction_stream_bytes < 4096 {
            return bad("compaction_stream_bytes must be at least 4096");
        }
        if self.block_cache_bytes > limits::BLOCK_CACHE_BYTES_MAX {
            return bad("block_cache_bytes must be at most 64 GiB");
        }
        if self.value_cache_bytes > limits::VALUE_CACHE_BYTES_MAX {
            return bad("value_cache_bytes must be at most 64 GiB");
        }
        if self.memtable_bytes < 1024 {
            return bad("memtable_bytes must be at least 1024");
        }
        if self.memtable_journal_bytes != 0 && self.memtable_journal_bytes < 4096 {
            return bad("memtable_journal_bytes must be 0 (off) or at least 4096");
        }
        if self.sst_block_bytes < 64 || self.sst_file_bytes < self.sst_block_bytes as u64 {
            return bad("sst_block_bytes must be >= 64 and <= sst_file_bytes");
        }
        if self.bloom_bits_per_key == 0 || self.bloom_bits_per_key > 64 {
            return bad("bloom_bits_per_key must be in 1..=64");
        }
        if self.l0_merge_trigger == 0 || self.l0_stall_files <= self.l0_merge_trigger {
            return bad("need 0 < l0_merge_trigger < l0_stall_files");
        }
        if self.frozen_memtables_max == 0 || self.l1_files == 0 || self.level_fanout < 2 {
            return bad("frozen_memtables_max and l1_files must be > 0, level_fanout >= 2");
        }
        if self.snapshot_timeout.is_zero() || self.snapshot_timeout_short.is_zero() {
            return bad("snapshot timeouts must be > 0");
        }
        if !(1..=22).contains(&self.zstd_level) {
            return bad("zstd_level must be in 1..=22");
        }
        let (lo, hi) = self.compaction_window_hours;
        if lo > 23 || hi > 23 {
            return bad("compaction_window_hours must be hours 0..=23");
        }
        if self.compaction_max_run_length == 0 || self.compaction_sample_records == 0 {
            return bad("compaction_max_run_length and compaction_sample_records must be > 0");
        }
        let pct_ok = |p: f64| (0.0..=100.0).contains(&p);
        if !pct_ok(self.compaction_singlefile_pct)
            || !pct_ok(self.compaction_maxrun_pct)
            || !pct_ok(self.compaction_max_garbage_pct)
            || !pct_ok(self.compaction_merge_below_pct)
        {
            return bad("compaction percentages must be in 0..=100");
        }
        if !pct_ok(self.journal_slowdown_garbage_pct) {
            return bad("journal_slowdown_garbage_pct must be in 0..=100 (100: off)");
        }
        if !pct_ok(self.disk_low_free_pct)
            || !pct_ok(self.disk_min_free_pct)
            || (self.disk_low_free_pct > 0.0 && self.disk_min_free_pct > self.disk_low_free_pct)
        {
            return bad("disk_low_free_pct and disk_min_free_pct must be in 0..=100, the minimum at most the low mark (0: off)");
        }
        if self.value_bytes_max > limits::VALUE_SIZE_BYTES_CEILING {
            return bad("value_bytes_max is above the 1 GiB format ceiling");
        }
        if self.index_term_bytes_max == 0
            || self.index_term_bytes_max > limits::INDEX_TERM_BYTES_CEILING
        {
            return bad("index_term_bytes_max must be in 1..=65536");
        }
        Ok(())
    }
}
