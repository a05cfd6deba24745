//! Tests of SST files: writing, reading, scanning, damage and dumps.

use super::iter::nothing_between;
use super::*;
use crate::entry::{LedgerValue, Status};
use crate::error::{Error, Result};
use crate::ledger::block_cache::BlockCache;
use crate::limits::SST_ITER_READ_BYTES;
use crate::stats::Stats;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

type Model = BTreeMap<Vec<u8>, LedgerValue>;

fn val(sqn: u64, tombstone: bool, meta_len: usize, lm: u64) -> LedgerValue {
    LedgerValue {
        sqn,
        status: if tombstone {
            Status::Tombstone
        } else {
            Status::Active
        },
        expires_at: sqn % 5,
        value_hash: sqn.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        size: if tombstone { 0 } else { sqn.wrapping_mul(3) },
        last_modified_us: lm,
        metadata: (0..meta_len).map(|i| (i % 251) as u8).collect(),
    }
}

fn opts(block_bytes: usize) -> SstOptions {
    SstOptions {
        block_bytes,
        bloom_bits_per_key: 8,
        ..SstOptions::default()
    }
}

fn write(path: &Path, model: &Model, o: SstOptions) -> SstSummary {
    let mut w = SstWriter::create(path, o).unwrap();
    for (k, v) in model {
        w.add(k, v).unwrap();
    }
    assert_eq!(w.entries(), model.len() as u64);
    w.finish().unwrap()
}

/// Object keys in three buckets, some tombstones, varied metadata, some
/// entries bigger than a 512-byte block, and a few index keys.
fn sample(n: u64) -> Model {
    let mut m = Model::new();
    for i in 0..n {
        let key = crate::key::object(
            format!("b{}", i % 3).as_bytes(),
            format!("k{i:05}").as_bytes(),
        );
        let meta = if i % 50 == 7 {
            2000
        } else {
            (i as usize * 13) % 200
        };
        m.insert(
            key,
            val(i + 1, i % 7 == 3, meta, 1_000_000 + (i * 7919) % 10_007),
        );
    }
    for i in 0..n / 10 {
        let key = crate::key::encode(
            KeyKind::Index,
            &[b"b0", b"field_bin", format!("t{i}").as_bytes(), b"key"],
        );
        m.insert(key, val(n + i + 1, false, 0, 5));
    }
    m
}

/// A writer with `sync_bytes` set hands the file to the disk in steps:
/// after each step everything added so far is in the file (not in the
/// writer's buffer) and synced; with 0 nothing is synced before
/// `finish`. Either way the finished file reads back the same.
#[test]
fn a_writer_syncs_in_steps_of_sync_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let m = sample(600);
    for (name, step) in [("steps.sst", 4096u64), ("once.sst", 0)] {
        let path = dir.path().join(name);
        let o = SstOptions {
            sync_bytes: step,
            ..opts(512)
        };
        let mut w = SstWriter::create(&path, o).unwrap();
        let mut steps_seen = 0;
        for (k, v) in &m {
            let before = w.synced;
            w.add(k, v).unwrap();
            if w.synced != before {
                steps_seen += 1;
                assert!(w.synced - before >= step, "a step of {}", w.synced - before);
                assert_eq!(w.synced, w.offset, "a step syncs all written so far");
                let on_disk = std::fs::metadata(&path).unwrap().len();
                assert_eq!(on_disk, w.synced, "the step's bytes left the buffer");
            }
            assert!(
                step == 0 || w.offset - w.synced < step,
                "never a step behind"
            );
        }
        if step == 0 {
            assert_eq!((steps_seen, w.synced), (0, 0));
        } else {
            assert!(steps_seen > 10, "{steps_seen} steps");
        }
        let sum = w.finish().unwrap();
        let r = Arc::new(SstReader::open(&path).unwrap());
        assert_eq!(sum.entries, m.len() as u64);
        assert_eq!(scan(&r, &[], None), model_range(&m, &[], None));
    }
}

fn scan(r: &Arc<SstReader>, start: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, LedgerValue)> {
    r.range(start, end).collect::<Result<Vec<_>>>().unwrap()
}

fn model_range(m: &Model, start: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, LedgerValue)> {
    m.iter()
        .filter(|(k, _)| k.as_slice() >= start && end.is_none_or(|e| k.as_slice() < e))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Every codec writes a file (format version 2) that reads back whole, by
/// point lookups and scans, and verifies clean; lz4 and zstd files are
/// smaller than the stored-as-is one (the sample's metadata repeats).
#[test]
fn every_codec_reads_back_and_compression_shrinks_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = sample(600);
    let mut sizes = Vec::new();
    for (name, codec) in [
        ("none.sst", Compression::None),
        ("lz4.sst", Compression::Lz4),
        ("zstd.sst", Compression::Zstd),
    ] {
        let path = dir.path().join(name);
        let o = SstOptions {
            compression: codec,
            ..opts(512)
        };
        let sum = write(&path, &model, o);
        let r = Arc::new(SstReader::open(&path).unwrap());
        assert_eq!(r.format_version(), FORMAT_VERSION);
        for (k, v) in &model {
            assert_eq!(r.get(k, crate::key::hash(k)).unwrap().as_ref(), Some(v));
        }
        assert_eq!(scan(&r, &[], None), model_range(&model, &[], None));
        assert!(r.verify().unwrap().is_clean(), "{name}");
        sizes.push(sum.size_bytes);
    }
    assert!(
        sizes[1] < sizes[0] && sizes[2] < sizes[0],
        "sizes {sizes:?}"
    );
}

/// A file of format version 1 (uncompressed blocks, no codec byte), as
/// v0.1.0 wrote it: the upgrade fixture's ledger file reads and verifies.
#[test]
fn version_1_files_written_by_v0_1_0_still_read() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cli/tests/fixtures/upgrade/v0.1.0/data/vnodes/3/ledger/00000001.sst");
    let r = Arc::new(SstReader::open(&fixture).unwrap());
    assert_eq!(r.format_version(), 1);
    let all = scan(&r, &[], None);
    assert_eq!(all.len() as u64, r.summary().entries);
    assert!(!all.is_empty());
    for (k, v) in &all {
        assert_eq!(r.get(k, crate::key::hash(k)).unwrap().as_ref(), Some(v));
    }
    assert!(r.verify().unwrap().is_clean());
    let mut out = Vec::new();
    dump(&fixture, &mut out, false).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("format version 1,"), "{text}");
}

/// A file naming a newer format version (its footer checksum good, as a
/// newer build writes it) is refused, naming the version and those this
/// build reads.
#[test]
fn a_newer_format_version_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    write(&path, &sample(20), opts(512));
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - FOOTER_BYTES;
    bytes[at + 8..at + 12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let c = crate::codec::crc(&bytes[at..bytes.len() - 4]);
    let end = bytes.len();
    bytes[end - 4..].copy_from_slice(&c.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let e = SstReader::open(&path).unwrap_err().to_string();
    assert!(
        e.contains("unsupported SST format version 3 (this build reads 1 to 2)"),
        "{e}"
    );
}

fn flip(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset as usize] ^= 0x5A;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn range_with_skips_old_blocks_and_filtered_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lm.sst");
    let mut model = Model::new();
    for i in 0..2000u64 {
        let key = crate::key::object(b"b", format!("k{i:05}").as_bytes());
        // Last-modified grows with the key, as for keys written in order.
        model.insert(key, val(i + 1, false, 0, 1_000 + i * 10));
    }
    write(&path, &model, opts(512));
    let r = Arc::new(SstReader::open(&path).unwrap());
    let low = 1_000 + 1500 * 10;
    let before = r.blocks_read();
    let got: Vec<_> = r
        .range_with(
            b"",
            None,
            RangeOptions {
                modified_since_us: low,
                key_filter: None,
            },
        )
        .collect::<Result<Vec<_>>>()
        .unwrap();
    let read = r.blocks_read() - before;
    let want: Vec<_> = model
        .iter()
        .filter(|(_, v)| v.last_modified_us >= low)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // Every recent entry is there; old ones only from a shared block.
    assert!(want.iter().all(|w| got.contains(w)));
    assert!(
        got.len() < want.len() + 100,
        "{} vs {}",
        got.len(),
        want.len()
    );
    assert!(read * 3 < r.blocks().len() as u64, "read {read} blocks");

    let only_even: KeyFilter = Arc::new(|k: &[u8]| k.len() > 3 && k[k.len() - 3].is_multiple_of(2));
    let got: Vec<_> = r
        .range_with(
            b"",
            None,
            RangeOptions {
                modified_since_us: 0,
                key_filter: Some(only_even),
            },
        )
        .map(|e| e.unwrap().0)
        .collect();
    let want: Vec<_> = model
        .keys()
        .filter(|k| k[k.len() - 3] % 2 == 0)
        .cloned()
        .collect();
    assert_eq!(want.len(), 1000);
    assert_eq!(got, want);
}

#[test]
fn reader_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<SstReader>();
    check::<SstIter>();
}

#[test]
fn round_trip_get_and_range() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let model = sample(600);
    let summary = write(&path, &model, opts(512));

    assert_eq!(summary.entries, model.len() as u64);
    assert_eq!(
        summary.tombstones,
        model
            .values()
            .filter(|v| v.status == Status::Tombstone)
            .count() as u64
    );
    assert_eq!(&summary.min_key, model.keys().next().unwrap());
    assert_eq!(&summary.max_key, model.keys().next_back().unwrap());
    assert_eq!(
        summary.min_sqn,
        model.values().map(|v| v.sqn).min().unwrap()
    );
    assert_eq!(
        summary.max_sqn,
        model.values().map(|v| v.sqn).max().unwrap()
    );
    assert_eq!(
        summary.max_last_modified_us,
        model.values().map(|v| v.last_modified_us).max().unwrap()
    );
    assert_eq!(summary.size_bytes, std::fs::metadata(&path).unwrap().len());
    assert!(is_sst_file(&path).unwrap());

    let r = Arc::new(SstReader::open(&path).unwrap());
    assert_eq!(r.summary(), &summary);
    assert_eq!(r.path(), path.as_path());
    assert!(r.blocks().len() > 10);
    // Entries bigger than a block sit alone in theirs.
    for b in r.blocks() {
        let v = &model[&b.last_key];
        if v.metadata.len() >= 512 {
            let block = r
                .load_block(r.blocks().iter().position(|x| x == b).unwrap())
                .unwrap();
            assert_eq!(block.count, 1);
        }
    }

    for (k, v) in &model {
        assert_eq!(
            r.get(k, crate::key::hash(k)).unwrap().as_ref(),
            Some(v),
            "{}",
            render_key(k)
        );
    }
    let missing = [
        crate::key::object(b"b0", b"k00001"), // k00001 is in bucket b1
        crate::key::object(b"a", b"x"),
        crate::key::object(b"zz", b"x"),
        crate::key::encode(KeyKind::Index, &[b"b0", b"field_bin", b"t0", b"zzz"]),
        b"\x00".to_vec(),
        b"\xff\xff".to_vec(),
        Vec::new(),
    ];
    for k in &missing {
        assert_eq!(r.get(k, crate::key::hash(k)).unwrap(), None);
    }

    let all = scan(&r, b"", None);
    assert_eq!(all, model_range(&model, b"", None));
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let bounds: Vec<(Vec<u8>, Option<Vec<u8>>)> = vec![
        (keys[10].clone(), Some(keys[200].clone())),
        (keys[0].clone(), Some(keys[1].clone())),
        (keys[5].clone(), Some(keys[5].clone())),
        (keys[300].clone(), None),
        (
            crate::key::prefix(KeyKind::Object, &[b"b1"]),
            crate::key::prefix_end(&crate::key::prefix(KeyKind::Object, &[b"b1"])),
        ),
        (
            vec![KeyKind::Index as u8],
            Some(vec![KeyKind::Index as u8 + 1]),
        ),
        (b"\xff".to_vec(), None),
        (keys[100].clone(), Some(keys[50].clone())),
        (
            [keys[20].as_slice(), b"\x00"].concat(),
            Some([keys[400].as_slice(), b"\x00"].concat()),
        ),
    ];
    for (s, e) in &bounds {
        assert_eq!(
            scan(&r, s, e.as_deref()),
            model_range(&model, s, e.as_deref())
        );
    }

    let report = r.verify().unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.entries, model.len() as u64);
    assert_eq!(report.blocks, r.blocks().len() as u64);
}

#[test]
fn range_reads_only_the_blocks_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let model = sample(400);
    write(&path, &model, opts(256));
    let r = Arc::new(SstReader::open(&path).unwrap());
    let b = &r.blocks()[5];
    let before = r.blocks_read();
    let got = scan(
        &r,
        &b.last_key,
        Some(&[b.last_key.as_slice(), b"\x00"].concat()),
    );
    assert_eq!(got.len(), 1);
    assert_eq!(r.blocks_read() - before, 1);
    assert_eq!(r.range(b"", Some(b"")).count(), 0);
    assert_eq!(r.blocks_read() - before, 1);
}

/// Scans read the blocks their range can reach in one I/O: never past
/// the block that holds the range's end, never more than
/// `SST_ITER_READ_BYTES` (unless one block is bigger), and the spans of
/// a whole-file scan cover every block once.
#[test]
fn scans_read_the_blocks_their_range_reaches_in_bounded_spans() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let model = sample(400);
    write(&path, &model, opts(256));
    let r = SstReader::open(&path).unwrap();
    let b = r.blocks().to_vec();
    assert!(b.len() > 8);
    assert_eq!(r.span_from(2, Some(&b[4].last_key)), 2..5);
    let just_after_4 = [b[4].last_key.as_slice(), b"\x00"].concat();
    assert_eq!(r.span_from(2, Some(&just_after_4)), 2..5);
    assert_eq!(r.span_from(2, None), 2..b.len());

    let big = dir.path().join("2.sst");
    let model = sample(6000);
    // Stored as is: the sample compresses, and the test needs the bytes.
    let o = SstOptions {
        compression: Compression::None,
        ..opts(4096)
    };
    write(&big, &model, o);
    let r = SstReader::open(&big).unwrap();
    let n = r.blocks().len();
    let (mut at, mut spans) = (0, 0);
    while at < n {
        let span = r.span_from(at, None);
        assert_eq!(span.start, at);
        let bytes: u64 = r.blocks()[span.clone()]
            .iter()
            .map(|h| u64::from(h.len))
            .sum();
        assert!(
            span.len() == 1 || bytes <= SST_ITER_READ_BYTES,
            "{span:?}: {bytes}"
        );
        at = span.end;
        spans += 1;
    }
    let file_bytes: u64 = r.blocks().iter().map(|h| u64::from(h.len)).sum();
    assert!(file_bytes > 2 * SST_ITER_READ_BYTES, "{file_bytes}");
    assert!(spans >= 3 && spans < n / 8, "{spans} spans for {n} blocks");
    let all: Vec<_> = Arc::new(r).range(b"", None).map(|e| e.unwrap().0).collect();
    assert_eq!(all, model.keys().cloned().collect::<Vec<_>>());
}

#[test]
fn out_of_order_add_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let mut w = SstWriter::create(&path, opts(512)).unwrap();
    w.add(b"ob", &val(1, false, 0, 0)).unwrap();
    assert!(matches!(
        w.add(b"oa", &val(2, false, 0, 0)),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        w.add(b"ob", &val(3, false, 0, 0)),
        Err(Error::InvalidInput(_))
    ));
    w.add(b"oc", &val(4, true, 0, 0)).unwrap();
    let s = w.finish().unwrap();
    assert_eq!(
        (s.entries, s.tombstones, s.min_sqn, s.max_sqn),
        (2, 1, 1, 4)
    );
    let r = SstReader::open(&path).unwrap();
    assert_eq!(r.get(b"oa", crate::key::hash(b"oa")).unwrap(), None);
    assert_eq!(
        r.get(b"oc", crate::key::hash(b"oc")).unwrap(),
        Some(val(4, true, 0, 0))
    );
}

#[test]
fn empty_finish_errors_and_removes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let w = SstWriter::create(&path, opts(512)).unwrap();
    assert!(path.exists());
    assert!(matches!(w.finish(), Err(Error::InvalidInput(_))));
    assert!(!path.exists());
}

#[test]
fn dropped_writer_removes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let mut w = SstWriter::create(&path, opts(64)).unwrap();
    for i in 0..100u32 {
        w.add(
            &crate::key::object(b"b", &i.to_be_bytes()),
            &val(1, false, 10, 0),
        )
        .unwrap();
    }
    assert!(w.estimated_bytes() > 100 * 40);
    drop(w);
    assert!(!path.exists());
}

#[test]
fn create_refuses_existing_file_and_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    std::fs::write(&path, b"x").unwrap();
    assert!(matches!(
        SstWriter::create(&path, opts(512)),
        Err(Error::Io { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"x");
    let other = dir.path().join("2.sst");
    assert!(matches!(
        SstWriter::create(&other, opts(0)),
        Err(Error::InvalidInput(_))
    ));
    let no_bloom = SstOptions {
        block_bytes: 512,
        bloom_bits_per_key: 0,
        ..SstOptions::default()
    };
    assert!(matches!(
        SstWriter::create(&other, no_bloom),
        Err(Error::InvalidInput(_))
    ));
    assert!(!other.exists());
}

#[test]
fn estimated_bytes_is_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let model = sample(300);
    let mut w = SstWriter::create(&path, opts(512)).unwrap();
    for (k, v) in &model {
        w.add(k, v).unwrap();
    }
    let est = w.estimated_bytes();
    let s = w.finish().unwrap();
    let diff = est.abs_diff(s.size_bytes);
    assert!(
        diff <= s.size_bytes / 50,
        "estimate {est}, actual {}",
        s.size_bytes
    );
}

/// `1.sst` in `dir` holding `sample(300)` in 256-byte blocks, with a
/// byte of its second data block flipped; the model and the index.
fn second_block_damaged(dir: &Path) -> (PathBuf, Model, Vec<BlockHandle>) {
    let path = dir.join("1.sst");
    let model = sample(300);
    write(&path, &model, opts(256));
    let blocks = SstReader::open(&path).unwrap().blocks().to_vec();
    assert!(blocks.len() >= 3);
    flip(&path, blocks[1].offset + 10);
    (path, model, blocks)
}

/// Point lookups through a block cache: the first read of a block
/// misses and caches it, later ones hit without reading the file; a
/// damaged block is reported every time and never cached; dropping the
/// reader empties the cache of its blocks.
#[test]
fn cached_lookups_read_each_block_once_and_never_cache_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (path, model, blocks) = second_block_damaged(dir.path());
    let bad = blocks[1].clone();
    let in_bad = |k: &Vec<u8>| k > &blocks[0].last_key && k <= &bad.last_key;

    let cache = BlockCache::new(1 << 20).unwrap();
    let stats = Stats::default();
    let r = SstReader::open_cached(&path, Some(cache.clone())).unwrap();
    for round in 0..2 {
        for (k, v) in &model {
            let got = r.get_timed(k, crate::key::hash(k), Some(&stats));
            if in_bad(k) {
                assert!(got.unwrap_err().is_corruption(), "round {round}");
            } else {
                assert_eq!(got.unwrap().as_ref(), Some(v), "round {round}");
            }
        }
    }
    let good_blocks = blocks.len() as u64 - 1;
    let bad_lookups = model.keys().filter(|k| in_bad(k)).count() as u64;
    // Every good block read from the file once; the damaged one on
    // every lookup in it.
    assert_eq!(r.blocks_read(), good_blocks + 2 * bad_lookups);
    let misses = stats.ledger_block_cache_misses.load(Ordering::Relaxed);
    let hits = stats.ledger_block_cache_hits.load(Ordering::Relaxed);
    assert_eq!(misses, good_blocks + 2 * bad_lookups);
    assert_eq!(hits + misses, 2 * model.len() as u64);
    assert_eq!(
        stats.sst_block_read.count.load(Ordering::Relaxed),
        misses,
        "only reads from the file are timed"
    );
    assert!(cache.bytes() > 0);
    drop(r);
    assert_eq!(
        cache.bytes(),
        0,
        "a dropped reader's blocks leave the cache"
    );

    // Two readers of the same file never share entries.
    let a = SstReader::open_cached(&path, Some(cache.clone())).unwrap();
    let b = SstReader::open_cached(&path, Some(cache.clone())).unwrap();
    let k = model.keys().next().unwrap();
    a.get(k, crate::key::hash(k)).unwrap();
    b.get(k, crate::key::hash(k)).unwrap();
    assert_eq!((a.blocks_read(), b.blocks_read()), (1, 1));
}

#[test]
fn damaged_data_block_is_reported_not_returned() {
    let dir = tempfile::tempdir().unwrap();
    let (path, model, blocks) = second_block_damaged(dir.path());
    let bad = &blocks[1];

    let r = Arc::new(SstReader::open(&path).unwrap());
    for (k, v) in &model {
        let got = r.get(k, crate::key::hash(k));
        if k > &blocks[0].last_key && k <= &bad.last_key {
            let e = got.unwrap_err();
            assert!(e.is_corruption(), "{e}");
            let msg = e.to_string();
            assert!(msg.contains(&bad.offset.to_string()), "{msg}");
            assert!(msg.contains("1.sst"), "{msg}");
        } else {
            assert_eq!(got.unwrap().as_ref(), Some(v));
        }
    }

    let items: Vec<_> = r.range(b"", None).collect();
    let first_block_entries = model.keys().filter(|k| *k <= &blocks[0].last_key).count();
    assert_eq!(items.len(), first_block_entries + 1);
    assert!(items[..first_block_entries].iter().all(|i| i.is_ok()));
    assert!(items[first_block_entries]
        .as_ref()
        .unwrap_err()
        .is_corruption());
    // A range starting after the damage is unaffected.
    let after = scan(&r, &[blocks[1].last_key.as_slice(), b"\x00"].concat(), None);
    assert_eq!(
        after.len(),
        model.keys().filter(|k| *k > &blocks[1].last_key).count()
    );

    let report = r.verify().unwrap();
    assert_eq!(report.damaged_blocks, 1);
    assert_eq!(report.damage[0].block, 1);
    assert_eq!(report.damage[0].offset, bad.offset);
    assert!(!report.is_clean());

    let mut out = Vec::new();
    let dumped = dump(&path, &mut out, true).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(dumped.verify.damaged_blocks, 1);
    assert!(
        text.contains(&format!(
            "block 1 offset {} len {}: DAMAGED",
            bad.offset, bad.len
        )),
        "{text}"
    );
    assert!(text.contains("1 damaged"), "{text}");
    assert!(text.contains("object[b0, k00000] sqn 1 active"), "{text}");
}

#[test]
fn dump_of_a_healthy_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let model = sample(50);
    write(&path, &model, opts(512));
    let mut out = Vec::new();
    let report = dump(&path, &mut out, false).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(report.verify.is_clean());
    assert_eq!(report.verify.entries, model.len() as u64);
    assert!(text.contains("0 damaged"), "{text}");
    assert!(!text.contains("sqn 1 active"), "{text}");
    let mut out = Vec::new();
    dump(&path, &mut out, true).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("index[b0, field_bin, t0, key]"), "{text}");
    assert!(text.contains("tombstone"), "{text}");
}

#[test]
fn damaged_footer_index_bloom_or_meta_fails_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    write(&path, &sample(200), opts(512));
    let good = std::fs::read(&path).unwrap();
    let len = good.len() as u64;
    let footer = Footer::decode(&good[good.len() - FOOTER_BYTES..], len).unwrap();
    let spots = [
        len - 1,                                           // footer crc
        len - FOOTER_BYTES as u64,                         // magic
        len - FOOTER_BYTES as u64 + 9,                     // version
        len - FOOTER_BYTES as u64 + 13,                    // index offset
        len - 8,                                           // reserved
        footer.index.offset + 2,                           // index entry
        footer.index.offset + footer.index.len as u64 - 6, // index count
        footer.bloom.offset + 20,                          // bloom bits
        footer.bloom.offset,                               // bloom k
        footer.meta.offset + 3,                            // meta
    ];
    for spot in spots {
        std::fs::write(&path, &good).unwrap();
        flip(&path, spot);
        let e = SstReader::open(&path).unwrap_err();
        assert!(e.is_corruption(), "flip at {spot}: {e}");
        assert!(e.to_string().contains("1.sst"), "{e}");
        assert!(dump(&path, &mut Vec::new(), true).is_err());
    }
    std::fs::write(&path, &good).unwrap();
    flip(&path, len - FOOTER_BYTES as u64);
    assert!(!is_sst_file(&path).unwrap());
}

#[test]
fn truncated_file_fails_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    write(&path, &sample(100), opts(512));
    let good = std::fs::read(&path).unwrap();
    for cut in [
        0,
        1,
        10,
        63,
        64,
        100,
        good.len() / 2,
        good.len() - 64,
        good.len() - 1,
    ] {
        std::fs::write(&path, &good[..cut]).unwrap();
        let e = SstReader::open(&path).unwrap_err();
        assert!(e.is_corruption(), "cut at {cut}: {e}");
    }
    assert!(!is_sst_file(&path).unwrap());
    assert!(matches!(
        SstReader::open(&dir.path().join("missing.sst")),
        Err(Error::Io { .. })
    ));
}

#[test]
fn bloom_negative_get_reads_no_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let model = sample(300);
    write(&path, &model, opts(512));
    let r = SstReader::open(&path).unwrap();
    let mut negatives = 0;
    for i in 0..300u32 {
        // Within the file's key range, absent.
        let k = crate::key::object(b"b1", format!("k{i:05}x").as_bytes());
        assert!(k > r.summary().min_key && k < r.summary().max_key);
        let h = crate::key::hash(&k);
        let before = r.blocks_read();
        assert_eq!(r.get(&k, h).unwrap(), None);
        if !r.bloom().may_contain(h) {
            negatives += 1;
            assert_eq!(r.blocks_read(), before);
        } else {
            assert_eq!(r.blocks_read(), before + 1);
        }
    }
    assert!(negatives > 270, "{negatives}");
    // Index keys bypass the bloom.
    let k = crate::key::encode(KeyKind::Index, &[b"b0", b"field_bin", b"t1", b"key"]);
    let before = r.blocks_read();
    assert!(r.get(&k, crate::key::hash(&k)).unwrap().is_some());
    assert_eq!(r.blocks_read(), before + 1);
}

#[test]
fn nothing_between_is_exact() {
    assert!(nothing_between(b"ab", b"ab\0"));
    assert!(nothing_between(b"ab", b"ab"));
    assert!(nothing_between(b"ab", b"a"));
    assert!(!nothing_between(b"ab", b"ab\0\0"));
    assert!(!nothing_between(b"ab", b"ab\x01"));
    assert!(!nothing_between(b"ab", b"ac"));
    assert!(!nothing_between(b"", b"\x01"));
    assert!(nothing_between(b"", b"\0"));
}

#[test]
fn ranges_ending_at_block_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let model = sample(200);
    write(&path, &model, opts(200));
    let r = Arc::new(SstReader::open(&path).unwrap());
    let blocks = r.blocks().to_vec();
    for w in blocks.windows(2) {
        let (a, b) = (&w[0].last_key, &w[1].last_key);
        for (s, e) in [
            (a.clone(), Some(b.clone())),
            (a.clone(), Some([a.as_slice(), b"\0"].concat())),
            (
                [a.as_slice(), b"\0"].concat(),
                Some([b.as_slice(), b"\0"].concat()),
            ),
            (b.clone(), Some(a.clone())),
        ] {
            assert_eq!(
                scan(&r, &s, e.as_deref()),
                model_range(&model, &s, e.as_deref())
            );
        }
    }
}

#[test]
fn concurrent_readers_share_one_handle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let model = Arc::new(sample(300));
    write(&path, &model, opts(256));
    let r = Arc::new(SstReader::open(&path).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (r, model) = (Arc::clone(&r), Arc::clone(&model));
            std::thread::spawn(move || {
                for (k, v) in model.iter().skip(t).step_by(4) {
                    assert_eq!(r.get(k, crate::key::hash(k)).unwrap().as_ref(), Some(v));
                }
                assert_eq!(r.range(b"", None).count(), model.len());
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn file_shrunk_after_open_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("1.sst");
    let model = sample(100);
    write(&path, &model, opts(256));
    let r = SstReader::open(&path).unwrap();
    let cut = r.blocks()[2].offset + 4;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let k = &r.blocks()[3].last_key;
    assert!(r.get(k, crate::key::hash(k)).unwrap_err().is_corruption());
    let report = r.verify().unwrap();
    assert_eq!(report.damaged_blocks, report.blocks - 2);
}

#[test]
fn render_key_falls_back_to_hex() {
    assert_eq!(render_key(&crate::key::object(b"b", b"k")), "object[b, k]");
    assert_eq!(render_key(b"xyz"), "0x78797a");
    assert_eq!(render_key(b""), "0x");
}

fn arb_model() -> impl Strategy<Value = Model> {
    let key = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..8),
        (
            proptest::collection::vec(0u8..4, 0..3),
            proptest::collection::vec(any::<u8>(), 0..6)
        )
            .prop_map(|(b, k)| crate::key::object(&b, &k)),
    ];
    let value = (any::<u64>(), any::<bool>(), 0usize..300, any::<u64>())
        .prop_map(|(sqn, t, meta, lm)| val(sqn, t, meta, lm));
    proptest::collection::btree_map(key, value, 1..120)
}

fn arb_bound() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..6),
        (
            proptest::collection::vec(0u8..4, 0..3),
            proptest::collection::vec(any::<u8>(), 0..6)
        )
            .prop_map(|(b, k)| crate::key::object(&b, &k)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn matches_btreemap_model(model in arb_model(),
                              block_bytes in 32usize..700,
                              codec in prop_oneof![
                                  Just(Compression::None),
                                  Just(Compression::Lz4),
                                  Just(Compression::Zstd)
                              ],
                              probes in proptest::collection::vec(arb_bound(), 0..20),
                              ranges in proptest::collection::vec(
                                  (arb_bound(), proptest::option::of(arb_bound())), 0..10)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.sst");
        write(&path, &model, SstOptions { compression: codec, ..opts(block_bytes) });
        let r = Arc::new(SstReader::open(&path).unwrap());
        for (k, v) in &model {
            prop_assert_eq!(r.get(k, crate::key::hash(k)).unwrap(), Some(v.clone()));
        }
        for k in &probes {
            prop_assert_eq!(r.get(k, crate::key::hash(k)).unwrap(), model.get(k).cloned());
        }
        prop_assert_eq!(scan(&r, b"", None), model_range(&model, b"", None));
        for (s, e) in &ranges {
            prop_assert_eq!(scan(&r, s, e.as_deref()), model_range(&model, s, e.as_deref()));
        }
        prop_assert!(r.verify().unwrap().is_clean());
    }

    #[test]
    fn open_never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.sst");
        std::fs::write(&path, &bytes).unwrap();
        prop_assert!(SstReader::open(&path).is_err());
        let _ = is_sst_file(&path);
    }

    #[test]
    fn damaged_files_never_panic(cut in any::<proptest::sample::Index>(),
                                 flips in proptest::collection::vec(
                                     (any::<proptest::sample::Index>(), 1u8..=255), 0..4),
                                 truncate in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sst");
        let model = sample(40);
        write(&path, &model, opts(128));
        let mut bytes = std::fs::read(&path).unwrap();
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        for (at, x) in &flips {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] ^= x;
            }
        }
        std::fs::write(&path, &bytes).unwrap();
        if let Ok(r) = SstReader::open(&path) {
            let r = Arc::new(r);
            for k in model.keys() {
                if let Ok(Some(v)) = r.get(k, crate::key::hash(k)) {
                    // Any value returned is the one written.
                    prop_assert_eq!(Some(&v), model.get(k));
                }
            }
            let _ = r.range(b"", None).count();
            let _ = r.verify();
            let _ = dump(&path, &mut std::io::sink(), true);
        } else {
            prop_assert!(truncate || !flips.is_empty());
        }
    }
}
