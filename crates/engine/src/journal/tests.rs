//! Tests of the journal as a whole: appends, rolls, recovery, group commit, dump.

use super::*;
use basalt_testkit::page_cached;
use std::sync::atomic::Ordering;

fn opts(file_bytes: u64) -> JournalOptions {
    JournalOptions::for_tests(file_bytes)
}

fn key_of(i: u64) -> Vec<u8> {
    crate::key::object(b"bucket", format!("key{i}").as_bytes())
}

fn value_of(i: u64) -> Vec<u8> {
    format!("value-{i}-")
        .repeat((i % 7 + 1) as usize)
        .into_bytes()
}

fn append_n(j: &Journal, from: u64, to: u64) {
    for i in from..=to {
        let k = key_of(i);
        let v = value_of(i);
        j.append(&NewRecord {
            sqn: i,
            kind: if i % 10 == 0 {
                RecordKind::Delete
            } else {
                RecordKind::Put
            },
            key: &k,
            last_modified_us: i * 1000,
            expires_at: 0,
            metadata: b"m",
            value: &v,
            index: &[],
        })
        .unwrap();
    }
}

fn check(j: &Journal, i: u64) {
    let r = j.fetch(i, &key_of(i)).unwrap().unwrap();
    assert_eq!(r.sqn, i);
    assert_eq!(r.value, value_of(i));
    assert_eq!(r.metadata, b"m");
    assert_eq!(r.last_modified_us, i * 1000);
}

fn replay_sqns(j: &Journal, after: u64) -> Vec<u64> {
    let mut got = Vec::new();
    let n = j
        .replay(after, &mut |r| {
            assert_eq!(r.value, value_of(r.sqn));
            got.push(r.sqn);
            Ok(())
        })
        .unwrap();
    assert_eq!(n as usize, got.len());
    got
}

fn stat(s: &Stats, c: &std::sync::atomic::AtomicU64) -> u64 {
    let _ = s;
    c.load(Ordering::Relaxed)
}

/// Offset of record `sqn` in data file `path`, found by scanning.
fn offset_of(path: &Path, sqn: u64) -> u64 {
    let f = File::open(path).unwrap();
    let size = f.metadata().unwrap().len();
    let (idx, _) = file::build_index(&f, path, size).unwrap();
    file::index_lookup(&idx, sqn).unwrap()
}

fn flip_byte(path: &Path, at: u64) {
    let mut b = fs::read(path).unwrap();
    b[at as usize] ^= 0x5a;
    fs::write(path, b).unwrap();
}

#[test]
fn round_trip_in_one_file() {
    let d = tempfile::tempdir().unwrap();
    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), opts(1 << 20), stats.clone()).unwrap();
    assert_eq!(j.last_sqn(), 0);
    assert!(j.fetch(1, &key_of(1)).unwrap().is_none());
    append_n(&j, 1, 50);
    assert_eq!(j.last_sqn(), 50);
    for i in 1..=50 {
        check(&j, i);
    }
    assert_eq!(
        j.fetch(10, &key_of(10)).unwrap().unwrap().kind,
        RecordKind::Delete
    );
    assert!(j.fetch(51, &key_of(51)).unwrap().is_none());
    // Wrong key for an existing sqn is corruption, not data.
    assert!(j.fetch(5, &key_of(6)).unwrap_err().is_corruption());
    assert_eq!(replay_sqns(&j, 0), (1..=50).collect::<Vec<_>>());
    assert_eq!(replay_sqns(&j, 45), (46..=50).collect::<Vec<_>>());
    assert_eq!(stat(&stats, &stats.journal_records_written), 50);
    // Non-ascending sqn is refused.
    let k = key_of(1);
    let bad = NewRecord {
        sqn: 50,
        kind: RecordKind::Put,
        key: &k,
        last_modified_us: 0,
        expires_at: 0,
        metadata: b"",
        value: b"",
        index: b"",
    };
    assert!(matches!(j.append(&bad), Err(Error::InvalidInput(_))));
    let files = j.files();
    assert_eq!(files.len(), 1);
    assert!(files[0].active);
    assert_eq!((files[0].first_sqn, files[0].last_sqn), (1, 50));
    j.close().unwrap();
    assert!(matches!(
        j.append(&NewRecord { sqn: 51, ..bad }),
        Err(Error::Closed(_))
    ));
}

#[test]
fn rolls_and_fetches_from_closed_and_active_files() {
    let d = tempfile::tempdir().unwrap();
    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), opts(1024), stats.clone()).unwrap();
    append_n(&j, 1, 200);
    let files = j.files();
    assert!(files.len() > 3, "{files:?}");
    assert_eq!(stat(&stats, &stats.journal_rolls), files.len() as u64 - 1);
    for w in files.windows(2) {
        assert!(w[0].last_sqn < w[1].first_sqn || w[1].first_sqn == 0);
        assert!(!w[0].active);
    }
    for f in &files[..files.len() - 1] {
        assert!(d.path().join(file::jix_name(f.file_no)).exists());
    }
    for i in 1..=200 {
        check(&j, i);
    }
    assert_eq!(replay_sqns(&j, 0), (1..=200).collect::<Vec<_>>());
    assert_eq!(replay_sqns(&j, 123), (124..=200).collect::<Vec<_>>());
    // Rolls mark everything as synced.
    let before = stat(&stats, &stats.journal_syncs);
    j.sync_to(files[1].last_sqn).unwrap();
    assert_eq!(stat(&stats, &stats.journal_syncs), before);
}

/// Bytes of disk `path` has allocated (`st_blocks` × 512).
fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).unwrap().blocks() * 512
}

/// Whether `dir`'s file system reserves blocks with `fallocate(KEEP_SIZE)`.
fn fallocate_works(dir: &Path) -> bool {
    let p = dir.join("probe");
    let f = File::create(&p).unwrap();
    let flags = rustix::fs::FallocateFlags::KEEP_SIZE;
    let ok = rustix::fs::fallocate(&f, flags, 0, 1 << 20).is_ok() && allocated(&p) >= 1 << 20;
    fs::remove_file(&p).unwrap();
    ok
}

/// Every new active file (the first, the spare made ahead of a roll, one a
/// roll makes itself) has `file_bytes` of blocks reserved and its size
/// unchanged; a file rolled early (a backup's roll) gives the rest back,
/// and its records stay readable; with the option off nothing is reserved.
#[test]
fn new_active_files_are_preallocated_and_early_rolls_give_the_rest_back() {
    let d = tempfile::tempdir().unwrap();
    if !fallocate_works(d.path()) {
        eprintln!("skipped: this file system does not preallocate");
        return;
    }
    let file_bytes = 256 * 1024;
    let j = Journal::open(d.path(), opts(file_bytes), Arc::new(Stats::default())).unwrap();
    let first = j.files()[0].path.clone();
    assert!(allocated(&first) >= file_bytes, "{}", allocated(&first));
    assert_eq!(fs::metadata(&first).unwrap().len(), file::JNL_HEADER_LEN);
    append_n(&j, 1, 10);
    let (closed, _) = j.roll_and_list().unwrap();
    assert!(allocated(&first) < file_bytes / 4, "{}", allocated(&first));
    assert_eq!(closed.last().map(|c| c.path.clone()), Some(first));
    // The roll made the next file itself (no spare yet).
    let second = j.files()[1].path.clone();
    assert!(allocated(&second) >= file_bytes);
    let mut i = 10;
    while j.files()[1].size_bytes < file_bytes / 2 {
        i += 1;
        append_n(&j, i, i);
    }
    assert!(j.prepare_next_file().unwrap());
    let listed: Vec<PathBuf> = j.files().into_iter().map(|f| f.path).collect();
    let spare: Vec<PathBuf> = fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jnl") && !listed.contains(p))
        .collect();
    assert_eq!(spare.len(), 1, "{spare:?}");
    assert!(allocated(&spare[0]) >= file_bytes);
    for k in 1..=i {
        check(&j, k);
    }
    drop(j);
    let off = tempfile::tempdir().unwrap();
    let plain = JournalOptions {
        preallocate: false,
        ..opts(file_bytes)
    };
    let j = Journal::open(off.path(), plain, Arc::new(Stats::default())).unwrap();
    assert!(allocated(&j.files()[0].path) < file_bytes / 4);
}

#[test]
fn oversize_record_rolls_without_empty_files() {
    let d = tempfile::tempdir().unwrap();
    let j = Journal::open(d.path(), opts(100), Arc::new(Stats::default())).unwrap();
    let big = vec![7u8; 1000];
    let k = key_of(1);
    for sqn in 1..=3 {
        j.append(&NewRecord {
            sqn,
            kind: RecordKind::Put,
            key: &k,
            last_modified_us: 0,
            expires_at: 0,
            metadata: b"",
            value: &big,
            index: &[],
        })
        .unwrap();
    }
    let files = j.files();
    assert_eq!(files.len(), 4);
    assert_eq!(files[3].first_sqn, 0);
    for (i, f) in files[..3].iter().enumerate() {
        assert_eq!(f.first_sqn, i as u64 + 1);
        assert_eq!(f.last_sqn, i as u64 + 1);
    }
    assert_eq!(j.fetch(2, &k).unwrap().unwrap().value, big);
}

#[test]
fn reopen_returns_everything() {
    let d = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(d.path(), opts(2048), Arc::new(Stats::default())).unwrap();
        append_n(&j, 1, 120);
        j.close().unwrap();
    }
    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), opts(2048), stats.clone()).unwrap();
    assert_eq!(j.last_sqn(), 120);
    for i in 1..=120 {
        check(&j, i);
    }
    assert_eq!(replay_sqns(&j, 0), (1..=120).collect::<Vec<_>>());
    assert_eq!(replay_sqns(&j, 60), (61..=120).collect::<Vec<_>>());
    assert_eq!(stat(&stats, &stats.journal_corrupt_records), 0);
    assert_eq!(stat(&stats, &stats.journal_truncated_bytes), 0);
    append_n(&j, 121, 150);
    drop(j);
    // Reopen without close (process crash: the writes reached the kernel).
    let j = Journal::open(d.path(), opts(2048), Arc::new(Stats::default())).unwrap();
    assert_eq!(j.last_sqn(), 150);
    assert_eq!(replay_sqns(&j, 0), (1..=150).collect::<Vec<_>>());
}

#[test]
fn torn_tail_is_truncated() {
    let d = tempfile::tempdir().unwrap();
    let active_path;
    {
        let j = Journal::open(d.path(), opts(1 << 20), Arc::new(Stats::default())).unwrap();
        append_n(&j, 1, 20);
        active_path = j.files()[0].path.clone();
        j.close().unwrap();
    }
    let good_len = offset_of(&active_path, 20);
    let full = fs::metadata(&active_path).unwrap().len();
    // Cut the last record in half and append garbage.
    let mut b = fs::read(&active_path).unwrap();
    b.truncate(((good_len + full) / 2) as usize);
    b.extend_from_slice(&[0xAB; 37]);
    let torn_len = b.len() as u64;
    fs::write(&active_path, b).unwrap();

    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), opts(1 << 20), stats.clone()).unwrap();
    assert_eq!(j.last_sqn(), 19);
    assert_eq!(
        stat(&stats, &stats.journal_truncated_bytes),
        torn_len - good_len
    );
    assert_eq!(fs::metadata(&active_path).unwrap().len(), good_len);
    for i in 1..=19 {
        check(&j, i);
    }
    assert!(j.fetch(20, &key_of(20)).unwrap().is_none());
    append_n(&j, 20, 30);
    drop(j);
    let j = Journal::open(d.path(), opts(1 << 20), stats.clone()).unwrap();
    assert_eq!(replay_sqns(&j, 0), (1..=30).collect::<Vec<_>>());
}

#[test]
fn corrupt_record_in_active_file_is_skipped() {
    let d = tempfile::tempdir().unwrap();
    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), opts(1 << 20), stats.clone()).unwrap();
    append_n(&j, 1, 20);
    let path = j.files()[0].path.clone();
    // Damage record 7's value while the journal is open.
    flip_byte(&path, offset_of(&path, 7) + 60);
    assert!(j.fetch(7, &key_of(7)).unwrap_err().is_corruption());
    check(&j, 6);
    check(&j, 8);
    let mut want: Vec<u64> = (1..=20).collect();
    want.retain(|s| *s != 7);
    assert_eq!(replay_sqns(&j, 0), want);
    assert!(stat(&stats, &stats.journal_corrupt_records) >= 2);
    drop(j);

    // After reopening, the scan skips it (not a torn tail) and fetch still
    // reports it as corrupt.
    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), opts(1 << 20), stats.clone()).unwrap();
    assert_eq!(stat(&stats, &stats.journal_corrupt_records), 1);
    assert_eq!(stat(&stats, &stats.journal_truncated_bytes), 0);
    assert_eq!(j.last_sqn(), 20);
    assert!(j.fetch(7, &key_of(7)).unwrap_err().is_corruption());
    check(&j, 6);
    check(&j, 8);
    assert_eq!(replay_sqns(&j, 0), want);
    assert_eq!(replay_sqns(&j, 7), (8..=20).collect::<Vec<_>>());
    append_n(&j, 21, 22);
    check(&j, 22);
}

#[test]
fn corrupt_record_in_closed_file_is_skipped() {
    let d = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap();
        append_n(&j, 1, 100);
        j.close().unwrap();
    }
    let j = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap();
    let files = j.files();
    let target = &files[1];
    assert!(!target.active);
    let victim = target.first_sqn + 1;
    assert!(victim < target.last_sqn);
    drop(j);
    // Damage the length field of the record.
    flip_byte(&target.path, offset_of(&target.path, victim) + 9);

    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), opts(1024), stats.clone()).unwrap();
    let err = j.fetch(victim, &key_of(victim)).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    check(&j, victim - 1);
    check(&j, victim + 1);
    let want: Vec<u64> = (1..=100).filter(|s| *s != victim).collect();
    assert_eq!(replay_sqns(&j, 0), want);
    assert_eq!(
        replay_sqns(&j, victim - 1),
        (victim + 1..=100).collect::<Vec<_>>()
    );
    assert!(stat(&stats, &stats.journal_corrupt_records) >= 2);
}

#[test]
fn missing_or_damaged_index_is_rebuilt() {
    let d = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap();
        append_n(&j, 1, 60);
        j.close().unwrap();
    }
    let jix1 = d.path().join(file::jix_name(1));
    let jix2 = d.path().join(file::jix_name(2));
    let original = fs::read(&jix1).unwrap();
    fs::remove_file(&jix1).unwrap();
    flip_byte(&jix2, 14);
    let j = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap();
    assert_eq!(fs::read(&jix1).unwrap(), original);
    assert!(file::decode_index(&fs::read(&jix2).unwrap(), u64::MAX).is_ok());
    for i in 1..=60 {
        check(&j, i);
    }
}

#[test]
fn missing_or_damaged_manifest() {
    let d = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap();
        append_n(&j, 1, 80);
        j.close().unwrap();
    }
    let mpath = d.path().join(MANIFEST_NAME);
    let good = fs::read(&mpath).unwrap();

    // Damaged.
    flip_byte(&mpath, 10);
    let err = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Manifest {
                what: "journal",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("repair"));

    // Missing.
    fs::remove_file(&mpath).unwrap();
    let err = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap_err();
    assert!(matches!(err, Error::Manifest { .. }), "{err}");

    // Repaired.
    let repair = JournalOptions {
        repair_manifest: true,
        ..opts(1024)
    };
    let j = Journal::open(d.path(), repair, Arc::new(Stats::default())).unwrap();
    assert_eq!(j.last_sqn(), 80);
    assert_eq!(replay_sqns(&j, 0), (1..=80).collect::<Vec<_>>());
    for i in 1..=80 {
        check(&j, i);
    }
    append_n(&j, 81, 120);
    drop(j);
    let j = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap();
    assert_eq!(replay_sqns(&j, 0), (1..=120).collect::<Vec<_>>());
    drop(j);

    // A listed file that is missing.
    fs::write(&mpath, &good).unwrap();
    fs::remove_file(d.path().join(file::jnl_name(2))).unwrap();
    let err = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap_err();
    assert!(matches!(err, Error::Manifest { .. }), "{err}");
    assert!(err.to_string().contains("00000002.jnl"), "{err}");
}

#[test]
fn unlisted_leftover_file_is_ignored_and_overwritten() {
    let d = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(d.path(), opts(1 << 20), Arc::new(Stats::default())).unwrap();
        append_n(&j, 1, 5);
        j.close().unwrap();
    }
    // An interrupted roll left file 2 behind.
    fs::write(d.path().join(file::jnl_name(2)), file::jnl_header()).unwrap();
    let j = Journal::open(d.path(), opts(300), Arc::new(Stats::default())).unwrap();
    assert_eq!(j.files().len(), 1);
    append_n(&j, 6, 10);
    assert!(j.files().len() >= 2);
    assert_eq!(replay_sqns(&j, 0), (1..=10).collect::<Vec<_>>());
}

#[test]
fn a_file_made_ahead_becomes_the_next_active_file() {
    let d = tempfile::tempdir().unwrap();
    let j = Journal::open(d.path(), opts(2000), Arc::new(Stats::default())).unwrap();
    append_n(&j, 1, 2);
    assert!(!j.prepare_next_file().unwrap(), "not before half the file");
    while j.files().last().unwrap().size_bytes < 1000 {
        let next = j.last_sqn() + 1;
        append_n(&j, next, next);
    }
    assert_eq!(j.files().len(), 1);
    assert!(j.prepare_next_file().unwrap());
    assert!(!j.prepare_next_file().unwrap(), "one spare at a time");
    let spare_no = j.spare.lock().as_ref().unwrap().file_no;
    assert!(d.path().join(file::jnl_name(spare_no)).exists());
    while j.files().len() == 1 {
        let next = j.last_sqn() + 1;
        append_n(&j, next, next);
    }
    assert_eq!(
        j.files().last().unwrap().file_no,
        spare_no,
        "the roll took the spare"
    );
    assert!(j.spare.lock().is_none());
    // The rolled file's index was written (without an fsync) and loads.
    let last = j.last_sqn();
    append_n(&j, last + 1, last + 40);
    let total = j.last_sqn();
    drop(j);
    let j = Journal::open(d.path(), opts(2000), Arc::new(Stats::default())).unwrap();
    assert_eq!(replay_sqns(&j, 0), (1..=total).collect::<Vec<_>>());
    for i in 1..=total {
        if i % 10 != 0 {
            check(&j, i);
        }
    }
}

#[test]
fn an_unused_spare_is_removed_at_close_or_at_open() {
    let d = tempfile::tempdir().unwrap();
    let spare_path = |j: &Journal| j.spare.lock().as_ref().map(|s| s.path.clone());
    // Dropped without a close (a crash): the next open removes the spare.
    let j = Journal::open(d.path(), opts(4000), Arc::new(Stats::default())).unwrap();
    append_n(&j, 1, 30);
    assert_eq!(j.files().len(), 1);
    assert!(j.prepare_next_file().unwrap());
    let left = spare_path(&j).unwrap();
    drop(j);
    assert!(left.exists());
    let j = Journal::open(d.path(), opts(4000), Arc::new(Stats::default())).unwrap();
    assert!(!left.exists(), "an unlisted spare is removed at open");
    assert_eq!(replay_sqns(&j, 0), (1..=30).collect::<Vec<_>>());
    assert!(j.prepare_next_file().unwrap());
    let spare = spare_path(&j).unwrap();
    j.close().unwrap();
    assert!(!spare.exists(), "close removes the spare");
    assert!(!j.prepare_next_file().unwrap(), "none after close");
    drop(j);
    let j = Journal::open(d.path(), opts(4000), Arc::new(Stats::default())).unwrap();
    append_n(&j, 31, 200);
    assert!(j.files().len() > 2);
    assert_eq!(replay_sqns(&j, 0), (1..=200).collect::<Vec<_>>());
}

#[test]
fn group_commit_shares_fsyncs() {
    let d = tempfile::tempdir().unwrap();
    let stats = Arc::new(Stats::default());
    let j = Arc::new(Journal::open(d.path(), opts(1 << 30), stats.clone()).unwrap());
    let next_sqn = Arc::new(Mutex::new(0u64));
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 40;
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let j = Arc::clone(&j);
            let next_sqn = Arc::clone(&next_sqn);
            std::thread::spawn(move || {
                for _ in 0..PER_THREAD {
                    let sqn = {
                        // The store's write lock: appends are serialised.
                        let mut g = next_sqn.lock();
                        *g += 1;
                        let k = key_of(*g);
                        let v = value_of(*g);
                        j.append(&NewRecord {
                            sqn: *g,
                            kind: RecordKind::Put,
                            key: &k,
                            last_modified_us: *g * 1000,
                            expires_at: 0,
                            metadata: b"m",
                            value: &v,
                            index: &[],
                        })
                        .unwrap();
                        *g
                    };
                    j.sync_to(sqn).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let calls = THREADS * PER_THREAD;
    let syncs = stat(&stats, &stats.journal_syncs);
    let shared = stat(&stats, &stats.journal_syncs_shared);
    assert_eq!(syncs + shared, calls);
    assert!(syncs >= 1);
    for i in 1..=calls {
        check(&j, i);
    }
    assert_eq!(replay_sqns(&j, 0), (1..=calls).collect::<Vec<_>>());
}

#[test]
fn sync_to_already_synced_is_shared() {
    let d = tempfile::tempdir().unwrap();
    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), opts(1 << 20), stats.clone()).unwrap();
    append_n(&j, 1, 3);
    j.sync_to(3).unwrap();
    j.sync_to(2).unwrap();
    assert_eq!(stat(&stats, &stats.journal_syncs), 1);
    assert_eq!(stat(&stats, &stats.journal_syncs_shared), 1);
    assert!(matches!(j.sync_to(10), Err(Error::InvalidInput(_))));
}

#[test]
fn dump_each_file_kind() {
    let d = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap();
        append_n(&j, 1, 40);
        j.close().unwrap();
    }
    let jnl = d.path().join(file::jnl_name(1));
    let jix = d.path().join(file::jix_name(1));
    let man = d.path().join(MANIFEST_NAME);
    for (p, kind) in [
        (&jnl, JournalFileKind::Data),
        (&jix, JournalFileKind::Index),
        (&man, JournalFileKind::Manifest),
    ] {
        let head = fs::read(p).unwrap();
        assert!(is_journal_file(&head));
        assert_eq!(journal_file_kind(&head), Some(kind));
        let mut out = Vec::new();
        let rep = dump(p, &mut out, true).unwrap();
        assert_eq!(rep.kind, kind);
        assert!(rep.entries > 0);
        assert_eq!(rep.corrupt_regions, 0);
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("CORRUPT"), "{text}");
        if kind == JournalFileKind::Data {
            assert!(text.contains("sqn=1 put key=bucket/key1"), "{text}");
        }
    }
    assert!(!is_journal_file(b"SSTABLE1"));
    assert!(!is_journal_file(b"BSLT"));

    // Damage one record of the data file, the index and the manifest.
    flip_byte(&jnl, offset_of(&jnl, 2) + 30);
    flip_byte(&jix, 25);
    flip_byte(&man, 22);
    for p in [&jnl, &jix, &man] {
        let mut out = Vec::new();
        let rep = dump(p, &mut out, false).unwrap();
        assert_eq!(rep.corrupt_regions, 1, "{}", p.display());
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("CORRUPT"), "{text}");
    }
    let junk = d.path().join("junk");
    fs::write(&junk, b"hello world").unwrap();
    assert!(dump(&junk, &mut Vec::new(), true).is_err());
}

#[test]
fn journal_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Journal>();
}

#[test]
fn value_reads_agree_in_every_read_mode() {
    let d = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap();
        append_n(&j, 1, 120);
        j.close().unwrap();
    }
    let modes = [false, true].into_iter().flat_map(|a| {
        [false, true]
            .into_iter()
            .flat_map(move |b| [false, true].into_iter().map(move |c| (a, b, c)))
    });
    for (one_read, fadvise_random, skip_active_lock) in modes {
        for (direct_reads, cached) in [(false, false), (true, false), (true, true)] {
            {
                let o = JournalOptions {
                    one_read,
                    fadvise_random,
                    skip_active_lock,
                    direct_reads,
                    value_cache: cached.then(|| ValueCache::new(1 << 20)).flatten(),
                    ..opts(1024)
                };
                let j = Journal::open(d.path(), o, Arc::new(Stats::default())).unwrap();
                assert!(j.files().len() > 3);
                for i in 1..=120 {
                    check(&j, i);
                    assert!(j.fetch(i, &key_of(i + 1)).unwrap_err().is_corruption());
                }
                assert!(j.fetch(121, &key_of(121)).unwrap().is_none());
                let v = j.view();
                for i in 1..=120 {
                    assert_eq!(v.fetch(i, &key_of(i)).unwrap().unwrap().value, value_of(i));
                }
            }
        }
    }
}

#[test]
fn fetch_of_a_closed_record_does_not_wait_for_the_active_lock() {
    let d = tempfile::tempdir().unwrap();
    let j = Arc::new(Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap());
    append_n(&j, 1, 100);
    let files = j.files();
    let closed_sqn = files[0].last_sqn;
    let active_sqn = files.last().unwrap().last_sqn;
    assert!(closed_sqn < active_sqn);
    // Hold the active lock as a long append or roll would.
    let held = j.active.lock();
    let (tx, rx) = std::sync::mpsc::channel();
    let j2 = Arc::clone(&j);
    let reader = std::thread::spawn(move || {
        let r = j2.fetch(closed_sqn, &key_of(closed_sqn)).unwrap().unwrap();
        tx.send(r.sqn).unwrap();
        // A record of the active file waits for the lock, as before.
        j2.fetch(active_sqn, &key_of(active_sqn))
            .unwrap()
            .unwrap()
            .sqn
    });
    let got = rx.recv_timeout(std::time::Duration::from_secs(10));
    assert_eq!(got, Ok(closed_sqn));
    drop(held);
    assert_eq!(reader.join().unwrap(), active_sqn);
    // Records rolled out of the active file stay readable after more rolls.
    append_n(&j, 101, 300);
    for i in 1..=300 {
        check(&j, i);
    }
}

#[test]
fn fetch_of_an_active_record_does_not_wait_for_appends_or_rolls() {
    let d = tempfile::tempdir().unwrap();
    let j = Arc::new(Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap());
    append_n(&j, 1, 100);
    let active_sqn = j.files().last().unwrap().last_sqn;
    // An append in its write, or a roll in its fsyncs, holds only this.
    let held = j.append_lock.lock();
    let (tx, rx) = std::sync::mpsc::channel();
    let j2 = Arc::clone(&j);
    let reader = std::thread::spawn(move || {
        let r = j2.fetch(active_sqn, &key_of(active_sqn)).unwrap().unwrap();
        tx.send(r.sqn).unwrap();
    });
    let got = rx.recv_timeout(std::time::Duration::from_secs(10));
    drop(held);
    reader.join().unwrap();
    assert_eq!(got, Ok(active_sqn));
}

/// Readers fetch the newest published record while a writer appends
/// through many rolls: every record the journal says is written is
/// readable at once, whole, from whichever file holds it by then.
#[test]
fn newest_records_are_readable_while_appends_roll() {
    let d = tempfile::tempdir().unwrap();
    let j = Arc::new(Journal::open(d.path(), opts(2048), Arc::new(Stats::default())).unwrap());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (j, done) = (Arc::clone(&j), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) {
                    let last = j.last_sqn();
                    if last > 0 {
                        check(&j, last);
                        reads += 1;
                    }
                }
                reads
            })
        })
        .collect();
    append_n(&j, 1, 3000);
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert!(j.files().len() > 20, "the test needs many rolls");
    for i in 1..=3000 {
        check(&j, i);
    }
}

/// `start_writeback` covers each appended byte once (the range restarts at a
/// roll), is not a sync, and leaves every record readable, also after reopen.
#[test]
fn writeback_covers_new_bytes_once_and_is_not_a_sync() {
    let d = tempfile::tempdir().unwrap();
    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), opts(4096), stats.clone()).unwrap();
    append_n(&j, 1, 20);
    j.start_writeback().unwrap();
    // Up to the last whole page: the partly filled one waits for the next
    // step (written back now, the next append would dirty it again).
    // (These files are 4 KiB: the step stops where the file began.)
    let (done, size) = {
        let a = j.active.lock();
        (a.written_back, a.size)
    };
    assert_eq!(
        done,
        (size - size % 4096).max(file::JNL_HEADER_LEN),
        "size {size}"
    );
    assert_eq!(j.unsynced_bytes(), 0);
    // Nothing new: an empty range.
    j.start_writeback().unwrap();
    assert_eq!(j.active.lock().written_back, done);
    assert_eq!(stat(&stats, &stats.journal_writebacks), 2);
    assert_eq!(stat(&stats, &stats.journal_syncs), 0);
    assert!(j.sync.lock().synced_sqn < 20);
    append_n(&j, 21, 200);
    assert!(stat(&stats, &stats.journal_rolls) > 0);
    {
        let a = j.active.lock();
        assert!(a.written_back <= a.size, "{} > {}", a.written_back, a.size);
    }
    j.start_writeback().unwrap();
    for i in 1..=200 {
        check(&j, i);
    }
    j.close().unwrap();
    drop(j);
    let j = Journal::open(d.path(), opts(4096), stats).unwrap();
    for i in 1..=200 {
        check(&j, i);
    }
}

/// Appends records from `from` until the active file grew by `bytes`;
/// returns the next SQN.
fn append_bytes(j: &Journal, from: u64, bytes: u64) -> u64 {
    let start = j.active.lock().size;
    let mut i = from;
    while j.active.lock().size < start + bytes {
        append_n(j, i, i);
        i += 1;
    }
    i
}

/// The pages of the active file are released two write-back steps after
/// theirs began, a rolled file's all at once by `release_rolled`, and only
/// with the option on; every record stays readable. (A page that a step's
/// own DONTNEED met dirty is not probed: a fast disk may finish its
/// write-back before the kernel looks, and then it goes either way.)
#[test]
fn written_back_pages_are_released_two_steps_later_and_at_a_roll() {
    let d = tempfile::tempdir().unwrap();
    let run = |release: bool| {
        let dir = d.path().join(format!("release-{release}"));
        fs::create_dir(&dir).unwrap();
        let o = JournalOptions {
            release_written: release,
            ..direct_cached_opts(1 << 20)
        };
        let j = Journal::open(&dir, o, Arc::new(Stats::default())).unwrap();
        let page = 4096;
        let i = append_bytes(&j, 1, 8 * page);
        j.start_writeback().unwrap(); // step 1: the first 8 whole pages
        let (step2, size) = {
            let a = j.active.lock();
            (a.written_back, a.size)
        };
        assert_eq!(step2, size - size % page, "the step ends at a whole page");
        assert!(size % page != 0, "the test wants a partly filled last page");
        let i = append_bytes(&j, i, 8 * page);
        j.start_writeback().unwrap(); // step 2
        j.sync_to(i - 1).unwrap(); // both steps clean
        assert_eq!(j.active.lock().released, file::JNL_HEADER_LEN);
        let i = append_bytes(&j, i, 8 * page);
        j.start_writeback().unwrap(); // step 3 releases step 1's pages
        let released = j.active.lock().released;
        assert_eq!(released, step2, "step 3 releases up to where step 2 began");
        let path = j.active.lock().path.clone();
        let i = append_bytes(&j, i, 8 * page);
        let late = j.active.lock().size - 4 * page; // never written back
        let seen = (page_cached(&path, page + 1), page_cached(&path, late));
        let mut i = i;
        while j.closed.read().is_empty() {
            append_n(&j, i, i);
            i += 1;
        }
        j.release_rolled();
        let rolled = page_cached(&path, late);
        for k in 1..i {
            check(&j, k);
        }
        (seen, rolled)
    };
    if !direct_works(d.path()) {
        eprintln!("skipped: this file system cannot read around the cache (tmpfs?)");
        return;
    }
    let (seen, rolled) = run(true);
    assert_eq!(seen, (Some(false), Some(true)), "released, not yet");
    assert_eq!(rolled, Some(false), "after the roll");
    let (seen, rolled) = run(false);
    assert_eq!(seen.1, Some(true), "option off");
    assert_eq!(rolled, Some(true), "option off, rolled");
}

/// Without a flusher to drain it, the queue of rolled files to release
/// stays at `ROLLED_CACHED_MAX`: each roll past it releases the oldest.
#[test]
fn rolls_without_a_flusher_release_the_oldest_queued_file_themselves() {
    let d = tempfile::tempdir().unwrap();
    let o = JournalOptions {
        release_written: true,
        ..direct_cached_opts(64 * 1024)
    };
    let j = Journal::open(d.path(), o, Arc::new(Stats::default())).unwrap();
    let mut i = 1;
    while j.closed.read().len() < ROLLED_CACHED_MAX + 2 {
        append_n(&j, i, i);
        i += 1;
    }
    assert_eq!(j.rolled_cached.lock().len(), ROLLED_CACHED_MAX);
    for k in 1..i {
        check(&j, k);
    }
    if !direct_works(d.path()) {
        return;
    }
    let closed = j.closed.read().clone();
    let (oldest, newest) = (&closed[0].path, &closed[closed.len() - 1].path);
    assert_eq!(
        (page_cached(oldest, 8192), page_cached(newest, 8192)),
        (Some(false), Some(true)),
        "released by a roll, the newest still queued"
    );
}

/// True where the file system under `dir` takes `O_DIRECT` (ext4, xfs; not
/// tmpfs), so the tests below know which path they exercise.
fn direct_works(dir: &Path) -> bool {
    let p = dir.join("probe");
    fs::write(&p, [0u8; 4096]).unwrap();
    let ok = file::open_direct(&p).is_some();
    fs::remove_file(&p).unwrap();
    ok
}

fn direct_cached_opts(file_bytes: u64) -> JournalOptions {
    JournalOptions {
        direct_reads: true,
        value_cache: ValueCache::new(1 << 20),
        ..opts(file_bytes)
    }
}

#[test]
fn direct_reads_open_every_closed_file_where_the_file_system_allows() {
    let d = tempfile::tempdir().unwrap();
    let want = direct_works(d.path());
    let j = Journal::open(
        d.path(),
        direct_cached_opts(1024),
        Arc::new(Stats::default()),
    )
    .unwrap();
    append_n(&j, 1, 100);
    let rolled = j.closed.read().clone();
    assert!(rolled.len() > 3);
    assert!(
        rolled.iter().all(|c| c.direct.is_some() == want),
        "files closed by a roll"
    );
    j.close().unwrap();
    let j = Journal::open(
        d.path(),
        direct_cached_opts(1024),
        Arc::new(Stats::default()),
    )
    .unwrap();
    assert!(
        j.closed.read().iter().all(|c| c.direct.is_some() == want),
        "files opened closed"
    );
    for i in 1..=100 {
        check(&j, i);
    }
}

#[test]
fn value_cache_serves_repeat_reads_and_counts_them() {
    let d = tempfile::tempdir().unwrap();
    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), direct_cached_opts(1024), stats.clone()).unwrap();
    append_n(&j, 1, 100);
    for i in 1..=100 {
        check(&j, i);
    }
    assert_eq!(stat(&stats, &stats.journal_value_cache_misses), 100);
    assert_eq!(stat(&stats, &stats.journal_value_cache_hits), 0);
    for i in 1..=100 {
        check(&j, i);
    }
    assert_eq!(stat(&stats, &stats.journal_value_cache_hits), 100);
    // A cached record answers only for its own key and sqn.
    assert!(j.fetch(5, &key_of(6)).unwrap_err().is_corruption());
    assert!(j.fetch(101, &key_of(101)).unwrap().is_none());
    assert!(j.value_cache().unwrap().bytes() > 0);
}

/// A write of a key whose older version is cached replaces it, so the
/// next GET is a hit that returns the new record as the file holds it;
/// keys not cached and deletes are left alone.
#[test]
fn writes_refresh_cached_keys_only() {
    let d = tempfile::tempdir().unwrap();
    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), direct_cached_opts(1 << 20), stats.clone()).unwrap();
    let put = |sqn: u64, key: &[u8], value: &[u8], kind: RecordKind| {
        j.append(&NewRecord {
            sqn,
            kind,
            key,
            last_modified_us: sqn,
            expires_at: 0,
            metadata: b"m",
            value,
            index: &[],
        })
        .unwrap();
    };
    let (hot, cold) = (key_of(1), key_of(2));
    put(1, &hot, b"one", RecordKind::Put);
    put(2, &cold, b"cold", RecordKind::Put);
    assert_eq!(j.fetch(1, &hot).unwrap().unwrap().value, b"one");
    put(3, &hot, b"two", RecordKind::Put);
    put(4, &cold, b"colder", RecordKind::Put);
    assert_eq!(stat(&stats, &stats.journal_value_cache_refreshes), 1);
    let misses = stat(&stats, &stats.journal_value_cache_misses);
    let got = j.fetch(3, &hot).unwrap().unwrap();
    assert_eq!(
        stat(&stats, &stats.journal_value_cache_misses),
        misses,
        "a hit"
    );
    assert_eq!(Some(got), j.fetch_from_files(3, &hot).unwrap());
    put(5, &hot, b"", RecordKind::Delete);
    assert_eq!(
        stat(&stats, &stats.journal_value_cache_refreshes),
        1,
        "delete"
    );
    j.fetch(4, &cold).unwrap().unwrap();
    assert_eq!(
        stat(&stats, &stats.journal_value_cache_misses),
        misses + 1,
        "the cold key was not cached by its write"
    );
}

#[test]
fn corrupt_record_is_reported_by_direct_reads_and_never_cached() {
    let d = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(d.path(), opts(1024), Arc::new(Stats::default())).unwrap();
        append_n(&j, 1, 100);
        j.close().unwrap();
    }
    let target = Journal::open(d.path(), opts(1024), Arc::new(Stats::default()))
        .unwrap()
        .files()[1]
        .clone();
    assert!(!target.active);
    let victim = target.first_sqn + 1;
    // Damage a byte of the value: the record's CRC no longer matches.
    flip_byte(&target.path, offset_of(&target.path, victim) + 40);
    let stats = Arc::new(Stats::default());
    let j = Journal::open(d.path(), direct_cached_opts(1024), stats.clone()).unwrap();
    for _ in 0..2 {
        let err = j.fetch(victim, &key_of(victim)).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        check(&j, victim - 1);
        check(&j, victim + 1);
    }
    assert_eq!(
        stat(&stats, &stats.journal_value_cache_hits),
        2,
        "neighbours, once each"
    );
    assert_eq!(
        stat(&stats, &stats.journal_value_cache_misses),
        4,
        "the victim both times"
    );
    assert_eq!(stat(&stats, &stats.journal_corrupt_records), 2);
}

/// A view made while a file was active reads it on after the file rolled,
/// was compacted away and was removed: removal shrinks a file before the
/// unlink (`remover::remove`) only when nobody else holds its
/// handle, and the view holds the handle the file was written through.
#[test]
fn a_view_reads_a_once_active_file_after_compaction_removed_it() {
    struct DropAll;
    impl compact::Liveness for DropAll {
        fn keep(&self, _: &record::JournalRecord) -> Result<compact::Keep> {
            Ok(compact::Keep::Drop)
        }
    }
    let d = tempfile::tempdir().unwrap();
    let step = crate::limits::REMOVE_STEP_BYTES;
    let j = Journal::open(d.path(), opts(4 * step), Arc::new(Stats::default())).unwrap();
    // More than one removal step of values, all in the active file.
    let value = |i: u64| vec![(i % 251) as u8; 64 * 1024];
    let n = (step + step / 2) / (64 * 1024);
    for i in 1..=n {
        let k = key_of(i);
        j.append(&NewRecord {
            sqn: i,
            kind: RecordKind::Put,
            key: &k,
            last_modified_us: i,
            expires_at: 0,
            metadata: b"",
            value: &value(i),
            index: &[],
        })
        .unwrap();
    }
    let view = j.view();
    j.roll().unwrap();
    let run = j.closed_files();
    assert_eq!(run.len(), 1);
    let path = run[0].path.clone();
    assert!(std::fs::metadata(&path).unwrap().len() > step);
    let done = j.compact_run(&run, &DropAll).unwrap();
    assert!(done.files_out.is_empty());
    drop(run);
    j.reap_retired();
    assert!(!path.exists(), "the compacted file is unlinked");
    for i in 1..=n {
        let got = view.fetch(i, &key_of(i)).unwrap().unwrap();
        assert_eq!(got.value, value(i), "record {i}");
    }
    drop(view);
    j.close().unwrap();
}

// ---- reclaim in place (punch) ----

/// Drops the records whose SQN `drop` says.
struct DropWhere(fn(u64) -> bool);

impl compact::Liveness for DropWhere {
    fn keep(&self, r: &record::JournalRecord) -> Result<compact::Keep> {
        Ok(match (self.0)(r.sqn) {
            true => compact::Keep::Drop,
            false => compact::Keep::Record,
        })
    }
}

/// A value spanning more than one 4 KiB block, different per record.
fn big_value(i: u64) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8; 6000 + (i % 5) as usize * 700];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

/// A journal of `n` records of [`big_value`]s, every one in a closed file;
/// `None` (the test is skipped, said on stderr) where the file system
/// cannot punch holes.
fn punchable(dir: &Path, n: u64) -> Option<(Journal, Arc<Stats>)> {
    let (j, stats) = punchable_active(dir, n)?;
    j.roll_and_list().unwrap();
    Some((j, stats))
}

/// [`punchable`] with the last file still active.
fn punchable_active(dir: &Path, n: u64) -> Option<(Journal, Arc<Stats>)> {
    let stats = Arc::new(Stats::default());
    let j = Journal::open(dir, opts(64 * 1024), stats.clone()).unwrap();
    for i in 1..=n {
        let k = key_of(i);
        j.append(&NewRecord {
            sqn: i,
            kind: RecordKind::Put,
            key: &k,
            last_modified_us: i,
            expires_at: 0,
            metadata: b"m",
            value: &big_value(i),
            index: &[],
        })
        .unwrap();
    }
    if !j.punch_supported() {
        eprintln!("skipped: this file system cannot punch holes");
        return None;
    }
    Some((j, stats))
}

/// One punch pass over every closed file, which must change some.
fn punch_all(j: &Journal, dropped: fn(u64) -> bool) -> compact::CompactedRun {
    let r = j.punch_run(&j.closed_files(), &DropWhere(dropped)).unwrap();
    assert!(!r.files_in.is_empty(), "{r:?}");
    r
}

fn closed_allocated(j: &Journal) -> u64 {
    j.closed_files().iter().map(|c| allocated(&c.path)).sum()
}

/// Every record `live` keeps reads back whole, by fetch and by replay;
/// no other record is returned by either.
fn check_live(j: &Journal, n: u64, dropped: fn(u64) -> bool) {
    for i in 1..=n {
        match j.fetch(i, &key_of(i)) {
            Ok(Some(r)) => {
                assert!(!dropped(i), "dropped record {i} was returned");
                assert_eq!(r.value, big_value(i), "record {i}");
            }
            Ok(None) | Err(_) => assert!(dropped(i), "live record {i} is gone"),
        }
    }
    let mut got = Vec::new();
    j.replay(0, &mut |r| {
        assert_eq!(r.value, big_value(r.sqn), "replayed record {}", r.sqn);
        got.push(r.sqn);
        Ok(())
    })
    .unwrap();
    let want: Vec<u64> = (1..=n).filter(|i| !dropped(*i)).collect();
    assert_eq!(got, want);
}

#[test]
fn punching_frees_the_blocks_of_garbage_and_keeps_every_live_record() {
    let d = tempfile::tempdir().unwrap();
    let Some((j, stats)) = punchable(d.path(), 120) else {
        return;
    };
    let dropped: fn(u64) -> bool = |i| i % 3 != 0;
    let before = closed_allocated(&j);
    let run = j.closed_files();
    let numbers: Vec<u64> = run.iter().map(|c| c.file_no).collect();
    let r = j.punch_run(&run, &DropWhere(dropped)).unwrap();
    assert_eq!(r.files_in, numbers, "every file had garbage");
    assert_eq!(r.files_out, numbers, "same files, new indexes");
    assert_eq!(r.records_dropped, 80);
    assert_eq!(r.records_kept, 40);
    // Two of three records are garbage; whole blocks only are punched.
    assert!(r.bytes_out < r.bytes_in * 6 / 10, "{r:?}");
    // Nothing is punched while the old indexes are held (`run`).
    assert_eq!(stat(&stats, &stats.compaction_bytes_punched), 0);
    assert_eq!(closed_allocated(&j), before);
    // Let go (and reaped from the retired list), their holes are punched
    // (at once: no rate in these options).
    drop(run);
    j.reap_retired();
    let punched = stat(&stats, &stats.compaction_bytes_punched);
    assert!(punched > 0);
    let after = closed_allocated(&j);
    // Splitting extents may take a block of extent tree per file or so.
    let files = j.closed_files().len() as u64;
    assert!(
        after + punched <= before + files * 16384,
        "{before} {after} {punched}"
    );
    assert!(after < before * 6 / 10, "{before} -> {after}");
    check_live(&j, 120, dropped);
    assert_eq!(stat(&stats, &stats.journal_corrupt_records), 0);
    // Again with the same liveness: nothing new to do.
    let again = j.punch_run(&j.closed_files(), &DropWhere(dropped)).unwrap();
    assert!(again.files_in.is_empty(), "{again:?}");
    // A reopen loads the version 2 indexes, punches nothing more.
    j.close().unwrap();
    drop(j);
    let j = Journal::open(d.path(), opts(64 * 1024), Arc::new(Stats::default())).unwrap();
    assert_eq!(closed_allocated(&j), after);
    check_live(&j, 120, dropped);
    assert!(j.closed_files().iter().all(|c| c.punched > 0));
    // More garbage later: its runs merge with the holes beside them.
    let more: fn(u64) -> bool = |i| i % 3 != 0 || i % 2 == 0;
    let r = j.punch_run(&j.closed_files(), &DropWhere(more)).unwrap();
    assert!(!r.files_in.is_empty());
    j.reap_retired();
    assert!(closed_allocated(&j) < after);
    check_live(&j, 120, more);
    j.close().unwrap();
}

#[test]
fn with_a_rate_holes_go_to_the_remover_and_a_close_finishes_them() {
    let d = tempfile::tempdir().unwrap();
    let Some((j, stats)) = punchable(d.path(), 90) else {
        return;
    };
    j.close().unwrap();
    drop(j);
    // 1 byte a second: only the close's settle gets past the first step.
    let mut o = opts(64 * 1024);
    o.remove_bytes_per_sec = 1;
    let j = Journal::open(d.path(), o, stats.clone()).unwrap();
    let before = closed_allocated(&j);
    let dropped: fn(u64) -> bool = |i| i % 3 != 0;
    punch_all(&j, dropped);
    j.reap_retired();
    check_live(&j, 90, dropped);
    let paths: Vec<_> = j.closed_files().iter().map(|c| c.path.clone()).collect();
    j.close().unwrap();
    // Punched by the close (the next open would punch them too).
    assert!(stat(&stats, &stats.compaction_bytes_punched) > 0);
    let after: u64 = paths.iter().map(|p| allocated(p)).sum();
    assert!(after < before * 6 / 10, "{before} -> {after}");
    let j = Journal::open(d.path(), opts(64 * 1024), stats.clone()).unwrap();
    check_live(&j, 90, dropped);
    j.close().unwrap();
}

#[test]
fn holes_wait_for_every_reader_of_an_older_index() {
    let d = tempfile::tempdir().unwrap();
    let Some((j, stats)) = punchable(d.path(), 90) else {
        return;
    };
    let before = closed_allocated(&j);
    let view = j.view();
    // Two passes: the second drops records the first kept, which the view
    // (made before either) can still read.
    let first: fn(u64) -> bool = |i| i % 3 == 1;
    let second: fn(u64) -> bool = |i| i % 3 != 0;
    punch_all(&j, first);
    punch_all(&j, second);
    j.reap_retired();
    assert_eq!(
        stat(&stats, &stats.compaction_bytes_punched),
        0,
        "the view holds the oldest index"
    );
    assert_eq!(closed_allocated(&j), before);
    for i in 1..=90 {
        let r = view.fetch(i, &key_of(i)).unwrap().unwrap();
        assert_eq!(r.value, big_value(i), "record {i} through the old view");
    }
    check_live(&j, 90, second);
    drop(view);
    j.reap_retired();
    assert!(stat(&stats, &stats.compaction_bytes_punched) > 0);
    assert!(closed_allocated(&j) < before * 6 / 10);
    check_live(&j, 90, second);
    j.close().unwrap();
}

#[test]
fn a_pass_cut_short_before_its_punches_is_finished_at_open() {
    let d = tempfile::tempdir().unwrap();
    let Some((j, _)) = punchable(d.path(), 60) else {
        return;
    };
    let before = closed_allocated(&j);
    let dropped: fn(u64) -> bool = |i| i % 4 != 0;
    let held = j.closed_files();
    assert!(!j
        .punch_run(&held, &DropWhere(dropped))
        .unwrap()
        .files_in
        .is_empty());
    // The old indexes are never let go, as if the process died here: the
    // new `.jix` files are written, nothing is punched.
    std::mem::forget(held);
    j.close().unwrap();
    drop(j);
    assert_eq!(
        fs::read_dir(d.path())
            .unwrap()
            .filter_map(|e| file::parse_jnl_name(&e.unwrap().file_name().to_string_lossy()))
            .count(),
        j_files_on_disk(d.path())
    );
    let j = Journal::open(d.path(), opts(64 * 1024), Arc::new(Stats::default())).unwrap();
    let after = closed_allocated(&j);
    assert!(
        after < before * 6 / 10,
        "the open punched the marked runs: {before} -> {after}"
    );
    check_live(&j, 60, dropped);
    j.close().unwrap();
}

fn j_files_on_disk(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            n.to_string_lossy().ends_with(".jnl")
        })
        .count()
}

#[test]
fn a_file_linked_elsewhere_is_never_punched() {
    let d = tempfile::tempdir().unwrap();
    let Some((j, stats)) = punchable(d.path(), 60) else {
        return;
    };
    let files = j.closed_files();
    let (a, b) = (&files[0], &files[1]);
    // `a` is linked before the pass (it is left alone), `b` after the pass
    // but before its holes are due (they are never punched).
    let keep = tempfile::tempdir().unwrap();
    let link_a = keep.path().join("a.jnl");
    let link_b = keep.path().join("b.jnl");
    fs::hard_link(&a.path, &link_a).unwrap();
    let bytes_a = fs::read(&a.path).unwrap();
    let bytes_b = fs::read(&b.path).unwrap();
    let dropped: fn(u64) -> bool = |i| i % 2 == 0;
    let r = j.punch_run(&files[..2], &DropWhere(dropped)).unwrap();
    assert_eq!(r.files_in, vec![b.file_no]);
    assert_eq!(stat(&stats, &stats.compaction_punch_skipped), 1);
    fs::hard_link(&b.path, &link_b).unwrap();
    drop(files);
    j.reap_retired();
    assert_eq!(stat(&stats, &stats.compaction_bytes_punched), 0);
    assert_eq!(fs::read(&link_a).unwrap(), bytes_a);
    assert_eq!(fs::read(&link_b).unwrap(), bytes_b);
    check_live(&j, 60, |i| i % 2 == 0 && j_is_in_second_file(i));
    j.close().unwrap();
}

/// Whether record `i` of [`punchable`]`(_, 60)` is in its second file (a
/// file of 64 KiB holds the records up to the one that passes it).
fn j_is_in_second_file(i: u64) -> bool {
    let mut size = file::JNL_HEADER_LEN;
    let mut file = 0;
    for s in 1..=i {
        let rec = 60 + key_of(s).len() as u64 + 1 + big_value(s).len() as u64;
        if s == i {
            return file == 1;
        }
        size += rec;
        if size >= 64 * 1024 {
            file += 1;
            size = file::JNL_HEADER_LEN;
        }
    }
    false
}

#[test]
fn copying_compaction_dump_and_a_lost_index_read_around_the_holes() {
    let d = tempfile::tempdir().unwrap();
    let Some((j, stats)) = punchable(d.path(), 90) else {
        return;
    };
    let dropped: fn(u64) -> bool = |i| i % 3 != 0;
    j.punch_run(&j.closed_files(), &DropWhere(dropped)).unwrap();
    j.reap_retired();
    assert!(stat(&stats, &stats.compaction_bytes_punched) > 0);
    // dump: the records and the punched runs, no damage.
    let first = j.closed_files()[0].path.clone();
    let mut out = Vec::new();
    let rep = dump(&first, &mut out, true).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(rep.corrupt_regions, 0, "{text}");
    assert!(text.contains("reclaimed in place"), "{text}");
    assert!(rep.entries > 0);
    // A lost `.jix` is rebuilt by scanning: the holes show as damage, the
    // live records are all there.
    fs::remove_file(first.with_extension("jix")).unwrap();
    j.close().unwrap();
    drop(j);
    let j = Journal::open(d.path(), opts(64 * 1024), stats.clone()).unwrap();
    for i in (1..=90).filter(|i| !dropped(*i)) {
        assert_eq!(j.fetch(i, &key_of(i)).unwrap().unwrap().value, big_value(i));
    }
    // Copying compaction of punched files keeps exactly the live records.
    let corrupt_before = stat(&stats, &stats.journal_corrupt_records);
    let run: Vec<_> = j.closed_files().into_iter().skip(1).collect();
    let r = j.compact_run(&run, &DropWhere(dropped)).unwrap();
    assert_eq!(r.damaged_records, 0);
    assert_eq!(stat(&stats, &stats.journal_corrupt_records), corrupt_before);
    drop(run);
    for i in (1..=90).filter(|i| !dropped(*i)) {
        assert_eq!(j.fetch(i, &key_of(i)).unwrap().unwrap().value, big_value(i));
    }
    j.close().unwrap();
}

#[test]
fn a_view_of_the_active_file_keeps_holes_out_of_it_after_its_roll() {
    let d = tempfile::tempdir().unwrap();
    let Some((j, stats)) = punchable_active(d.path(), 30) else {
        return;
    };
    let view = j.view();
    j.roll_and_list().unwrap();
    let last = j.closed_files().last().unwrap().clone();
    let before = allocated(&last.path);
    drop(last);
    let dropped: fn(u64) -> bool = |i| i % 3 != 0;
    punch_all(&j, dropped);
    j.reap_retired();
    assert_eq!(
        stat(&stats, &stats.compaction_bytes_punched),
        0,
        "the view reads the once active file"
    );
    for i in 1..=30 {
        let r = view.fetch(i, &key_of(i)).unwrap().unwrap();
        assert_eq!(r.value, big_value(i), "record {i} through the view");
    }
    drop(view);
    j.reap_retired();
    assert!(stat(&stats, &stats.compaction_bytes_punched) > 0);
    assert!(allocated(&j.closed_files().last().unwrap().path) < before);
    check_live(&j, 30, dropped);
    j.close().unwrap();
}
