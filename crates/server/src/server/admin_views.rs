//! The node's own views for `basalt admin`: `status` (the `/stats`
//! object as Riak's `riak admin status` prints it, `key : value`),
//! `vnode-status` (each local vnode: role, queue, backend counters),
//! `config` (the running configuration, secrets left out) and
//! `disk-usage` (what the data directory holds), each as data that is
//! rendered as text or JSON.

use crate::node::Node;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// `status` as text: Riak's header, then one `name : value` line per
/// statistic in name order; an object's members are `name.member`, a
/// list is its JSON.
pub fn status_text(node_name: &str, stats: &serde_json::Value) -> String {
    let mut out =
        format!("1-minute stats for '{node_name}'\n-------------------------------------------\n");
    let mut lines = Vec::new();
    flatten("", stats, &mut lines);
    for (k, v) in lines {
        let _ = writeln!(out, "{k} : {v}");
    }
    out
}

/// `(name, value)` for every scalar or list in `v`, objects flattened
/// with dotted names.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&name, v, out);
            }
        }
        serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// One local vnode as `vnode-status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct VnodeRow {
    /// Its partition.
    pub partition: u32,
    /// `primary`, `fallback` (held for another owner), `handing off`
    /// (an ownership transfer away is pending) or `receiving` (this node
    /// is the partition's next owner).
    pub role: &'static str,
    /// The partition's owner.
    pub owner: String,
    /// Jobs waiting in its queue.
    pub queue: usize,
    /// Jobs its queue refused (full: `overload`) since it started.
    pub overloads: u64,
    /// Reads answered from memory on the request's task, without its
    /// queue, since it started (`reads_in_request_task`).
    pub reads_here: u64,
    /// Writes made on the request's task, without its queue, since it
    /// started (`writes_in_request_task`).
    pub writes_here: u64,
    /// The backend's name, when it answered.
    pub backend: Option<String>,
    /// Bytes of its files on disk, when it answered.
    pub disk_bytes: Option<u64>,
    /// The backend's counters (empty when it did not answer).
    pub counters: BTreeMap<String, u64>,
    /// The vnode's own timers ([`VnodeTimes::snapshot`]): queue waits,
    /// job runs and writes in place.
    ///
    /// [`VnodeTimes::snapshot`]: crate::vnode::VnodeTimes::snapshot
    pub times: BTreeMap<String, u64>,
    /// Why the backend did not answer.
    pub error: Option<String>,
}

impl Node {
    /// `vnode-status`: every local vnode, in partition order. A vnode
    /// whose queue is full or that does not answer within
    /// [`CONTROL_TIMEOUT`](crate::cluster::CONTROL_TIMEOUT) is listed with
    /// the reason instead of its counters.
    pub async fn vnode_rows(&self) -> Vec<VnodeRow> {
        let me = self.router.cluster.me().to_string();
        let state = self.router.cluster.state();
        let mut rows = Vec::new();
        for (p, v) in self.router.local_vnodes() {
            let owner = state.owner(p).to_string();
            let next = state.next.get(&p);
            let role = if owner == me {
                if next.is_some() {
                    "handing off"
                } else {
                    "primary"
                }
            } else if next == Some(&me) {
                "receiving"
            } else {
                "fallback"
            };
            let queue = v.queue_len();
            let overloads = v.overloads();
            let reads_here = v.reads_here();
            let writes_here = v.writes_here();
            let times = v.times().snapshot().into_iter().collect();
            let stats = match v.submit(|st| Ok(st.backend.stats()?)) {
                Ok(pending) => pending
                    .wait(self.router.timeout().min(crate::cluster::CONTROL_TIMEOUT))
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            let (backend, disk_bytes, counters, error) = match stats {
                Ok(s) => (
                    Some(s.backend.to_string()),
                    Some(s.disk_bytes),
                    s.counters.into_iter().collect(),
                    None,
                ),
                Err(e) => (None, None, BTreeMap::new(), Some(e)),
            };
            rows.push(VnodeRow {
                partition: p,
                role,
                owner,
                queue,
                overloads,
                reads_here,
                writes_here,
                backend,
                disk_bytes,
                counters,
                times,
                error,
            });
        }
        rows
    }
}

/// `vnode-status` as text: a block per vnode, as Riak's (`VNode:`,
/// `Backend:`, `Status:`), with Basalt's role and queue.
pub fn vnode_text(rows: &[VnodeRow]) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        out.push_str("no vnodes on this node\n");
    }
    for r in rows {
        let _ = writeln!(out, "VNode: {}", r.partition);
        let _ = writeln!(out, "Role: {} (owner {})", r.role, r.owner);
        let _ = writeln!(out, "Queue: {}", r.queue);
        let _ = writeln!(
            out,
            "Reads from memory on the request task: {}",
            r.reads_here
        );
        let _ = writeln!(out, "Writes on the request task: {}", r.writes_here);
        match (&r.backend, r.disk_bytes, &r.error) {
            (Some(b), Some(d), _) => {
                let _ = writeln!(out, "Backend: {b}");
                let _ = writeln!(out, "Disk: {d} bytes");
                out.push_str("Status:\n");
                for (k, v) in &r.counters {
                    let _ = writeln!(out, "  {k}: {v}");
                }
            }
            (_, _, e) => {
                let _ = writeln!(
                    out,
                    "Backend: did not answer: {}",
                    e.as_deref().unwrap_or("unknown")
                );
            }
        }
        out.push_str("Times:\n");
        for (k, v) in &r.times {
            let _ = writeln!(out, "  {k}: {v}");
        }
        out.push('\n');
    }
    out
}

/// Names of settings whose values are never shown (none of the current
/// settings is a secret: the TLS settings are paths, shown as they are,
/// and the files they name are never read for this; a later setting with
/// one of these words in its name is hidden without a change here).
const SECRET_WORDS: [&str; 4] = ["password", "secret", "token", "cookie"];

/// The text shown instead of a secret.
pub const REDACTED: &str = "<redacted>";

/// Replaces the value of every key naming a secret ([`SECRET_WORDS`]),
/// at any depth.
pub fn redact(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let lower = k.to_ascii_lowercase();
                if SECRET_WORDS.iter().any(|w| lower.contains(w)) {
                    *v = serde_json::Value::String(REDACTED.into());
                } else {
                    redact(v);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

impl Node {
    /// `config`: the running configuration as JSON, secrets redacted.
    pub fn config_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self.config()).unwrap_or_default();
        redact(&mut v);
        v
    }
}

/// `config` as text: the configuration as TOML (what `--config` reads;
/// TOML has no null, so an unset value is left out).
pub fn config_text(v: &serde_json::Value) -> String {
    let mut v = v.clone();
    strip_nulls(&mut v);
    match toml::to_string(&v) {
        Ok(t) => t,
        Err(e) => format!("# the configuration does not render as TOML ({e}); as JSON:\n{v}\n"),
    }
}

/// Drops every null member of an object, at any depth.
fn strip_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Most files `disk-usage` looks at (a bound on the work of one request).
pub const DISK_USAGE_MAX_FILES: u64 = 1_000_000;

/// What a data directory holds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DiskUsage {
    /// The directory.
    pub data_dir: String,
    /// Bytes of every file under it (their lengths).
    pub total_bytes: u64,
    /// Bytes the file system allocated to them (as `du`; less than
    /// their lengths for sparse files, more for preallocated ones).
    pub allocated_bytes: u64,
    /// Files under it.
    pub files: u64,
    /// Per entry of the directory itself, by name.
    pub entries: BTreeMap<String, Sum>,
    /// Entries that could not be read, with the error.
    pub errors: Vec<String>,
    /// The walk stopped at [`DISK_USAGE_MAX_FILES`].
    pub truncated: bool,
}

/// Walks `dir` (without following symbolic links), at most
/// [`DISK_USAGE_MAX_FILES`] files.
pub fn disk_usage(dir: &Path) -> DiskUsage {
    let mut du = DiskUsage {
        data_dir: dir.display().to_string(),
        ..DiskUsage::default()
    };
    let top = match std::fs::read_dir(dir) {
        Ok(t) => t,
        Err(e) => {
            du.errors.push(format!("{}: {e}", dir.display()));
            return du;
        }
    };
    for entry in top {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                du.errors.push(format!("{}: {e}", dir.display()));
                continue;
            }
        };
        let mut sum = Sum::default();
        walk(&entry.path(), &mut sum, &mut du);
        du.total_bytes = du.total_bytes.saturating_add(sum.bytes);
        du.allocated_bytes = du.allocated_bytes.saturating_add(sum.allocated_bytes);
        du.files += sum.files;
        du.entries
            .insert(entry.file_name().to_string_lossy().into_owned(), sum);
    }
    du
}

/// What one entry of the data directory holds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Sum {
    /// Bytes of its files (their lengths).
    pub bytes: u64,
    /// Bytes allocated to them.
    pub allocated_bytes: u64,
    /// Its files.
    pub files: u64,
}

fn walk(path: &Path, sum: &mut Sum, du: &mut DiskUsage) {
    use std::os::unix::fs::MetadataExt;
    if du.files + sum.files >= DISK_USAGE_MAX_FILES {
        du.truncated = true;
        return;
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => {
            du.errors.push(format!("{}: {e}", path.display()));
            return;
        }
    };
    if meta.is_dir() {
        match std::fs::read_dir(path) {
            Ok(rd) => {
                for e in rd {
                    match e {
                        Ok(e) => walk(&e.path(), sum, du),
                        Err(e) => du.errors.push(format!("{}: {e}", path.display())),
                    }
                }
            }
            Err(e) => du.errors.push(format!("{}: {e}", path.display())),
        }
    } else {
        sum.bytes = sum.bytes.saturating_add(meta.len());
        sum.allocated_bytes = sum
            .allocated_bytes
            .saturating_add(meta.blocks().saturating_mul(512));
        sum.files += 1;
    }
}

impl DiskUsage {
    /// The `disk-usage` text.
    pub fn text(&self) -> String {
        let mut out = format!(
            "data dir: {}\ntotal: {} bytes ({} allocated) in {} files{}\n",
            self.data_dir,
            self.total_bytes,
            self.allocated_bytes,
            self.files,
            if self.truncated {
                " (stopped at the file limit)"
            } else {
                ""
            }
        );
        for (name, e) in &self.entries {
            let _ = writeln!(
                out,
                "  {name}: {} bytes ({} allocated) in {} files",
                e.bytes, e.allocated_bytes, e.files
            );
        }
        for e in &self.errors {
            let _ = writeln!(out, "unreadable: {e}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_flatten_objects() {
        let v = serde_json::json!({"b": {"x": 1, "y": 2}, "a": "n", "q": [1, 2]});
        let t = status_text("n1@h", &v);
        assert_eq!(
            t,
            "1-minute stats for 'n1@h'\n-------------------------------------------\na : n\nb.x : 1\nb.y : 2\nq : [1,2]\n"
        );
    }

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let mut v = serde_json::json!({
            "tls_keyfile": "/k.pem",
            "repl": {"sink": [{"password": "p", "name": "s"}]},
            "Admin_Token": "t",
        });
        redact(&mut v);
        assert_eq!(v["tls_keyfile"], "/k.pem", "paths stay");
        assert_eq!(v["repl"]["sink"][0]["password"], REDACTED);
        assert_eq!(v["repl"]["sink"][0]["name"], "s");
        assert_eq!(v["Admin_Token"], REDACTED);
    }

    #[test]
    fn the_default_config_renders_as_toml_that_reads_back() {
        let mut v = serde_json::to_value(crate::config::Config::default()).unwrap_or_default();
        redact(&mut v);
        let text = config_text(&v);
        assert!(crate::config::Config::from_toml(&text).is_ok(), "{text}");
    }

    #[test]
    fn disk_usage_counts_files_per_entry() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let sub = d.path().join("vnodes");
        std::fs::create_dir_all(sub.join("0")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(sub.join("0/a"), [0u8; 10]).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(d.path().join("NODE"), b"n1\n").unwrap_or_else(|e| panic!("{e}"));
        let du = disk_usage(d.path());
        assert_eq!(du.total_bytes, 13);
        assert_eq!(du.files, 2);
        assert_eq!(du.entries["vnodes"].bytes, 10);
        assert_eq!(du.entries["vnodes"].files, 1);
        assert!(du.text().contains("vnodes: 10 bytes ("), "{}", du.text());
        let missing = disk_usage(&d.path().join("nope"));
        assert_eq!(missing.errors.len(), 1);
    }
}
