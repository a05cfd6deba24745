//! `basalt admin diag DIR`: a support bundle, as Riak's `riak-debug`.
//!
//! Everything about the node is asked over its cluster port (the admin
//! lines `config`, `status`, `member-status`, ... and the bucket type
//! list), so the bundle of a remote node is as complete as a local one's;
//! the node measures its own data directory (`disk-usage`). Its config
//! comes without secrets: the node redacts any setting named like a
//! password, secret, token or cookie, and the key and certificate
//! settings are paths only (no file they name is read). Basalt nodes log
//! to stderr, so there is no log path to ask the node for: `--log FILE`
//! adds the tail of a file this machine can read (where the node's
//! supervisor writes its stderr). Each item is one file in DIR;
//! `MANIFEST.txt` and `manifest.json` list what was collected and what
//! failed, and why. DIR must be new or empty. Exit 0 when everything was
//! collected, 1 when something failed (the manifest says what).

use crate::admin_client::{line, AdminNode};
use anyhow::Context;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Arguments of `basalt admin diag`.
#[derive(Debug, clap::Args)]
pub struct DiagArgs {
    /// The directory to write into (created; must be empty if it exists).
    dir: PathBuf,
    /// A log file of the node readable here (repeatable): its last
    /// 1 MiB goes into the bundle.
    #[arg(long = "log")]
    logs: Vec<PathBuf>,
}

/// Bytes of a log file's tail that go into the bundle.
const LOG_TAIL_BYTES: u64 = 1024 * 1024;

/// The admin lines collected: (file, what it holds, line, as JSON).
const ITEMS: [(&str, &str, &str, bool); 13] = [
    (
        "services.txt",
        "the node's name and services",
        "services",
        false,
    ),
    (
        "config.toml",
        "the running configuration, secrets redacted",
        "config",
        false,
    ),
    (
        "status.txt",
        "statistics (riak admin status)",
        "status",
        false,
    ),
    (
        "stats.json",
        "statistics as HTTP /stats serves them",
        "status",
        true,
    ),
    ("member-status.txt", "members", "member-status", false),
    (
        "ring-status.txt",
        "pending transfers and this node's handoffs",
        "ring-status",
        false,
    ),
    (
        "transfers.txt",
        "handoffs across the cluster",
        "transfers",
        false,
    ),
    (
        "vnode-status.txt",
        "each local vnode: role, queue, backend counters",
        "vnode-status",
        false,
    ),
    ("aae-status.txt", "anti-entropy", "aae-status", false),
    ("repl-status.txt", "replication", "repl-status", false),
    (
        "security-status.txt",
        "security (counts only)",
        "security status",
        false,
    ),
    (
        "handoff-config.txt",
        "handoff settings",
        "handoff config",
        false,
    ),
    (
        "disk-usage.txt",
        "the data directory's disk usage, measured by the node",
        "disk-usage",
        false,
    ),
];

/// One entry of the manifest.
#[derive(Debug)]
struct Entry {
    file: String,
    what: String,
    /// Bytes written, when collected.
    bytes: Option<u64>,
    /// Why not, when it failed.
    error: Option<String>,
}

/// Creates `dir`, or checks that it is empty.
fn prepare(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        let mut entries =
            std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
        if entries.next().is_some() {
            anyhow::bail!(
                "{} is not empty: give a new or empty directory",
                dir.display()
            );
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

/// The last [`LOG_TAIL_BYTES`] of `path`, from a line start.
fn tail(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(LOG_TAIL_BYTES);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.take(LOG_TAIL_BYTES).read_to_end(&mut buf)?;
    if start > 0 {
        if let Some(nl) = buf.iter().position(|b| *b == b'\n') {
            buf.drain(..=nl);
        }
    }
    Ok(buf)
}

/// Writes `data` to `dir/file` and records the entry.
fn save(dir: &Path, file: &str, what: &str, data: Result<Vec<u8>, String>) -> Entry {
    let result = data.and_then(|d| {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("writing {file}: {e}"))?;
        }
        std::fs::write(&path, &d)
            .map(|()| d.len() as u64)
            .map_err(|e| format!("writing {file}: {e}"))
    });
    Entry {
        file: file.to_string(),
        what: what.to_string(),
        bytes: result.as_ref().ok().copied(),
        error: result.err(),
    }
}

/// Asks the node one admin line: its answer, or why there is none.
fn ask(node: &AdminNode, l: &str, json: bool) -> Result<Vec<u8>, String> {
    match line(node, l, json) {
        Ok(Ok(text)) if json => Ok(format!("{text}\n").into_bytes()),
        Ok(Ok(text)) => Ok(text.into_bytes()),
        Ok(Err(refused)) => Err(format!("the node refused it: {refused}")),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// The manifest as text.
fn manifest_text(node: &AdminNode, name: &str, at: u64, entries: &[Entry]) -> String {
    let mut out = format!(
        "basalt admin diag\nnode: {} ({name})\ncollected at: {at} (seconds since the epoch)\nbasalt: {}\n",
        node.addr(),
        env!("CARGO_PKG_VERSION")
    );
    let ok: Vec<&Entry> = entries.iter().filter(|e| e.error.is_none()).collect();
    let failed: Vec<&Entry> = entries.iter().filter(|e| e.error.is_some()).collect();
    out.push_str(&format!("collected ({}):\n", ok.len()));
    for e in ok {
        out.push_str(&format!(
            "  {}: {} ({} bytes)\n",
            e.file,
            e.what,
            e.bytes.unwrap_or(0)
        ));
    }
    out.push_str(&format!("failed ({}):\n", failed.len()));
    for e in failed {
        out.push_str(&format!(
            "  {}: {}: {}\n",
            e.file,
            e.what,
            e.error.as_deref().unwrap_or("")
        ));
    }
    out
}

/// Runs `basalt admin diag`.
pub(crate) fn run(node: &AdminNode, args: &DiagArgs, json: bool) -> anyhow::Result<crate::Outcome> {
    let dir = &args.dir;
    prepare(dir)?;
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut entries = Vec::new();
    for (file, what, l, as_json) in ITEMS {
        entries.push(save(dir, file, what, ask(node, l, as_json)));
    }
    entries.push(save(
        dir,
        "bucket-types.txt",
        "bucket types and whether they are active",
        crate::admin_btypes::list_text(node),
    ));
    if args.logs.is_empty() {
        entries.push(Entry {
            file: "logs/".into(),
            what: "log tails".into(),
            bytes: None,
            error: Some("no --log FILE given: a Basalt node logs to stderr and has no log path setting; pass the file its supervisor writes".into()),
        });
    }
    for (i, log) in args.logs.iter().enumerate() {
        let base = log
            .file_name()
            .map_or_else(|| "log".into(), |n| n.to_string_lossy().into_owned());
        entries.push(save(
            dir,
            &format!("logs/{i}-{base}.tail"),
            &format!(
                "the last {} KiB of {}",
                LOG_TAIL_BYTES / 1024,
                log.display()
            ),
            tail(log).map_err(|e| format!("reading {}: {e}", log.display())),
        ));
    }
    let name = crate::wait::ask(node).map_or_else(|_| "name unknown".to_string(), |s| s.node);
    let text = manifest_text(node, &name, at, &entries);
    let doc = serde_json::json!({
        "node": node.addr(),
        "node_name": name,
        "collected_at": at,
        "basalt": env!("CARGO_PKG_VERSION"),
        "entries": entries
            .iter()
            .map(|e| serde_json::json!({"file": e.file, "what": e.what, "bytes": e.bytes, "error": e.error}))
            .collect::<Vec<_>>(),
    });
    std::fs::write(dir.join("MANIFEST.txt"), &text)
        .with_context(|| format!("writing {}", dir.join("MANIFEST.txt").display()))?;
    std::fs::write(dir.join("manifest.json"), format!("{doc}\n"))
        .with_context(|| format!("writing {}", dir.join("manifest.json").display()))?;
    let failed = entries.iter().filter(|e| e.error.is_some()).count();
    if json {
        println!("{doc}");
    } else {
        println!(
            "wrote {} of {} items into {} (see MANIFEST.txt){}",
            entries.len() - failed,
            entries.len(),
            dir.display(),
            if failed > 0 { "; some failed" } else { "" }
        );
    }
    Ok(if failed > 0 {
        crate::Outcome::Code(1)
    } else {
        crate::Outcome::Done
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_starts_at_a_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("node.log");
        let mut text = String::new();
        while (text.len() as u64) < LOG_TAIL_BYTES + 100 {
            text.push_str("a log line of some length\n");
        }
        text.push_str("the last line\n");
        std::fs::write(&p, &text).unwrap();
        let t = tail(&p).unwrap();
        assert!(t.len() as u64 <= LOG_TAIL_BYTES);
        assert!(t.starts_with(b"a log line"), "cut at a line start");
        assert!(t.ends_with(b"the last line\n"));
        std::fs::write(&p, "short\n").unwrap();
        assert_eq!(tail(&p).unwrap(), b"short\n");
        assert!(tail(&d.path().join("none")).is_err());
    }

    #[test]
    fn a_bundle_goes_only_into_a_new_or_empty_dir() {
        let d = tempfile::tempdir().unwrap();
        let fresh = d.path().join("bundle");
        assert!(prepare(&fresh).is_ok());
        assert!(prepare(&fresh).is_ok(), "empty is fine");
        std::fs::write(fresh.join("x"), "").unwrap();
        let e = prepare(&fresh).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
    }
}
