//! Bitcask specifics: overwrites trigger merges (dead-byte and
//! fragmentation thresholds), merged files are deleted, tombstones keep
//! deleted keys deleted, and reopen (from hint files) reads everything back;
//! a write advances a merge by a bounded step, in records and in bytes.

use basalt_backend::{Admin, Reads, Writes};
use basalt_backends::bitcask::{Bitcask, BitcaskOptions, MERGE_STEP_BYTES, MERGE_STEP_RECORDS};
use basalt_backends::BackendConfig;

fn counter(b: &Bitcask, name: &str) -> u64 {
    b.stats()
        .expect("stats")
        .counters
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
        .expect("counter")
}

#[test]
fn overwrites_merge_and_reopen_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let opts = BitcaskOptions::from_config(&BackendConfig {
        test_min: true,
        ..Default::default()
    });
    let b = Bitcask::open(dir.path(), opts.clone()).unwrap();
    for round in 0..10u32 {
        for i in 0..200u32 {
            let v = format!("{round}-{i}-").repeat(10);
            b.put(
                b"m",
                format!("k{i}").as_bytes(),
                v.as_bytes(),
                b"",
                &Default::default(),
            )
            .unwrap();
        }
    }
    for i in 0..50u32 {
        b.delete(b"m", format!("k{i}").as_bytes(), &Default::default())
            .unwrap();
    }
    b.merge_all().unwrap();
    assert!(counter(&b, "merges") > 0, "threshold merges happened");
    let disk = b.stats().unwrap().disk_bytes;
    assert!(disk < 200 * 300 * 3, "merge reclaimed space: {disk} bytes");
    b.close().unwrap();
    drop(b);
    let b = Bitcask::open(dir.path(), opts).unwrap();
    for i in 0..200u32 {
        let got = b
            .get(b"m", format!("k{i}").as_bytes())
            .unwrap()
            .map(|o| o.value);
        let want = (i >= 50).then(|| format!("9-{i}-").repeat(10).into_bytes());
        assert_eq!(got, want, "k{i}");
    }
    assert_eq!(counter(&b, "corrupt_regions"), 0);
}

/// With large values a write's share of a merge is bounded by bytes, not
/// only by records: 64 records of 100 KB would be 6.4 MB read by one write.
/// Merges still finish, driven by the writes alone.
#[test]
fn a_write_advances_a_merge_of_large_values_by_a_bounded_step() {
    const VALUE: usize = 100_000;
    const KEYS: u32 = 40;
    let dir = tempfile::tempdir().unwrap();
    let opts = BitcaskOptions {
        max_file_bytes: 8 << 20,
        dead_bytes_merge_trigger: 4 << 20,
        dead_bytes_threshold: 1 << 20,
        ..Default::default()
    };
    let b = Bitcask::open(dir.path(), opts).unwrap();
    // One step may overshoot the byte bound by the record that crossed it.
    let bound = MERGE_STEP_BYTES + (VALUE as u64) * 2;
    assert!(bound < (MERGE_STEP_RECORDS as u64) * VALUE as u64);
    let mut steps = 0;
    for round in 0..12u32 {
        for i in 0..KEYS {
            let v = vec![b'a' + (round % 26) as u8; VALUE];
            let before = counter(&b, "merge_bytes_read");
            b.put(
                b"m",
                format!("k{i}").as_bytes(),
                &v,
                b"",
                &Default::default(),
            )
            .unwrap();
            let read = counter(&b, "merge_bytes_read") - before;
            assert!(
                read <= bound,
                "one write read {read} bytes for a merge (bound {bound})"
            );
            steps += u64::from(read > 0);
        }
    }
    assert!(steps > 0, "no merge step ran");
    assert!(counter(&b, "merges") > 0, "merges finish driven by writes");
    for i in 0..KEYS {
        let got = b.get(b"m", format!("k{i}").as_bytes()).unwrap().unwrap();
        assert_eq!(got.value, vec![b'a' + 11; VALUE], "k{i}");
    }
}
