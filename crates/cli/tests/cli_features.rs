//! End-to-end tests of the `basalt kv` commands over secondary indexes,
//! folds, journal compaction and hot backup: `index` (equality, ranges,
//! `--return-terms`, `--regex`, `--count`, `$bucket`, `$key`, paging with
//! continuations, one-line exit-2 errors for bad input), `--index` /
//! `--remove-index` on `put` and `delete`, `--ttl` on `put` (`--ttl 0` is
//! already expired), the fourth import column, `fold keys|heads|objects`,
//! `buckets`, `compact` and `backup`.

#![allow(clippy::unwrap_used)]

mod common;

use basalt_engine::{Config, Store};
use common::{assert_user_error, code, kv, stderr, stdout};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::path::Path;

/// Runs a `kv` command that must succeed; returns stdout.
fn ok(dir: &Path, args: &[&str], stdin: &[u8]) -> String {
    let out = kv(dir, args, stdin);
    assert_eq!(code(&out), 0, "kv {args:?}: {}", stderr(&out));
    stdout(&out)
}

fn get(dir: &Path, bucket: &str, key: &str) -> Option<Vec<u8>> {
    let out = kv(dir, &["get", bucket, key], b"");
    match code(&out) {
        0 => Some(out.stdout),
        1 => None,
        c => panic!("get {bucket}/{key} exit {c}: {}", stderr(&out)),
    }
}

/// Puts `users/uN` with `name_bin` and `age_int` index entries.
fn users(dir: &Path) {
    for (key, name, age) in [
        ("u1", "alice", "31"),
        ("u2", "bob", "-5"),
        ("u3", "carol", "31"),
        ("u4", "dave", "70"),
        ("u5", "alfred", "12"),
    ] {
        let name = format!("name_bin={name}");
        let age = format!("age_int={age}");
        ok(
            dir,
            &["put", "--index", &name, "--index", &age, "users", key],
            key.as_bytes(),
        );
    }
}

#[test]
fn index_queries_print_keys_terms_and_counts() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    users(dir);
    ok(dir, &["put", "other", "x"], b"v");

    assert_eq!(ok(dir, &["index", "users", "name_bin", "bob"], b""), "u2\n");
    assert_eq!(
        ok(dir, &["index", "users", "age_int", "31"], b""),
        "u1\nu3\n"
    );
    // Numeric order, negative numbers first; terms printed as decimal text.
    assert_eq!(
        ok(
            dir,
            &["index", "users", "age_int", "-100", "40", "--return-terms"],
            b""
        ),
        "-5\tu2\n12\tu5\n31\tu1\n31\tu3\n"
    );
    assert_eq!(
        ok(
            dir,
            &["index", "users", "name_bin", "a", "c", "--return-terms"],
            b""
        ),
        "alfred\tu5\nalice\tu1\nbob\tu2\n"
    );
    // As in Riak, terms are not returned for equality queries.
    assert_eq!(
        ok(
            dir,
            &["index", "users", "name_bin", "bob", "--return-terms"],
            b""
        ),
        "u2\n"
    );
    assert_eq!(
        ok(
            dir,
            &["index", "users", "name_bin", "a", "z", "--regex", "^al"],
            b""
        ),
        "u5\nu1\n"
    );
    assert_eq!(
        ok(
            dir,
            &["index", "users", "age_int", "0", "100", "--count"],
            b""
        ),
        "4\n"
    );
    assert_eq!(
        ok(dir, &["index", "users", "name_bin", "zzz", "--count"], b""),
        "0\n"
    );
    // Pseudo-fields: every key of the bucket (START optional), key ranges.
    assert_eq!(
        ok(dir, &["index", "users", "$bucket"], b""),
        "u1\nu2\nu3\nu4\nu5\n"
    );
    assert_eq!(
        ok(
            dir,
            &["index", "users", "$bucket", "ignored", "--count"],
            b""
        ),
        "5\n"
    );
    assert_eq!(
        ok(dir, &["index", "users", "$key", "u2", "u4"], b""),
        "u2\nu3\nu4\n"
    );
    assert_eq!(
        ok(
            dir,
            &["index", "users", "$key", "u2", "u3", "--return-terms"],
            b""
        ),
        "u2\tu2\nu3\tu3\n"
    );
    assert_eq!(ok(dir, &["index", "nobody", "$bucket"], b""), "");
}

#[test]
fn index_paging_with_continuation_reproduces_the_full_result() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let mut input = String::new();
    for i in 0..23 {
        // Two keys per term for some terms: paging must split between them.
        input.push_str(&format!("b\tk{i:02}\tv\tscore_int={}\n", i / 2));
    }
    ok(dir, &["import"], input.as_bytes());
    for (field, start, end) in [("score_int", "0", "100"), ("$bucket", "_", "_")] {
        let full = ok(
            dir,
            &["index", "b", field, start, end, "--return-terms"],
            b"",
        );
        assert_eq!(full.lines().count(), 23, "{full}");
        assert!(!full.contains("continuation"), "{full}");
        let mut paged = String::new();
        let mut cont: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut args = vec![
                "index",
                "b",
                field,
                start,
                end,
                "--return-terms",
                "--max-results",
                "5",
            ];
            if let Some(c) = &cont {
                args.extend(["--continuation", c.as_str()]);
            }
            let page = ok(dir, &args, b"");
            pages += 1;
            assert!(pages <= 10, "paging does not end: {page}");
            let mut lines: Vec<&str> = page.lines().collect();
            cont = match lines.last().and_then(|l| l.strip_prefix("continuation\t")) {
                Some(c) => {
                    let c = c.to_owned();
                    lines.pop();
                    assert_eq!(lines.len(), 5, "a full page: {page}");
                    Some(c)
                }
                None => None,
            };
            for l in lines {
                paged.push_str(l);
                paged.push('\n');
            }
            if cont.is_none() {
                break;
            }
        }
        assert_eq!(paged, full, "field {field}");
        assert_eq!(pages, 5, "23 results in pages of 5");
    }
    // --count counts what follows a continuation.
    let first = ok(
        dir,
        &["index", "b", "score_int", "0", "100", "--max-results", "20"],
        b"",
    );
    let c = first.lines().last().unwrap().strip_prefix("continuation\t");
    let c = c.unwrap();
    assert_eq!(
        ok(
            dir,
            &[
                "index",
                "b",
                "score_int",
                "0",
                "100",
                "--count",
                "--continuation",
                c
            ],
            b""
        ),
        "3\n"
    );
}

#[test]
fn index_bad_input_exits_2_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    users(dir);
    let cases: &[(&[&str], &str)] = &[
        (
            &["index", "users", "name", "x"],
            "must end in _bin or _int, or be $bucket or $key",
        ),
        (
            &["index", "users", "age_int", "old"],
            "term 'old' is not an integer",
        ),
        (
            &["index", "users", "age_int", "1", "1e3"],
            "term '1e3' is not an integer",
        ),
        (
            &[
                "index",
                "users",
                "name_bin",
                "a",
                "z",
                "--regex",
                "(unclosed",
            ],
            "term_regex '(unclosed' is invalid",
        ),
        (
            &["index", "users", "age_int", "0", "9", "--regex", "1"],
            "term_regex applies to _bin fields only",
        ),
        (
            &[
                "index",
                "users",
                "name_bin",
                "a",
                "--continuation",
                "!!garbled!!",
            ],
            "continuation '!!garbled!!' is invalid: not base64",
        ),
        (
            &["index", "users", "name_bin", "a", "--continuation", "AAAA"],
            "is invalid",
        ),
        (
            &["index", "users", "name_bin", "a", "--max-results", "0"],
            "max_results must be at least 1",
        ),
        (
            &["index", "users", "name_bin"],
            "index query on 'name_bin' needs a START term",
        ),
        (&["index", "", "name_bin", "a"], "bucket must not be empty"),
        (
            &["put", "--index", "no_equals_bin", "b", "k"],
            "--index 'no_equals_bin' is not FIELD=TERM",
        ),
        (
            &["put", "--index", "name=x", "b", "k"],
            "index field 'name' must end in _bin or _int",
        ),
        (
            &["put", "--index", "age_int=abc", "b", "k"],
            "term 'abc' is not an integer",
        ),
        (
            &["delete", "--remove-index", "=x", "b", "k"],
            "--remove-index '=x' is not FIELD=TERM",
        ),
    ];
    for (args, want) in cases {
        let err = assert_user_error(&kv(dir, args, b"v"));
        assert!(err.contains(want), "kv {args:?}: want '{want}' in: {err}");
    }
    // A continuation of another query is refused too.
    let page = ok(
        dir,
        &["index", "users", "name_bin", "a", "z", "--max-results", "1"],
        b"",
    );
    let c = page.lines().last().unwrap().strip_prefix("continuation\t");
    let err = assert_user_error(&kv(
        dir,
        &[
            "index",
            "users",
            "age_int",
            "0",
            "99",
            "--continuation",
            c.unwrap(),
        ],
        b"",
    ));
    assert!(err.contains("belongs to another bucket or field"), "{err}");
    // The refused puts wrote nothing.
    assert_eq!(get(dir, "b", "k"), None);
}

#[test]
fn remove_index_on_put_and_delete() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    ok(dir, &["put", "--index", "tag_bin=red", "b", "k1"], b"one");
    ok(dir, &["put", "--index", "tag_bin=red", "b", "k2"], b"two");
    assert_eq!(ok(dir, &["index", "b", "tag_bin", "red"], b""), "k1\nk2\n");
    // The caller supplies the diff: re-tag k1 from red to blue.
    ok(
        dir,
        &[
            "put",
            "--remove-index",
            "tag_bin=red",
            "--index",
            "tag_bin=blue",
            "b",
            "k1",
        ],
        b"one again",
    );
    assert_eq!(ok(dir, &["index", "b", "tag_bin", "red"], b""), "k2\n");
    assert_eq!(ok(dir, &["index", "b", "tag_bin", "blue"], b""), "k1\n");
    // A delete carrying the removal removes the entry with the object.
    ok(
        dir,
        &["delete", "--remove-index", "tag_bin=red", "b", "k2"],
        b"",
    );
    assert_eq!(ok(dir, &["index", "b", "tag_bin", "red"], b""), "");
    assert_eq!(get(dir, "b", "k2"), None);
    assert_eq!(get(dir, "b", "k1").unwrap(), b"one again");
}

#[test]
fn import_fourth_column_adds_index_entries() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let input = b"b\tk1\tv1\tcolor_bin=red,size_int=3\n\
                  b\tk2\tv2\t\n\
                  b\tk3\tv3\tcolor_bin=red\n\
                  b\tk4\tv4\n";
    assert_eq!(
        ok(dir, &["import"], input),
        "ok\tb\tk1\nok\tb\tk2\nok\tb\tk3\nok\tb\tk4\n"
    );
    assert_eq!(
        ok(dir, &["index", "b", "color_bin", "red"], b""),
        "k1\nk3\n"
    );
    assert_eq!(ok(dir, &["index", "b", "size_int", "3"], b""), "k1\n");
    assert_eq!(get(dir, "b", "k2").unwrap(), b"v2");

    // A malformed pair stops the import at its line.
    let out = kv(
        dir,
        &["import"],
        b"b\tk5\tv5\tcolor_bin=blue\nb\tk6\tv6\tcolor_bin=blue,oops\nb\tk7\tv7\n",
    );
    let err = assert_user_error(&out);
    assert!(
        err.contains("stdin line 2") && err.contains("'oops'") && err.contains("field=term"),
        "{err}"
    );
    assert_eq!(stdout(&out), "ok\tb\tk5\n");
    assert_eq!(get(dir, "b", "k6"), None);
    assert_eq!(get(dir, "b", "k7"), None);
    // An engine refusal of an index change names the line too.
    let err = assert_user_error(&kv(dir, &["import"], b"b\tk8\tv8\tn_int=x\n"));
    assert!(
        err.contains("stdin line 1") && err.contains("not an integer"),
        "{err}"
    );
}

#[test]
fn ttl_zero_is_already_expired_and_ttl_sets_expires_at() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    ok(
        dir,
        &["put", "--ttl", "0", "--index", "t_bin=x", "b", "gone"],
        b"v",
    );
    assert_eq!(get(dir, "b", "gone"), None);
    assert_eq!(code(&kv(dir, &["head", "b", "gone"], b"")), 1);
    assert_eq!(ok(dir, &["keys", "b"], b""), "");
    // Index entries of a TTL'd object expire with it.
    assert_eq!(ok(dir, &["index", "b", "t_bin", "x"], b""), "");

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    ok(dir, &["put", "--ttl", "3600", "b", "later"], b"v");
    let h: Value = serde_json::from_str(&ok(dir, &["head", "b", "later"], b"")).unwrap();
    let exp = h["expires_at"].as_u64().unwrap();
    assert!(exp >= now + 3600 && exp <= now + 3660, "{h}");
    assert_eq!(get(dir, "b", "later").unwrap(), b"v");

    let out = kv(dir, &["put", "--ttl", "-1", "b", "k"], b"v");
    assert_eq!(code(&out), 2, "clap refuses a negative ttl");
}

#[test]
fn fold_prints_keys_heads_and_objects_with_the_rate() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    ok(dir, &["put", "--meta", "m1", "b", "k1"], b"plain text");
    ok(dir, &["put", "b", "k2"], b"tab\there");
    ok(dir, &["put", "b", "k3"], b"\xff\x00");
    ok(dir, &["put", "b", "k4"], b"");
    ok(dir, &["put", "b", "k5"], b"0x41");
    ok(dir, &["put", "other", "z"], b"elsewhere");
    ok(dir, &["delete", "b", "k4"], b"");

    let check_rate = |out: &std::process::Output, n: u64| {
        let err = stderr(out);
        let line = err.trim_end();
        assert_eq!(line.lines().count(), 1, "{err}");
        let rest = line
            .strip_prefix(&format!("folded {n} keys in "))
            .unwrap_or_else(|| panic!("{err}"));
        let (ms, rate) = rest.split_once(" ms (").unwrap();
        assert!(ms.parse::<f64>().unwrap() >= 0.0, "{err}");
        assert!(rate.ends_with(" keys/s)"), "{err}");
        rate.trim_end_matches(" keys/s)").parse::<u64>().unwrap();
    };

    let out = kv(dir, &["fold", "keys", "b"], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "k1\nk2\nk3\nk5\n");
    check_rate(&out, 4);

    let out = kv(dir, &["fold", "objects", "b"], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "k1\tplain text\nk2\t0x7461620968657265\nk3\t0xff00\nk5\t0x30783431\n"
    );
    check_rate(&out, 4);

    let out = kv(dir, &["fold", "heads", "b"], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    check_rate(&out, 4);
    let heads: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(heads.len(), 4);
    let single: Value = serde_json::from_str(&ok(dir, &["head", "b", "k1"], b"")).unwrap();
    assert_eq!(heads[0], single, "fold heads has the shape of head");
    assert_eq!(heads[0]["metadata"], "m1");
    assert_eq!(heads[1]["key"], "k2");
    assert_eq!(heads[1]["size"], 8);
    assert_eq!(heads[3]["key"], "k5");

    let out = kv(dir, &["fold", "keys", "empty"], b"");
    assert_eq!(stdout(&out), "");
    check_rate(&out, 0);
    let err = assert_user_error(&kv(dir, &["fold", "keys", ""], b""));
    assert!(err.contains("bucket must not be empty"), "{err}");
    assert_eq!(code(&kv(dir, &["fold", "values", "b"], b"")), 2);
}

#[test]
fn buckets_lists_each_bucket_once() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    assert_eq!(ok(dir, &["buckets"], b""), "");
    ok(
        dir,
        &["import"],
        b"zeta\tk\tv\nalpha\tk1\tv\nalpha\tk2\tv\nmid\tk\tv\n",
    );
    ok(dir, &["delete", "mid", "k"], b"");
    assert_eq!(ok(dir, &["buckets"], b""), "alpha\nzeta\n");
}

/// Parses `name=value` fields of a summary line.
fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .parse()
        .unwrap()
}

#[test]
fn compact_after_overwrites_reclaims_bytes_and_data_reads_back() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    // Small journal files (written in-process) so the overwrites fill many
    // closed files; random values so compression cannot hide the garbage.
    let mut rng = StdRng::seed_from_u64(common::seed(71));
    let mut last = std::collections::BTreeMap::new();
    {
        let store = Store::open(Config::test_min(dir)).unwrap();
        for round in 0..20 {
            for i in 0..30u32 {
                let key = format!("k{i:02}");
                let mut value: Vec<u8> = (0..400).map(|_| rng.gen()).collect();
                value.extend_from_slice(format!("round {round}").as_bytes());
                store.put(b"b", key.as_bytes(), &value, b"").unwrap();
                last.insert(key, value);
            }
        }
        store.close().unwrap();
    }
    let journal = |dir: &Path| -> u64 {
        common::files_with_ext(&dir.join("journal"), "jnl")
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum()
    };
    let before = journal(dir);

    let summary = ok(dir, &["compact"], b"");
    assert_eq!(summary.lines().count(), 1, "{summary}");
    assert!(summary.starts_with("compacted runs="), "{summary}");
    assert!(field(&summary, "runs") >= 1, "{summary}");
    assert!(
        field(&summary, "files_in") > field(&summary, "files_out"),
        "{summary}"
    );
    let reclaimed = field(&summary, "bytes_reclaimed");
    assert!(reclaimed > 0, "{summary}");
    assert_eq!(
        reclaimed,
        field(&summary, "bytes_before") - field(&summary, "bytes_after"),
        "{summary}"
    );
    assert!(field(&summary, "records_dropped") > 0, "{summary}");
    assert!(
        journal(dir) < before,
        "journal {before} -> {}",
        journal(dir)
    );

    for (key, value) in &last {
        assert_eq!(get(dir, "b", key).as_ref(), Some(value), "{key}");
    }
    // Nothing is left worth compacting.
    let again = ok(dir, &["compact"], b"");
    assert_eq!(field(&again, "runs"), 0, "{again}");
    assert_eq!(field(&again, "bytes_reclaimed"), 0, "{again}");
}

/// `kv garbage` scores the closed journal files without changing them: one
/// line per file and a total that agrees with them; after `kv compact` the
/// garbage is gone.
#[test]
fn garbage_reports_what_compaction_would_reclaim() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let mut rng = StdRng::seed_from_u64(common::seed(72));
    {
        let store = Store::open(Config::test_min(dir)).unwrap();
        for _round in 0..10 {
            for i in 0..30u32 {
                let value: Vec<u8> = (0..400).map(|_| rng.gen()).collect();
                store
                    .put(b"b", format!("k{i:02}").as_bytes(), &value, b"")
                    .unwrap();
            }
        }
        store.close().unwrap();
    }
    let report = |dir: &Path| {
        let out = ok(dir, &["garbage"], b"");
        let total = out.lines().last().unwrap().to_string();
        assert!(total.starts_with("garbage files="), "{out}");
        let files: Vec<String> = out
            .lines()
            .filter(|l| l.starts_with("file="))
            .map(String::from)
            .collect();
        assert_eq!(files.len() as u64, field(&total, "files"), "{out}");
        let bytes: u64 = files.iter().map(|l| field(l, "bytes")).sum();
        assert_eq!(bytes, field(&total, "bytes"), "{out}");
        (total, files)
    };
    let (before, files) = report(dir);
    // 9 of every 10 records were overwritten.
    let pct: f64 = before
        .rsplit("garbage_pct=")
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(pct > 60.0, "{before}");
    assert!(files.iter().all(|l| l.contains("live_pct=")), "{files:?}");
    // It changed nothing.
    let (again, _) = report(dir);
    assert_eq!(field(&again, "bytes"), field(&before, "bytes"));
    ok(dir, &["compact"], b"");
    let (after, _) = report(dir);
    assert!(
        field(&after, "garbage_bytes") < field(&before, "garbage_bytes") / 4,
        "{before} -> {after}"
    );
}

#[test]
fn backup_opens_as_a_store_holding_the_values() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("store");
    let dest = d.path().join("backup");
    ok(
        &dir,
        &["put", "--index", "c_bin=x", "b", "k1"],
        b"value one",
    );
    ok(&dir, &["put", "b", "k2"], b"value two");
    ok(&dir, &["delete", "b", "k2"], b"");

    let report = ok(&dir, &["backup", dest.to_str().unwrap()], b"");
    assert_eq!(report.lines().count(), 1, "{report}");
    assert!(report.starts_with("backed up to "), "{report}");
    assert!(field(&report, "files") >= 1, "{report}");
    assert_eq!(
        field(&report, "files"),
        field(&report, "linked") + field(&report, "copied") + field(&report, "skipped"),
        "{report}"
    );
    assert_eq!(field(&report, "last_sqn"), 3, "{report}");

    // Writes after the backup are not in it.
    ok(&dir, &["put", "b", "k3"], b"after");
    assert_eq!(get(&dest, "b", "k1").unwrap(), b"value one");
    assert_eq!(get(&dest, "b", "k2"), None);
    assert_eq!(get(&dest, "b", "k3"), None);
    assert_eq!(ok(&dest, &["index", "b", "c_bin", "x"], b""), "k1\n");

    // Backing up again into the same place is incremental.
    let again = ok(&dir, &["backup", dest.to_str().unwrap()], b"");
    assert!(field(&again, "skipped") >= 1, "{again}");
    assert_eq!(get(&dest, "b", "k3").unwrap(), b"after");

    // A destination inside the store (existing or not) is refused.
    for inside in [dir.join("journal"), dir.join("new").join("sub")] {
        let err = assert_user_error(&kv(&dir, &["backup", inside.to_str().unwrap()], b""));
        assert!(err.contains("overlaps the store directory"), "{err}");
    }
    assert!(!dir.join("new").exists());
}
