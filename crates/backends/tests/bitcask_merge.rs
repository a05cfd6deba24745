//! Bitcask specifics: overwrites trigger merges (dead-byte and
//! fragmentation thresholds), merged files are deleted, tombstones keep
//! deleted keys deleted, and reopen (from hint files) reads everything back.

use basalt_backend::{Admin, Reads, Writes};
use basalt_backends::bitcask::{Bitcask, BitcaskOptions};
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
