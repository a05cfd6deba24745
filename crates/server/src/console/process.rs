//! This process's resource figures for the console, from Linux's `/proc`:
//! CPU time (`/proc/self/stat` utime + stime, in clock ticks of 1/100 s,
//! Linux's USER_HZ), resident memory and threads (`/proc/self/status`),
//! open files (entries of `/proc/self/fd`) and their limit
//! (`/proc/self/limits`). A figure that cannot be read is `None` (another
//! system, or `/proc` not mounted), never an error.

use serde_json::{json, Value};

/// Clock ticks per second of `/proc/self/stat` (USER_HZ, 100 on Linux).
pub const TICKS_PER_SEC: u64 = 100;

/// One reading of the process's figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    /// CPU time used so far (user + system), in ticks.
    pub cpu_ticks: Option<u64>,
    /// Resident memory, bytes.
    pub rss_bytes: Option<u64>,
    /// Threads.
    pub threads: Option<u64>,
    /// File descriptors open.
    pub open_files: Option<u64>,
    /// The soft limit of open files.
    pub max_open_files: Option<u64>,
}

impl Figures {
    /// The figures as JSON (`null` where unknown).
    pub fn json(&self) -> Value {
        json!({
            "cpu_seconds": self.cpu_ticks.map(|t| t as f64 / TICKS_PER_SEC as f64),
            "rss_bytes": self.rss_bytes,
            "threads": self.threads,
            "open_files": self.open_files,
            "max_open_files": self.max_open_files,
        })
    }
}

/// utime + stime of a `/proc/PID/stat` line (fields 14 and 15; the
/// command name in parentheses may hold spaces, so fields count from the
/// last `)`).
pub fn cpu_ticks_of(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime 15.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A `Name:  value [kB]` line of `/proc/self/status`, in bytes for kB.
fn status_field(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    let mut w = line[name.len()..].split_whitespace();
    let v: u64 = w.next()?.parse().ok()?;
    Some(if w.next() == Some("kB") { v * 1024 } else { v })
}

/// The soft `Max open files` of `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// CPU time used so far, in ticks (the live stream reads only this).
pub fn cpu_ticks() -> Option<u64> {
    cpu_ticks_of(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// Reads the figures now.
pub fn figures() -> Figures {
    let status = std::fs::read_to_string("/proc/self/status").ok();
    Figures {
        cpu_ticks: cpu_ticks(),
        rss_bytes: status.as_deref().and_then(|s| status_field(s, "VmRSS:")),
        threads: status.as_deref().and_then(|s| status_field(s, "Threads:")),
        open_files: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64),
        max_open_files: std::fs::read_to_string("/proc/self/limits")
            .ok()
            .as_deref()
            .and_then(max_open_files),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_lines() {
        let stat = "1234 (basalt (x) y) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 9 0";
        assert_eq!(cpu_ticks_of(stat), Some(300));
        assert_eq!(cpu_ticks_of("garbage"), None);
        let status = "Name:\tbasalt\nVmRSS:\t  2048 kB\nThreads:\t9\n";
        assert_eq!(status_field(status, "VmRSS:"), Some(2048 * 1024));
        assert_eq!(status_field(status, "Threads:"), Some(9));
        assert_eq!(status_field(status, "VmSwap:"), None);
        let limits = "Limit Soft Hard Units\nMax open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
    }

    #[test]
    fn reads_this_process() {
        let f = figures();
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(f.rss_bytes.unwrap_or(0) > 0);
            assert!(f.open_files.unwrap_or(0) > 0);
            assert!(f.cpu_ticks.is_some());
        }
    }
}
