//! Helpers shared by the `basalt` CLI integration tests: running the binary,
//! the test seed, listing a store's files, copying a store and flipping
//! bytes, a free loopback address for a node's listeners.

#![allow(dead_code, clippy::unwrap_used)]

pub mod ports;
pub mod procs;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A free loopback address (`127.0.0.1:PORT`) for a node's listener,
/// below the kernel's ephemeral range ([`ports::free_port`]).
pub fn free_addr() -> String {
    format!("127.0.0.1:{}", ports::free_port())
}

/// Path of the `basalt` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_basalt")
}

/// Runs `basalt ARGS` with `stdin` and waits for it.
pub fn basalt<S: AsRef<std::ffi::OsStr>>(args: &[S], stdin: &[u8]) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    // Feed stdin from a thread so a large input cannot dead-lock against a full stdout pipe.
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

/// Runs `basalt kv --data-dir DIR ARGS` with `stdin`.
pub fn kv(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut all: Vec<std::ffi::OsString> = vec!["kv".into(), "--data-dir".into(), dir.into()];
    all.extend(args.iter().map(Into::into));
    basalt(&all, stdin)
}

/// The exit code (panics if the process was killed by a signal).
pub fn code(out: &Output) -> i32 {
    out.status.code().expect("process ended by a signal")
}

/// stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts the command failed the way user errors must: exit 2, one
/// `basalt: error:` line on stderr, no panic. Returns stderr.
pub fn assert_user_error(out: &Output) -> String {
    let err = stderr(out);
    assert_eq!(code(out), 2, "expected exit 2; stderr: {err}");
    assert!(err.starts_with("basalt: error: "), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "stderr: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "stderr: {err}"
    );
    err
}

/// The seed for this run: `BASALT_TEST_SEED` if set, else `default`. Printed
/// so a failure can be replayed.
pub fn seed(default: u64) -> u64 {
    let seed = match std::env::var("BASALT_TEST_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .expect("BASALT_TEST_SEED must be an integer"),
        Err(_) => default,
    };
    println!("seed {seed} (set BASALT_TEST_SEED={seed} to replay)");
    seed
}

/// Files directly in `dir` whose name ends with `.ext`, sorted by name
/// (without the journal's empty spare, see below).
pub fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    // An empty `.jnl` (its 16-byte header only) is the spare the journal
    // makes ahead of a roll: listed nowhere, holding nothing; left out.
    let spare = |p: &Path| ext == "jnl" && std::fs::metadata(p).is_ok_and(|m| m.len() <= 16);
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext) && !spare(p))
        .collect();
    v.sort();
    v
}

/// Copies the directory tree `from` to `to` (which must not exist).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// XORs each byte at `offsets` in `path` with 0x5a (never a no-op).
pub fn flip_bytes(path: &Path, offsets: &[u64]) {
    let mut bytes = std::fs::read(path).unwrap();
    for &off in offsets {
        let i = usize::try_from(off).unwrap();
        assert!(i < bytes.len(), "offset {off} beyond {}", path.display());
        bytes[i] ^= 0x5a;
    }
    std::fs::write(path, bytes).unwrap();
}

/// `BASALT_LONG_TESTS=1`: the long versions of soak, partition and
/// crash-loop tests.
pub fn long() -> bool {
    std::env::var("BASALT_LONG_TESTS").is_ok_and(|v| v == "1")
}

/// Runs `basalt admin --node NODE ARGS`: (exit status 0, stdout + stderr).
pub fn admin(node: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(bin())
        .args(["admin", "--node", node])
        .args(args)
        .output()
        .expect("run basalt admin");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Polls `cond` every 200 ms; panics naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// What one `basalt admin aae round` on a node found.
#[derive(Debug, Clone, Copy, Default)]
pub struct AaeRound {
    /// Dirty segments plus exchanges skipped (trees not built, a list
    /// busy): 0 means every list this node leads was seen in sync.
    pub unclean: u64,
    /// Keys read-repaired.
    pub repaired: u64,
}

/// Runs `basalt admin aae round` on `node` and reads its totals line.
pub fn aae_round(node: &str) -> AaeRound {
    let (ok, out) = admin(node, &["aae", "round"]);
    assert!(ok, "{out}");
    // "anti-entropy round: N dirty segments, N keys repaired, ..., N exchanges skipped"
    let field = |name: &str| -> u64 {
        out.split(',')
            .find(|p| p.contains(name))
            .and_then(|p| p.split_whitespace().rev().nth(name.split(' ').count()))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {name:?} in {out:?}"))
    };
    AaeRound {
        unclean: field("dirty segments") + field("exchanges skipped"),
        repaired: field("keys repaired"),
    }
}
