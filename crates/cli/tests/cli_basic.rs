//! End-to-end tests of the `basalt` binary: every `kv` command round-trips
//! through a real data directory, the exit codes (0 / 1 not found / 2 error /
//! 3 damage) and the one-line error messages hold for user errors (empty key,
//! oversize key and value, locked directory, missing manifest, wrong store
//! kind, damaged SST pointing at repair), and `dump` reads a journal file,
//! the ledger MANIFEST and an SST file written by the engine in-process,
//! reporting damage with exit 3. `--version` names the version and the
//! commit; `generate` writes completions, man pages and the packaged config.

#![allow(clippy::unwrap_used)]

mod common;

use basalt_engine::ledger::sst::SstReader;
use basalt_engine::{Config, Store};
use common::{assert_user_error, basalt, code, kv, stderr, stdout};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::path::Path;

fn put(dir: &Path, bucket: &str, key: &str, value: &[u8]) {
    let out = kv(dir, &["put", bucket, key], value);
    assert_eq!(code(&out), 0, "put {bucket}/{key}: {}", stderr(&out));
}

fn get(dir: &Path, bucket: &str, key: &str) -> Option<Vec<u8>> {
    let out = kv(dir, &["get", bucket, key], b"");
    match code(&out) {
        0 => Some(out.stdout),
        1 => {
            assert!(stderr(&out).contains("not found"), "{}", stderr(&out));
            None
        }
        c => panic!("get {bucket}/{key} exit {c}: {}", stderr(&out)),
    }
}

fn keys(dir: &Path, bucket: &str) -> String {
    let out = kv(dir, &["keys", bucket], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    stdout(&out)
}

fn head(dir: &Path, bucket: &str, key: &str) -> Value {
    let out = kv(dir, &["head", bucket, key], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "head prints one line: {text}");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn put_get_head_delete_keys_round_trip() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    // Raw bytes survive: NUL, newline, tab, invalid UTF-8.
    let value: Vec<u8> = b"line1\nline2\t\0\xff\xfe end".to_vec();
    put(dir, "photos", "k2", b"two");
    put(dir, "photos", "k1", &value);
    put(dir, "photos", "k3", b"");
    put(dir, "other", "k9", b"elsewhere");
    assert_eq!(get(dir, "photos", "k1").unwrap(), value);
    assert_eq!(get(dir, "photos", "k3").unwrap(), b"");
    assert_eq!(get(dir, "photos", "nope"), None);
    assert_eq!(keys(dir, "photos"), "k1\nk2\nk3\n");
    assert_eq!(keys(dir, "other"), "k9\n");
    assert_eq!(keys(dir, "empty"), "");

    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let out = kv(
        dir,
        &["put", "--meta", "type=text", "photos", "k2"],
        b"two again",
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let h = head(dir, "photos", "k2");
    assert_eq!(h["bucket"], "photos");
    assert_eq!(h["key"], "k2");
    assert_eq!(h["size"], 9);
    assert_eq!(h["sqn"], 5, "fifth write of the store: {h}");
    assert_eq!(
        h["hash"].as_u64().unwrap(),
        basalt_engine::entry::value_hash(b"two again")
    );
    let lm = h["last_modified"].as_u64().unwrap();
    assert!(
        lm >= before && lm < before + 60_000_000,
        "last_modified {lm} vs {before}"
    );
    assert_eq!(h["expires_at"], 0);
    assert_eq!(h["metadata"], "type=text");
    assert_eq!(get(dir, "photos", "k2").unwrap(), b"two again");

    let out = kv(dir, &["delete", "photos", "k2"], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(get(dir, "photos", "k2"), None);
    let out = kv(dir, &["head", "photos", "k2"], b"");
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("not found"));
    assert!(out.stdout.is_empty());
    assert_eq!(keys(dir, "photos"), "k1\nk3\n");
}

#[test]
fn stats_is_json_with_the_store_shape() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    for i in 0..5 {
        put(dir, "b", &format!("k{i}"), b"v");
    }
    let out = kv(dir, &["delete", "b", "k0"], b"");
    assert_eq!(code(&out), 0);
    let out = kv(dir, &["stats"], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["last_sqn"], 6, "{s}");
    // Each command closes the store cleanly, so the ledger holds everything.
    assert_eq!(s["persisted_sqn"], 6, "{s}");
    assert_eq!(s["memtable_entries"], 0, "{s}");
    assert_eq!(s["counters"]["journal_replayed_records"], 0, "{s}");
    assert!(s["counters"]["puts"].is_u64(), "{s}");
    let levels = s["levels"].as_array().unwrap();
    assert_eq!(levels.len(), basalt_engine::limits::LEVELS);
    let entries: u64 = levels.iter().map(|l| l["entries"].as_u64().unwrap()).sum();
    let files: u64 = levels.iter().map(|l| l["files"].as_u64().unwrap()).sum();
    assert!(files >= 1 && entries >= 5, "{s}");
    assert!(levels[0]["bytes"].is_u64());
    let jf = s["journal_files"].as_array().unwrap();
    assert!(!jf.is_empty(), "{s}");
    assert_eq!(s["journal_file_count"], jf.len());
    assert_eq!(jf.last().unwrap()["last_sqn"], 6, "{s}");
    // The disk guard's sample of the store's filesystem.
    assert!(s["disk"]["total_bytes"].as_u64().unwrap() > 0, "{s}");
    assert!(s["disk"]["free_pct"].is_f64(), "{s}");
    assert_eq!(s["disk_writes_refused"], 0, "{s}");
}

#[test]
fn import_acks_each_line() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let input = b"b1\tk1\tv1\n\nb1\tk2\tvalue two\nb2\tk1\tv3\t\nb1\tk1\tv1 again";
    let out = kv(dir, &["--sync", "import"], input);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "ok\tb1\tk1\nok\tb1\tk2\nok\tb2\tk1\nok\tb1\tk1\n"
    );
    assert_eq!(get(dir, "b1", "k1").unwrap(), b"v1 again");
    assert_eq!(get(dir, "b1", "k2").unwrap(), b"value two");
    assert_eq!(get(dir, "b2", "k1").unwrap(), b"v3");
}

#[test]
fn import_stops_at_a_malformed_line() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let out = kv(
        dir,
        &["import"],
        b"b\tk1\tv1\nb\tk2\tv2\nno tabs here\nb\tk4\tv4\n",
    );
    let err = assert_user_error(&out);
    assert!(err.contains("line 3"), "{err}");
    assert_eq!(stdout(&out), "ok\tb\tk1\nok\tb\tk2\n");
    assert_eq!(get(dir, "b", "k2").unwrap(), b"v2");
    assert_eq!(get(dir, "b", "k4"), None);

    // An engine refusal is reported with its line number too.
    let out = kv(dir, &["import"], b"b\tk5\tv5\nb\t\tv\n");
    let err = assert_user_error(&out);
    assert!(
        err.contains("line 2") && err.contains("key must not be empty"),
        "{err}"
    );
    assert_eq!(get(dir, "b", "k5").unwrap(), b"v5");

    // A 4th column that is not field=term,... (see cli_features.rs).
    let out = kv(dir, &["import"], b"b\tk6\tv6\tindex-change\n");
    let err = assert_user_error(&out);
    assert!(
        err.contains("line 1: index change 'index-change' in the 4th column is not field=term"),
        "{err}"
    );
    assert_eq!(get(dir, "b", "k6"), None);
}

#[test]
fn user_errors_exit_2_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let err = assert_user_error(&kv(dir, &["put", "b", ""], b"v"));
    assert!(err.contains("key must not be empty"), "{err}");
    let err = assert_user_error(&kv(dir, &["put", "", "k"], b"v"));
    assert!(err.contains("bucket must not be empty"), "{err}");
    let err = assert_user_error(&kv(dir, &["get", "b", ""], b""));
    assert!(
        err.contains("key must not be empty") || err.contains("invalid input"),
        "{err}"
    );

    let long_key = "k".repeat(basalt_engine::limits::KEY_SIZE_BYTES_MAX + 1);
    let err = assert_user_error(&kv(dir, &["put", "b", &long_key], b"v"));
    assert!(err.contains("limit is 65536 bytes"), "{err}");

    let out = kv(dir, &["--value-max", "16", "put", "b", "k"], &[7u8; 16]);
    assert_eq!(
        code(&out),
        0,
        "a value of exactly the limit fits: {}",
        stderr(&out)
    );
    let err = assert_user_error(&kv(
        dir,
        &["--value-max", "16", "put", "b", "k2"],
        &[7u8; 17],
    ));
    assert!(
        err.contains("16 bytes") && err.contains("--value-max"),
        "{err}"
    );
    let err = assert_user_error(&kv(
        dir,
        &["--value-max", "16", "import"],
        b"b\tk3\t0123456789abcdefg\n",
    ));
    assert!(
        err.contains("line 1") && err.contains("limit is 16 bytes"),
        "{err}"
    );
    assert_eq!(get(dir, "b", "k2"), None);
    assert_eq!(get(dir, "b", "k3"), None);

    // Bad usage is clap's exit 2 too.
    assert_eq!(code(&kv(dir, &["frobnicate"], b"")), 2);
}

#[test]
fn a_second_opener_gets_the_lock_error() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    put(dir, "b", "k", b"v");
    let store = Store::open(Config::new(dir)).unwrap();
    let err = assert_user_error(&kv(dir, &["get", "b", "k"], b""));
    assert!(err.contains("already open"), "{err}");
    let err = assert_user_error(&kv(dir, &["put", "b", "k"], b"other"));
    assert!(err.contains("already open"), "{err}");
    store.close().unwrap();
    drop(store);
    assert_eq!(get(dir, "b", "k").unwrap(), b"v");
}

#[test]
fn missing_manifest_points_at_repair_which_fixes_it() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    for i in 0..20 {
        put(
            dir,
            "b",
            &format!("k{i:02}"),
            format!("value {i}").as_bytes(),
        );
    }
    std::fs::remove_file(dir.join("ledger").join("MANIFEST")).unwrap();
    let err = assert_user_error(&kv(dir, &["get", "b", "k01"], b""));
    assert!(err.contains("manifest") && err.contains("repair"), "{err}");
    let out = kv(dir, &["repair"], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("replayed 20 records"),
        "{}",
        stdout(&out)
    );
    for i in 0..20 {
        assert_eq!(
            get(dir, "b", &format!("k{i:02}")).unwrap(),
            format!("value {i}").as_bytes()
        );
    }
}

#[test]
fn wrong_store_kind_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("STORE"), "some-other-engine 3\n").unwrap();
    let err = assert_user_error(&kv(d.path(), &["keys", "b"], b""));
    assert!(err.contains("some-other-engine 3"), "{err}");

    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("notes.txt"), "not a store").unwrap();
    let err = assert_user_error(&kv(d.path(), &["keys", "b"], b""));
    assert!(err.contains("notes.txt"), "{err}");
}

/// A store with several journal files and SST files, written in-process
/// (values are random, so compression cannot shrink the journal).
fn small_store(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let store = Store::open(Config::test_min(dir)).unwrap();
    let mut rng = StdRng::seed_from_u64(600);
    let mut written = Vec::new();
    for i in 0..600u32 {
        let key = format!("key-{i:04}");
        let value: Vec<u8> = (0..rng.gen_range(100..300)).map(|_| rng.gen()).collect();
        store.put(b"dumpb", key.as_bytes(), &value, b"m").unwrap();
        written.push((key, value));
    }
    store.close().unwrap();
    written
}

fn dump(path: &Path, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<std::ffi::OsString> = vec!["dump".into()];
    args.extend(extra.iter().map(Into::into));
    args.push(path.into());
    basalt(&args, b"")
}

#[test]
fn dump_reads_journal_manifest_and_sst_files() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    small_store(dir);
    let jnl = common::files_with_ext(&dir.join("journal"), "jnl");
    let sst = common::files_with_ext(&dir.join("ledger"), "sst");
    assert!(jnl.len() >= 2, "expected several journal files: {jnl:?}");
    assert!(!sst.is_empty(), "expected SST files");

    let out = dump(&jnl[0], &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("key-0000"),
        "journal dump lists records:\n{text}"
    );
    let summary = dump(&jnl[0], &["--summary-only"]);
    assert_eq!(code(&summary), 0);
    assert!(summary.stdout.len() < out.stdout.len());

    let jix = common::files_with_ext(&dir.join("journal"), "jix");
    assert!(!jix.is_empty(), "closed journal files have index files");
    let out = dump(&jix[0], &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!out.stdout.is_empty());

    for manifest in [dir.join("ledger/MANIFEST"), dir.join("journal/MANIFEST")] {
        let out = dump(&manifest, &[]);
        assert_eq!(code(&out), 0, "{}: {}", manifest.display(), stderr(&out));
        assert!(!out.stdout.is_empty());
    }
    let text = stdout(&dump(&dir.join("ledger/MANIFEST"), &[]));
    let first_sst = sst[0].file_name().unwrap().to_str().unwrap();
    let listed = text.contains(first_sst)
        || sst
            .iter()
            .any(|p| text.contains(p.file_name().unwrap().to_str().unwrap()));
    assert!(listed, "ledger manifest lists its SST files:\n{text}");

    for path in &sst {
        let out = dump(path, &[]);
        assert_eq!(code(&out), 0, "{}: {}", path.display(), stderr(&out));
        assert!(stdout(&out).contains("key-0"), "{}", stdout(&out));
    }
}

#[test]
fn dump_reports_damage_with_exit_3_and_unknown_files_with_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    small_store(dir);
    let jnl = common::files_with_ext(&dir.join("journal"), "jnl");
    let sst = common::files_with_ext(&dir.join("ledger"), "sst");

    let bad_jnl = d.path().join("bad.jnl");
    std::fs::copy(&jnl[0], &bad_jnl).unwrap();
    let len = std::fs::metadata(&bad_jnl).unwrap().len();
    common::flip_bytes(&bad_jnl, &[len / 2]);
    let out = dump(&bad_jnl, &[]);
    assert_eq!(
        code(&out),
        3,
        "stdout: {}\nstderr: {}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).to_uppercase().contains("DAMAGED") || stdout(&out).contains("CORRUPT"));
    assert!(stderr(&out).contains("DAMAGED"), "{}", stderr(&out));

    let bad_sst = d.path().join("bad.sst");
    std::fs::copy(&sst[0], &bad_sst).unwrap();
    let block = SstReader::open(&bad_sst).unwrap().blocks()[0].clone();
    common::flip_bytes(&bad_sst, &[block.offset + u64::from(block.len) / 2]);
    let out = dump(&bad_sst, &[]);
    assert_eq!(
        code(&out),
        3,
        "stdout: {}\nstderr: {}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("DAMAGED"), "{}", stdout(&out));

    let bad_manifest = d.path().join("ledger-manifest-copy");
    std::fs::copy(dir.join("ledger/MANIFEST"), &bad_manifest).unwrap();
    common::flip_bytes(&bad_manifest, &[12]);
    let out = dump(&bad_manifest, &[]);
    assert_eq!(
        code(&out),
        3,
        "stdout: {}\nstderr: {}",
        stdout(&out),
        stderr(&out)
    );

    let unknown = d.path().join("random.bin");
    std::fs::write(&unknown, vec![0x42u8; 4096]).unwrap();
    let err = assert_user_error(&dump(&unknown, &[]));
    assert!(err.contains("not a Basalt store file"), "{err}");
    let err = assert_user_error(&dump(&d.path().join("missing.sst"), &[]));
    assert!(err.contains("missing.sst"), "{err}");
}

#[test]
fn sst_damage_points_at_repair_which_fixes_it() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let written = small_store(dir);
    // One flipped byte in every data block of every SST file.
    for path in common::files_with_ext(&dir.join("ledger"), "sst") {
        let blocks = SstReader::open(&path).unwrap().blocks().to_vec();
        let offsets: Vec<u64> = blocks.iter().map(|b| b.offset + 1).collect();
        common::flip_bytes(&path, &offsets);
    }
    let out = kv(dir, &["get", "dumpb", &written[0].0], b"");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    // The engine may log the damage (at error level) before the error line.
    let err = stderr(&out);
    let last = err.trim_end().lines().last().unwrap();
    assert!(last.starts_with("basalt: error: "), "{err}");
    assert!(last.contains("corrupt") && last.contains("repair"), "{err}");
    let out = kv(dir, &["repair"], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for (key, value) in written.iter().step_by(50) {
        assert_eq!(get(dir, "dumpb", key).unwrap(), *value, "{key}");
    }
}

#[test]
fn help_documents_the_exit_codes() {
    let out = basalt(&["dump", "--help"], b"");
    assert_eq!(code(&out), 0);
    let text = stdout(&out);
    assert!(
        text.contains("Exit codes") && text.contains("3  the file was read but damage was found"),
        "{text}"
    );
    let out = basalt(&["kv", "--help"], b"");
    assert!(stdout(&out).contains("1  not found"), "{}", stdout(&out));
}

/// A reader that closes the pipe early gets the process ended quietly
/// with status 141 (as SIGPIPE), not a panic message.
#[test]
fn a_closed_stdout_ends_the_process_quietly() {
    let mut child = std::process::Command::new(common::bin())
        .args(["start", "--print-default-config"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before the child writes.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    // 141 when the write met the closed pipe (0 if the whole text fit in
    // the pipe before it closed: not possible once it is closed first).
    assert_eq!(out.status.code(), Some(141), "{err}");
}

#[test]
fn version_names_the_commit_and_generate_writes_the_package_files() {
    let out = basalt(&["--version"], b"");
    assert_eq!(code(&out), 0);
    let line = stdout(&out);
    let rest = line
        .trim_end()
        .strip_prefix(concat!("basalt ", env!("CARGO_PKG_VERSION"), " (commit "))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{line:?}"));
    let hash = rest.strip_suffix("-dirty").unwrap_or(rest);
    assert!(
        hash == "unknown" || (hash.len() >= 7 && hash.bytes().all(|b| b.is_ascii_hexdigit())),
        "{line:?}"
    );

    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    for args in [
        vec!["generate", "completions"],
        vec!["generate", "man"],
        vec!["generate", "config"],
    ] {
        let target = p.join(args[1]);
        let mut args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        args.push(target.as_os_str());
        let out = basalt(&args, b"");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    for f in [
        "completions/basalt.bash",
        "completions/_basalt",
        "completions/basalt.fish",
    ] {
        assert!(p.join(f).is_file(), "{f}");
    }
    for f in ["man/basalt.1", "man/basalt-start.1", "man/basalt-kv-put.1"] {
        assert!(p.join(f).is_file(), "{f}");
    }
    let config = std::fs::read_to_string(p.join("config")).unwrap();
    assert!(
        config.contains("\ndata_dir = \"/var/lib/basalt\"\n"),
        "{config}"
    );
    assert!(config.contains("\nlog_format = \"text\"\n"), "{config}");
    // Hidden from the help.
    assert!(!stdout(&basalt(&["--help"], b"")).contains("generate"));
}
