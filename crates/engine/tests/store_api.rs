//! Store API behaviour: input validation, the directory lock, the store-kind
//! marker, HEAD answering without the journal, concurrent readers and writers,
//! TTL, sync puts, and writes refused on a full disk.
//!
//! Method: each test opens a fresh store in a temporary directory and checks
//! one behaviour through the public API only.

use basalt_engine::{Config, Error, JournalFlush, PutOptions, Store, SyncStrategy};
use std::sync::Arc;

/// `len` pseudo-random bytes (xorshift), which no compression shrinks: a
/// record of them takes its size in the journal.
fn incompressible(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn open(dir: &std::path::Path) -> Store {
    Store::open(Config::test_min(dir)).expect("open store")
}

#[test]
fn bad_input_is_a_typed_error() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    for (b, k) in [(&b""[..], &b"k"[..]), (b"b", b"")] {
        let e = s.put(b, k, b"v", b"").unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e}");
        assert!(e.to_string().contains("must not be empty"), "{e}");
    }
    let big_key = vec![b'k'; 64 * 1024 + 1];
    let e = s.put(b"b", &big_key, b"v", b"").unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");
    s.put(b"b", &vec![b'k'; 64 * 1024], b"v", b"").unwrap();

    let mut cfg = Config::test_min(d.path().join("small"));
    cfg.value_bytes_max = 10;
    let small = Store::open(cfg).unwrap();
    let e = small.put(b"b", b"k", &[0u8; 11], b"").unwrap_err();
    assert!(e.to_string().contains("value_bytes_max"), "{e}");
    small.put(b"b", b"k", &[0u8; 10], b"").unwrap();
}

#[test]
fn second_open_is_refused_while_locked() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    let e = Store::open(Config::test_min(d.path())).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    s.close().unwrap();
    drop(s);
    open(d.path());
}

#[test]
fn foreign_directory_is_refused_by_name() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("STORE"), "basalt-bitcask 1\n").unwrap();
    let e = Store::open(Config::test_min(d.path())).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("basalt-bitcask 1") && msg.contains("basalt-leveled 1"),
        "{msg}"
    );

    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("somefile"), "x").unwrap();
    assert!(matches!(
        Store::open(Config::test_min(other.path())).unwrap_err(),
        Error::WrongStore { .. }
    ));
}

#[test]
fn head_answers_from_the_ledger_without_reading_the_value() {
    let d = tempfile::tempdir().unwrap();
    // Uncompressed, so the value's bytes can be found and damaged.
    let s = Store::open(Config {
        compression: basalt_engine::Compression::None,
        ..Config::test_min(d.path())
    })
    .unwrap();
    let value = vec![0xAB; 1000];
    s.put(b"b", b"k", &value, b"meta").unwrap();
    // Damage the value bytes in the journal behind the store's back.
    let jdir = d.path().join("journal");
    let mut damaged = false;
    for e in std::fs::read_dir(&jdir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "jnl") {
            let mut bytes = std::fs::read(&p).unwrap();
            if let Some(pos) = bytes.windows(16).position(|w| w == [0xAB; 16]) {
                bytes[pos + 8] ^= 0xFF;
                std::fs::write(&p, &bytes).unwrap();
                damaged = true;
            }
        }
    }
    assert!(damaged, "value bytes not found in the journal");
    let h = s.head(b"b", b"k").unwrap().unwrap();
    assert_eq!((h.size, h.metadata.as_slice()), (1000, &b"meta"[..]));
    let e = s.get(b"b", b"k").unwrap_err();
    assert!(e.is_corruption(), "{e}");
}

#[test]
fn a_full_disk_refuses_puts_and_the_store_stays_open() {
    let d = tempfile::tempdir().unwrap();
    {
        let s = open(d.path());
        s.put(b"b", b"k", b"v", b"").unwrap();
    }
    // Thresholds above any real free share: the disk counts as full.
    let mut cfg = Config::test_min(d.path());
    cfg.disk_low_free_pct = 100.0;
    cfg.disk_min_free_pct = 100.0;
    let s = Store::open(cfg).unwrap();
    let e = s.put(b"b", b"k2", b"v", b"").unwrap_err();
    assert!(
        matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull),
        "{e}"
    );
    assert!(e.to_string().contains("disk_min_free_pct"), "{e}");
    // Nothing of the refused write is there; reads and deletes go on.
    assert!(s.get(b"b", b"k2").unwrap().is_none());
    assert!(s.get(b"b", b"k").unwrap().is_some());
    s.delete(b"b", b"k").unwrap();
    assert!(s.get(b"b", b"k").unwrap().is_none());
    let stats = s.stats();
    assert_eq!(stats.disk_writes_refused, 1);
    assert!(stats.disk.is_some_and(|d| d.total_bytes > 0));
    s.close().unwrap();
    drop(s);
    // The default thresholds on the same disk: writes pass.
    let s = open(d.path());
    s.put(b"b", b"k2", b"v", b"").unwrap();
}

/// The write path hands the disk guard's depth to the write slowdown at
/// every write group, also with the garbage trigger off.
#[test]
fn writes_feed_the_disk_depth_to_the_slowdown() {
    let d = tempfile::tempdir().unwrap();
    let mut cfg = Config::test_min(d.path());
    cfg.compaction_check_interval = std::time::Duration::ZERO;
    // The low mark above any real free share, the minimum off: low, never full.
    cfg.disk_low_free_pct = 100.0;
    cfg.disk_min_free_pct = 0.0;
    let s = Store::open(cfg).unwrap();
    assert_eq!(
        s.journal_slowdown().disk_depth(),
        None,
        "nothing written yet"
    );
    s.put(b"b", b"k", b"v", b"").unwrap();
    let depth = s.journal_slowdown().disk_depth();
    assert!(depth.is_some_and(|d| (0.0..=1.0).contains(&d)), "{depth:?}");
    // No run has measured a reclaim rate: not paced.
    assert_eq!(s.journal_slowdown().rate(), None);
    s.put(b"b", b"k2", b"v", b"").unwrap();
    assert_eq!(counter(&s, "journal_slowdowns"), 0);
}

/// Stores that share a disk pace (a node's vnodes) are paced together
/// while the disk is low, from their first write, with no compaction run
/// yet: one store's bytes make the other's next write wait.
#[test]
fn stores_sharing_a_low_disk_are_paced_together() {
    let d = tempfile::tempdir().unwrap();
    // The low mark above any real free share; the minimum 1 GiB below
    // what is free now, so the headroom (spread over an hour: under
    // 0.3 MiB/s) leaves the node's 1 MiB/s floor the pace.
    let space = basalt_engine::diskspace::DiskSpace::of(d.path()).unwrap();
    let margin = 1u64 << 30;
    if space.free_bytes < 2 * margin {
        eprintln!(
            "skipped: {} bytes free, fewer than the 2 GiB this test keeps a margin of",
            space.free_bytes
        );
        return;
    }
    let min_pct = 100.0 * (space.free_bytes - margin) as f64 / space.total_bytes as f64;
    let shared = basalt_engine::DiskPace::new();
    let open_low = |name: &str| {
        let mut cfg = Config::test_min(d.path().join(name));
        cfg.disk_low_free_pct = 100.0;
        cfg.disk_min_free_pct = min_pct;
        cfg.disk_pace = Some(shared.clone());
        Store::open(cfg).unwrap()
    };
    let (a, b) = (open_low("a"), open_low("b"));
    // Half a second of the node's floor (1 MiB/s), incompressible,
    // written by a...
    let value = incompressible(512 * 1024);
    a.put(b"b", b"k", &value, b"").unwrap();
    assert_eq!(
        counter(&a, "journal_slowdowns"),
        0,
        "the first group waits for nothing"
    );
    // ...is waited for by b's next write.
    let t0 = std::time::Instant::now();
    b.put(b"b", b"k", b"v", b"").unwrap();
    assert!(
        t0.elapsed() >= std::time::Duration::from_millis(300),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(counter(&b, "journal_slowdowns"), 1);
    // Alone, the same store is not paced before a run measured a reclaim
    // rate (writes_feed_the_disk_depth_to_the_slowdown).
}

#[test]
fn disk_thresholds_are_checked_at_open() {
    let d = tempfile::tempdir().unwrap();
    for (low, min) in [(5.0, 6.0), (101.0, 1.0), (5.0, -1.0)] {
        let mut cfg = Config::test_min(d.path());
        cfg.disk_low_free_pct = low;
        cfg.disk_min_free_pct = min;
        let e = Store::open(cfg).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{low}/{min}: {e}");
        assert!(e.to_string().contains("disk_min_free_pct"), "{e}");
    }
    // The minimum alone (the low mark off) is allowed.
    let mut cfg = Config::test_min(d.path());
    cfg.disk_low_free_pct = 0.0;
    cfg.disk_min_free_pct = 1.0;
    Store::open(cfg).unwrap();
}

#[test]
fn delete_and_missing() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    assert!(s.get(b"b", b"k").unwrap().is_none());
    s.put(b"b", b"k", b"v", b"").unwrap();
    s.delete(b"b", b"k").unwrap();
    assert!(s.get(b"b", b"k").unwrap().is_none());
    assert!(s.head(b"b", b"k").unwrap().is_none());
    assert!(s.keys(b"b").unwrap().is_empty());
}

#[test]
fn expired_objects_read_as_missing() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    let past = PutOptions {
        expires_at: 1,
        ..PutOptions::default()
    };
    s.put_with(b"b", b"old", b"v", b"", &past).unwrap();
    let future = PutOptions {
        expires_at: u64::MAX / 2,
        ..PutOptions::default()
    };
    s.put_with(b"b", b"new", b"v", b"", &future).unwrap();
    assert!(s.get(b"b", b"old").unwrap().is_none());
    assert!(s.get(b"b", b"new").unwrap().is_some());
    assert_eq!(s.keys(b"b").unwrap(), vec![b"new".to_vec()]);
}

#[test]
fn many_threads_read_and_write() {
    let d = tempfile::tempdir().unwrap();
    let s = Arc::new(open(d.path()));
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                for i in 0..300u32 {
                    let key = format!("t{t}-{i}");
                    let val = format!("value-{t}-{i}").repeat((i % 5 + 1) as usize);
                    let opts = PutOptions {
                        sync: Some(if i % 50 == 0 {
                            SyncStrategy::Sync
                        } else {
                            SyncStrategy::None
                        }),
                        ..PutOptions::default()
                    };
                    s.put_with(b"b", key.as_bytes(), val.as_bytes(), b"", &opts)
                        .unwrap();
                    let got = s.get(b"b", key.as_bytes()).unwrap().unwrap();
                    assert_eq!(got.value, val.as_bytes());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(s.keys(b"b").unwrap().len(), 8 * 300);
    s.close().unwrap();
    drop(s);
    let s = open(d.path());
    assert_eq!(s.keys(b"b").unwrap().len(), 8 * 300);
    let levels = s.stats().levels;
    assert!(
        levels.iter().map(|l| l.files).sum::<usize>() > 0,
        "{levels:?}"
    );
}

#[test]
fn closed_store_refuses_calls() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    s.close().unwrap();
    assert!(matches!(
        s.put(b"b", b"k", b"v", b"").unwrap_err(),
        Error::Closed(_)
    ));
    assert!(matches!(s.get(b"b", b"k").unwrap_err(), Error::Closed(_)));
}

#[test]
fn missing_ledger_manifest_is_a_clear_error_and_repair_fixes_it() {
    let d = tempfile::tempdir().unwrap();
    {
        let s = open(d.path());
        for i in 0..500u32 {
            s.put(b"b", format!("k{i}").as_bytes(), &[i as u8; 100], b"")
                .unwrap();
        }
        s.close().unwrap();
    }
    std::fs::remove_file(d.path().join("ledger").join("MANIFEST")).unwrap();
    let e = Store::open(Config::test_min(d.path())).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("missing") && msg.contains("repair"), "{msg}");
    let report = Store::repair(Config::test_min(d.path())).unwrap();
    assert_eq!(report.replayed, 500);
    let s = open(d.path());
    for i in 0..500u32 {
        let o = s.get(b"b", format!("k{i}").as_bytes()).unwrap().unwrap();
        assert_eq!(o.value, vec![i as u8; 100]);
    }
}

#[test]
fn background_flusher_keeps_the_unsynced_journal_tail_small() {
    // Incompressible values (lz4 would shrink a repeated byte to nothing).
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut noise = || -> Vec<u8> {
        (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    };
    let counter = |s: &Store, name: &str| {
        s.stats()
            .counters
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| *v)
    };
    // Each mode flushes with its own action and never the other's.
    for (mode, done, other) in [
        (JournalFlush::Fsync, "journal_syncs", "journal_writebacks"),
        (
            JournalFlush::Writeback,
            "journal_writebacks",
            "journal_syncs",
        ),
    ] {
        let d = tempfile::tempdir().unwrap();
        let mut cfg = Config::new(d.path());
        cfg.journal_sync_bytes = 64 * 1024;
        cfg.journal_flush = mode;
        let s = Store::open(cfg).unwrap();
        for i in 0..64u32 {
            s.put(b"b", format!("k{i}").as_bytes(), &noise(), b"")
                .unwrap();
        }
        // The flusher polls every 20 ms; wait for the condition, not a duration.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while counter(&s, done) == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            counter(&s, done) > 0,
            "{mode:?}: 256 KiB written, threshold 64 KiB, no background {done}"
        );
        assert_eq!(counter(&s, other), 0, "{mode:?}");
        for i in 0..64u32 {
            assert!(s.get(b"b", format!("k{i}").as_bytes()).unwrap().is_some());
        }
    }

    // Write-back steps with an fsync cadence: both, on the flusher's thread.
    let d3 = tempfile::tempdir().unwrap();
    let mut cfg = Config::new(d3.path());
    cfg.journal_sync_bytes = 32 * 1024;
    cfg.journal_fsync_bytes = 128 * 1024;
    cfg.journal_flush = JournalFlush::Writeback;
    let s3 = Store::open(cfg).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut i = 0u32;
    while (counter(&s3, "journal_syncs") == 0 || counter(&s3, "journal_writebacks") == 0)
        && std::time::Instant::now() < deadline
    {
        s3.put(b"b", format!("k{i}").as_bytes(), &noise(), b"")
            .unwrap();
        i += 1;
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert!(
        counter(&s3, "journal_syncs") > 0 && counter(&s3, "journal_writebacks") > 0,
        "{i} puts: syncs {} writebacks {}",
        counter(&s3, "journal_syncs"),
        counter(&s3, "journal_writebacks")
    );
    drop(s3);

    // Off: no thread, no flushes of its own.
    let d2 = tempfile::tempdir().unwrap();
    let mut cfg = Config::new(d2.path());
    cfg.journal_sync_bytes = 0;
    let s2 = Store::open(cfg).unwrap();
    for i in 0..64u32 {
        s2.put(b"b", format!("k{i}").as_bytes(), &noise(), b"")
            .unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(counter(&s2, "journal_syncs"), 0);
    assert_eq!(counter(&s2, "journal_writebacks"), 0);
}

#[test]
fn backup_into_the_store_itself_is_refused_even_before_it_exists() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    s.put(b"b", b"k", b"v", b"").unwrap();
    for dest in [d.path().to_path_buf(), d.path().join("new").join("sub")] {
        let e = s.backup(&dest).unwrap_err();
        assert!(
            e.to_string().contains("overlaps"),
            "{}: {e}",
            dest.display()
        );
    }
    let elsewhere = tempfile::tempdir().unwrap();
    s.backup(&elsewhere.path().join("copy")).unwrap();
}

#[test]
fn clean_reopen_skips_scanning_the_active_journal_file() {
    let counter = |s: &Store, name: &str| {
        s.stats()
            .counters
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(u64::MAX, |(_, v)| *v)
    };
    let d = tempfile::tempdir().unwrap();
    let cfg = || Config::new(d.path());
    let s = Store::open(cfg()).unwrap();
    for i in 0..200u32 {
        s.put(
            b"b",
            format!("k{i}").as_bytes(),
            &i.to_le_bytes().repeat(100),
            b"",
        )
        .unwrap();
    }
    s.close().unwrap();
    drop(s);
    let s = Store::open(cfg()).unwrap();
    assert_eq!(
        counter(&s, "journal_open_scan_bytes"),
        0,
        "clean close: no scan"
    );
    for i in 200..300u32 {
        s.put(
            b"b",
            format!("k{i}").as_bytes(),
            &i.to_le_bytes().repeat(100),
            b"",
        )
        .unwrap();
    }
    s.simulate_crash();
    let s = Store::open(cfg()).unwrap();
    assert!(
        counter(&s, "journal_open_scan_bytes") > 0,
        "after a crash: scan"
    );
    for i in 0..300u32 {
        let o = s.get(b"b", format!("k{i}").as_bytes()).unwrap().unwrap();
        assert_eq!(o.value, i.to_le_bytes().repeat(100));
    }
}

/// A crash while a store is being created (its first journal file made,
/// the journal manifest not yet written) leaves a store that opens as new,
/// not one that asks for a repair (seen after `kill -9` of a node that was
/// creating a vnode).
#[test]
fn a_store_whose_creation_was_interrupted_opens_as_new() {
    let d = tempfile::tempdir().unwrap();
    open(d.path()).close().unwrap();
    let journal = d.path().join("journal");
    std::fs::remove_file(journal.join("MANIFEST")).unwrap();
    let s = open(d.path());
    s.put(b"b", b"k", b"v", b"").unwrap();
    s.close().unwrap();
    drop(s);
    // With a record in it the file is data: a missing manifest is damage.
    std::fs::remove_file(journal.join("MANIFEST")).unwrap();
    let e = Store::open(Config::test_min(d.path())).unwrap_err();
    assert!(e.to_string().contains("repair"), "{e}");
}

/// The same for the ledger: a store cut short after its STORE marker and
/// journal but before its ledger manifest opens as new.
#[test]
fn a_store_cut_short_before_its_ledger_manifest_opens_as_new() {
    let d = tempfile::tempdir().unwrap();
    open(d.path()).close().unwrap();
    let ledger = d.path().join("ledger");
    let ssts = std::fs::read_dir(&ledger)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        })
        .count();
    assert_eq!(ssts, 0, "nothing flushed yet");
    std::fs::remove_file(ledger.join("MANIFEST")).unwrap();
    let s = open(d.path());
    s.put(b"b", b"k", b"v", b"").unwrap();
    assert_eq!(
        s.get(b"b", b"k").unwrap().map(|o| o.value),
        Some(b"v".to_vec())
    );
}

fn counter(s: &Store, name: &str) -> u64 {
    s.stats()
        .counter(name)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// Writes 200 keys, closes (which persists the memtable) and reopens, so
/// every key is in an SST file.
fn filled(cfg: Config) -> Store {
    let s = Store::open(cfg.clone()).expect("open store");
    for i in 0..200u32 {
        s.put(b"b", format!("k{i:04}").as_bytes(), b"v", b"m")
            .expect("put");
    }
    s.close().expect("close");
    drop(s);
    let s = Store::open(cfg).expect("reopen store");
    assert_eq!(s.stats().memtable_entries, 0, "every key in a file");
    s
}

/// HEADs read a ledger data block from its file once and then from the
/// block cache; with the cache off every HEAD reads its file; two stores
/// given one cache share its budget.
#[test]
fn point_lookups_go_through_the_block_cache() {
    let d = tempfile::tempdir().unwrap();
    let s = filled(Config::test_min(d.path().join("on")));
    for _ in 0..3 {
        for i in 0..200u32 {
            assert!(s
                .head(b"b", format!("k{i:04}").as_bytes())
                .unwrap()
                .is_some());
        }
    }
    let (hits, misses) = (
        counter(&s, "ledger_block_cache_hits"),
        counter(&s, "ledger_block_cache_misses"),
    );
    assert_eq!(hits + misses, 600, "one lookup per HEAD");
    assert!(misses > 0 && misses < 200, "each block read once: {misses}");
    assert_eq!(counter(&s, "sst_block_read_count"), misses);
    let (capacity, held) = s.stats().block_cache;
    assert_eq!(capacity, 256 * 1024);
    assert!(held > 0 && held <= capacity, "{held}");

    let mut off = Config::test_min(d.path().join("off"));
    off.block_cache_bytes = 0;
    let s = filled(off);
    for i in 0..200u32 {
        assert!(s
            .head(b"b", format!("k{i:04}").as_bytes())
            .unwrap()
            .is_some());
    }
    assert_eq!(counter(&s, "ledger_block_cache_hits"), 0);
    assert_eq!(counter(&s, "sst_block_read_count"), 200);
    assert_eq!(s.stats().block_cache, (0, 0));

    let shared = basalt_engine::BlockCache::new(1 << 20).unwrap();
    let mut stores = Vec::new();
    for name in ["s1", "s2"] {
        let mut c = Config::test_min(d.path().join(name));
        c.block_cache = Some(shared.clone());
        let s = filled(c);
        assert!(s.head(b"b", b"k0001").unwrap().is_some());
        stores.push(s);
    }
    let before = shared.bytes();
    assert!(before > 0);
    assert_eq!(stores[0].stats().block_cache, (1 << 20, before));
    stores.truncate(1);
    // The second store's readers left with it, and their blocks too.
    assert!(shared.bytes() < before, "{} !< {before}", shared.bytes());
}

/// Each GET records its whole call (`op_get`) and the part of it outside
/// the recorded reads and lock waits (`op_get_unwaited`), which is never
/// more than the whole.
#[test]
fn a_get_splits_its_time_into_recorded_waits_and_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let s = filled(Config::test_min(d.path().to_path_buf()));
    for i in 0..200u32 {
        assert!(s
            .get(b"b", format!("k{i:04}").as_bytes())
            .unwrap()
            .is_some());
    }
    assert_eq!(counter(&s, "op_get_count"), 200);
    assert_eq!(counter(&s, "op_get_unwaited_count"), 200);
    let (whole, rest) = (counter(&s, "op_get_ns"), counter(&s, "op_get_unwaited_ns"));
    let waits = counter(&s, "sst_block_read_ns")
        + counter(&s, "journal_value_read_ns")
        + counter(&s, "wait_journal_lock_ns");
    assert!(waits > 0, "the GETs read files");
    assert_eq!(rest, whole - waits, "whole {whole}, waits {waits}");
}

/// Drops the page cache's copy of every file under `dir`. Each file is
/// synced first: `DONTNEED` only drops clean pages, and a closed store
/// without sync may leave its last writes dirty (or under writeback) for
/// seconds on a busy machine, which made a no-wait read hit.
fn drop_page_cache(dir: &std::path::Path) {
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            drop_page_cache(&p);
        } else if let Ok(f) = std::fs::File::open(&p) {
            f.sync_all().expect("sync before dropping the cache");
            let _ = rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed);
        }
    }
}

#[test]
fn a_no_wait_get_answers_from_memory_and_misses_what_only_the_disk_has() {
    use basalt_engine::Cached;
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    let value = vec![9u8; 1000];
    for i in 0..200u32 {
        s.put(b"b", format!("k{i}").as_bytes(), &value, b"m")
            .unwrap();
    }
    let want = s.get(b"b", b"k7").unwrap();
    match s.get_cached(b"b", b"k7").unwrap() {
        Cached::Hit(got) => assert_eq!(got, want, "a hit is the ordinary answer"),
        Cached::Miss => {
            eprintln!("SKIPPED: this kernel or file system refuses RWF_NOWAIT reads, so every no-wait read misses; only that was checked");
            return;
        }
    }
    assert_eq!(
        s.head_cached(b"b", b"k7").unwrap(),
        Cached::Hit(s.head(b"b", b"k7").unwrap())
    );
    assert_eq!(s.get_cached(b"b", b"absent").unwrap(), Cached::Hit(None));
    s.close().unwrap();
    drop(s);

    let s = open(d.path());
    drop_page_cache(d.path());
    let before = s.stats().counter("get_nowait_misses").unwrap();
    assert_eq!(
        s.get_cached(b"b", b"k8").unwrap(),
        Cached::Miss,
        "the value is only on disk"
    );
    assert_eq!(s.stats().counter("get_nowait_misses").unwrap(), before + 1);
    let gets = s.stats().counter("gets").unwrap();
    let got = s.get(b"b", b"k8").unwrap();
    assert_eq!(got.as_ref().map(|o| &o.value), Some(&value));
    assert_eq!(
        s.stats().counter("gets").unwrap(),
        gets + 1,
        "a miss is not a GET"
    );
    // Once read, the value is answered from memory. Under CI's parallel
    // load the kernel may evict the pages between the two calls (seen
    // once in a full run, never alone in 10): read again, up to 3 times.
    let mut cached = s.get_cached(b"b", b"k8").unwrap();
    for _ in 0..3 {
        if cached != Cached::Miss {
            break;
        }
        eprintln!("k8's pages were evicted between the read and the no-wait read; reading again");
        s.get(b"b", b"k8").unwrap();
        cached = s.get_cached(b"b", b"k8").unwrap();
    }
    assert_eq!(cached, Cached::Hit(got));
}

#[test]
fn stores_sharing_a_memtable_budget_flush_early_and_give_it_back() {
    use basalt_engine::MemtableBudget;
    let own = 4 << 20;
    let budget = MemtableBudget::new(1 << 20).unwrap();
    let d = tempfile::tempdir().unwrap();
    let open_with = |name: &str, budget: Option<MemtableBudget>| {
        Store::open(Config {
            memtable_bytes: own,
            memtable_budget: budget,
            ..Config::test_min(d.path().join(name))
        })
        .unwrap()
    };
    let fill = |s: &Store, n: u32| {
        let meta = vec![7u8; 1000];
        for i in 0..n {
            s.put(b"b", format!("k{i:06}").as_bytes(), b"v", &meta)
                .unwrap();
        }
        s.settle().unwrap();
    };
    let flushes = |s: &Store| s.stats().counter("ledger_flushes").unwrap();
    // A holds ~0.6 MiB, under the budget: nothing is frozen.
    let a = open_with("a", Some(budget.clone()));
    fill(&a, 600);
    assert_eq!(flushes(&a), 0);
    assert_eq!(budget.used() as u64, a.stats().memtable_bytes);
    // B's writes spend the budget: B flushes long before its own 4 MiB.
    let b = open_with("b", Some(budget.clone()));
    fill(&b, 2_000);
    assert!(flushes(&b) >= 1, "B flushed for the budget");
    assert!(budget.freezes() >= 1);
    let held = a.stats().memtable_bytes + b.stats().memtable_bytes;
    assert_eq!(
        budget.used() as u64,
        held,
        "the budget counts what the memtables hold"
    );
    assert!(
        b.stats().memtable_bytes <= MemtableBudget::freeze_floor(own) as u64,
        "B kept at most one floor after its flushes: {}",
        b.stats().memtable_bytes
    );
    // The same writes without a budget: no flush at all.
    let c = open_with("c", None);
    fill(&c, 2_000);
    assert_eq!(flushes(&c), 0, "only the budget made B flush");
    // Closed stores give their bytes back.
    for s in [a, b] {
        s.close().unwrap();
        drop(s);
    }
    assert_eq!(budget.used(), 0);
}

#[test]
fn a_write_that_might_wait_says_so_before_it_is_made() {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(Config {
        journal_file_bytes: 64 * 1024,
        ..Config::test_min(d.path().join("a"))
    })
    .unwrap();
    assert!(
        !s.write_would_wait(100),
        "an idle store without sync writes at memory speed"
    );
    assert!(
        s.write_would_wait(64 * 1024),
        "a write that rolls the active journal file waits for an fsync"
    );
    // Incompressible, so the record takes its size in the journal.
    let value = incompressible(40_000);
    s.put(b"b", b"k", &value, b"m").unwrap();
    assert!(
        s.write_would_wait(30_000),
        "the active file's room counts what is already in it"
    );
    s.close().unwrap();
    assert!(
        s.write_would_wait(100),
        "a closed store's error is a writer's"
    );

    let synced = Store::open(Config {
        sync: SyncStrategy::Sync,
        ..Config::test_min(d.path().join("b"))
    })
    .unwrap();
    assert!(
        synced.write_would_wait(100),
        "a synced write waits for its fsync"
    );

    let inline = Store::open(Config {
        background_merges: false,
        ..Config::test_min(d.path().join("c"))
    })
    .unwrap();
    assert!(
        inline.write_would_wait(100),
        "without clerks a writer does the ledger's flushes itself"
    );
}

/// A node's `journal_file_mb` may change between restarts: files already
/// written keep their size, new ones roll at the new one, and every record
/// reads back whichever file holds it.
#[test]
fn the_journal_file_size_can_change_between_opens() {
    let d = tempfile::tempdir().unwrap();
    let open = |file_bytes: u64| {
        Store::open(Config {
            journal_file_bytes: file_bytes,
            ..Config::test_min(d.path())
        })
        .unwrap()
    };
    let value = |i: usize| {
        let mut v = incompressible(20_000);
        v[..8].copy_from_slice(&(i as u64).to_le_bytes());
        v
    };
    let key = |i: usize| format!("k{i:03}").into_bytes();
    let check = |s: &Store, n: usize| {
        for i in 0..n {
            let o = s.get(b"b", &key(i)).unwrap();
            assert_eq!(o.map(|o| o.value), Some(value(i)), "key {i}");
        }
    };
    let files = |s: &Store| s.stats().journal_files.len();

    let s = open(256 * 1024);
    for i in 0..30 {
        s.put(b"b", &key(i), &value(i), b"").unwrap();
    }
    let big_files = files(&s);
    s.close().unwrap();
    drop(s);

    let s = open(32 * 1024);
    check(&s, 30);
    for i in 30..60 {
        s.put(b"b", &key(i), &value(i), b"").unwrap();
    }
    // 30 records of ~20 KB roll a 32 KiB file about every second record.
    let small_files = files(&s) - big_files;
    assert!(
        small_files >= 10,
        "{small_files} files for 30 records at 32 KiB (before: {big_files})"
    );
    check(&s, 60);
    s.close().unwrap();
    drop(s);

    let s = open(1024 * 1024);
    check(&s, 60);
    s.close().unwrap();
}
