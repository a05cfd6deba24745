//! `--memory-limit`: hold the bench process (its heap *and* the page cache
//! it fills) to a memory budget, so that a store's data outgrows the cache
//! as it would on a real node after the first hour.
//!
//! The process moves itself into a new memory cgroup, a child of the one it
//! runs in (`basalt-bench-<pid>`), before any store is opened or the value
//! pool allocated, so every page it touches from then on is charged there;
//! at the end it moves back and removes the child. cgroup v2 (`memory.max`,
//! needs `memory` in the parent's `cgroup.subtree_control`) is used when
//! available, else the v1 memory controller (`memory.limit_in_bytes`), which
//! is what this project's VM has. Both need root (or a delegated cgroup).
//!
//! Why in process and not `systemd-run --scope -p MemoryMax=`: systemd is
//! not PID 1 on the machines this runs on (a VM init, containers), and a
//! scope needs a running systemd; writing the cgroup files works wherever
//! the memory controller is mounted and lets the bench refuse a budget that
//! is too small before the run, with a message instead of an OOM kill.
//!
//! [`floor_bytes`] is that check: 64 MiB for the process itself, plus the
//! value pool, plus each store's own caches and memtables
//! (`basalt_backends::memory_floor_bytes`).

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// What the process needs before any page cache: code, stacks, histograms.
pub const PROCESS_FLOOR_BYTES: u64 = 64 << 20;

/// Why a memory limit could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum MemLimitError {
    /// The size text is not a size.
    #[error("bad memory size {0:?}: expected e.g. 1.5G, 512M, 1536MiB or a byte count")]
    BadSize(String),
    /// The limit is below what the run needs to open its stores.
    #[error(
        "memory limit {limit} is below the {floor} this run needs before any page cache \
         ({detail}); raise --memory-limit"
    )]
    TooSmall {
        /// The limit asked for.
        limit: String,
        /// The floor.
        floor: String,
        /// How the floor was computed.
        detail: String,
    },
    /// No usable memory cgroup controller.
    #[error("--memory-limit needs a cgroup memory controller: {0}")]
    NoCgroup(String),
    /// Not allowed to create or join the cgroup.
    #[error("--memory-limit: {0} (creating a cgroup needs root or a delegated cgroup)")]
    Permission(String),
    /// A cgroup file could not be read or written.
    #[error("--memory-limit: {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Parses `1.5G`, `512M`, `1536MiB`, `2GiB`, `800k` or a plain byte count
/// (binary units: K = 1024).
pub fn parse_size(text: &str) -> Result<u64, MemLimitError> {
    let t = text.trim();
    let bad = || MemLimitError::BadSize(text.to_string());
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(bad()),
    };
    let v = n * mult as f64;
    if !v.is_finite() || v < 1.0 || v > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(v as u64)
}

/// `1.50 GiB`, `96.0 MiB`.
pub fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// The least memory a run of `stores` stores of `backend` (each configured
/// with `config`) and a value pool of `pool_bytes` needs, with how it was
/// computed.
pub fn floor_bytes(
    backend: &str,
    stores: usize,
    config: &basalt_backends::BackendConfig,
    pool_bytes: u64,
) -> (u64, String) {
    let per_store = basalt_backends::memory_floor_bytes(backend, config);
    let total = PROCESS_FLOOR_BYTES + pool_bytes + per_store * stores as u64;
    (
        total,
        format!(
            "{} process + {} value pool + {stores} × {} for {backend}'s caches and memtables",
            human(PROCESS_FLOOR_BYTES),
            human(pool_bytes),
            human(per_store)
        ),
    )
}

/// Refuses `limit` if it is below `floor` (see [`floor_bytes`]).
pub fn check_floor(limit: u64, floor: (u64, String)) -> Result<(), MemLimitError> {
    if limit < floor.0 {
        return Err(MemLimitError::TooSmall {
            limit: human(limit),
            floor: human(floor.0),
            detail: floor.1,
        });
    }
    Ok(())
}

/// Which cgroup interface holds the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// Unified hierarchy, `memory.max`.
    V2,
    /// The v1 memory controller, `memory.limit_in_bytes`.
    V1,
}

/// The cgroup this process moved into; dropping it moves the process back
/// and removes the cgroup.
#[derive(Debug)]
pub struct MemoryCgroup {
    version: CgroupVersion,
    dir: PathBuf,
    parent: PathBuf,
    limit: u64,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> MemLimitError + '_ {
    move |source| {
        if source.kind() == std::io::ErrorKind::PermissionDenied {
            MemLimitError::Permission(format!("{}: {source}", path.display()))
        } else {
            MemLimitError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), MemLimitError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err(path))?;
    f.write_all(text.as_bytes()).map_err(io_err(path))
}

fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// `(mount point, fstype, super options)` of every cgroup mount.
fn cgroup_mounts() -> Vec<(PathBuf, String, String)> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mount = pre.split_whitespace().nth(4)?;
            let mut post = post.split_whitespace();
            let fstype = post.next()?.to_string();
            let _source = post.next();
            let opts = post.next().unwrap_or("").to_string();
            (fstype == "cgroup" || fstype == "cgroup2")
                .then(|| (PathBuf::from(mount), fstype, opts))
        })
        .collect()
}

/// Finds where a child memory cgroup can be made: (version, the current
/// cgroup's directory).
fn locate() -> Result<(CgroupVersion, PathBuf), MemLimitError> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| MemLimitError::NoCgroup(format!("cannot read /proc/self/cgroup: {e}")))?;
    let mounts = cgroup_mounts();
    let mut why = Vec::new();
    // v2 first: "0::/path".
    if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) {
        if let Some((m, _, _)) = mounts.iter().find(|(_, t, _)| t == "cgroup2") {
            let dir = m.join(path.trim_start_matches('/'));
            let controllers =
                std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "memory") {
                return Ok((CgroupVersion::V2, dir));
            }
            why.push(format!(
                "cgroup2 at {} has no memory controller in {}/cgroup.subtree_control",
                m.display(),
                dir.display()
            ));
        } else {
            why.push("no cgroup2 mount".into());
        }
    }
    // v1: "N:memory:/path" (the controller list may hold several names).
    let v1 = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let _id = parts.next()?;
        let ctrls = parts.next()?;
        let path = parts.next()?;
        ctrls.split(',').any(|c| c == "memory").then_some(path)
    });
    if let Some(path) = v1 {
        if let Some((m, _, _)) = mounts
            .iter()
            .find(|(_, t, o)| t == "cgroup" && o.split(',').any(|x| x == "memory"))
        {
            return Ok((CgroupVersion::V1, m.join(path.trim_start_matches('/'))));
        }
        why.push("the v1 memory controller is not mounted".into());
    } else {
        why.push("no v1 memory controller in /proc/self/cgroup".into());
    }
    Err(MemLimitError::NoCgroup(why.join("; ")))
}

impl MemoryCgroup {
    /// Creates `basalt-bench-<pid>` under the current memory cgroup with
    /// `limit` bytes (process + page cache) and moves this whole process
    /// into it. Call before opening stores: only pages touched afterwards
    /// are charged to it.
    pub fn enter(limit: u64) -> Result<MemoryCgroup, MemLimitError> {
        let (version, parent) = locate()?;
        if effective_uid() != Some(0) {
            // Not fatal by itself (a delegated cgroup works), but say why
            // if the writes below fail.
            let probe = parent.join("cgroup.procs");
            if std::fs::OpenOptions::new()
                .write(true)
                .open(&probe)
                .is_err()
            {
                return Err(MemLimitError::Permission(format!(
                    "not root, and {} is not writable",
                    probe.display()
                )));
            }
        }
        let dir = parent.join(format!("basalt-bench-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&dir) {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(io_err(&dir)(e));
            }
        }
        let cg = MemoryCgroup {
            version,
            dir,
            parent,
            limit,
        };
        // From here on, Drop removes the directory if a step fails.
        let limit_file = match version {
            CgroupVersion::V2 => "memory.max",
            CgroupVersion::V1 => "memory.limit_in_bytes",
        };
        write_file(&cg.dir.join(limit_file), &limit.to_string())?;
        if version == CgroupVersion::V2 {
            // No swap: the limit is the whole budget (best effort: the
            // file is absent without swap accounting).
            let _ = write_file(&cg.dir.join("memory.swap.max"), "0");
        }
        write_file(
            &cg.dir.join("cgroup.procs"),
            &std::process::id().to_string(),
        )?;
        Ok(cg)
    }

    /// The limit in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Which interface is used.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    fn read_u64(&self, name: &str) -> Option<u64> {
        std::fs::read_to_string(self.dir.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The most memory (process + page cache) charged so far, if the
    /// kernel reports it (`memory.peak`, `memory.max_usage_in_bytes`).
    pub fn peak_bytes(&self) -> Option<u64> {
        match self.version {
            CgroupVersion::V2 => self.read_u64("memory.peak"),
            CgroupVersion::V1 => self.read_u64("memory.max_usage_in_bytes"),
        }
    }

    /// Times the limit was hit (reclaim forced), if reported.
    pub fn limit_hits(&self) -> Option<u64> {
        match self.version {
            CgroupVersion::V2 => {
                let text = std::fs::read_to_string(self.dir.join("memory.events")).ok()?;
                text.lines()
                    .find_map(|l| l.strip_prefix("max "))
                    .and_then(|v| v.trim().parse().ok())
            }
            CgroupVersion::V1 => self.read_u64("memory.failcnt"),
        }
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        format!(
            "memory limit: {} ({} bytes, process + page cache) in cgroup {} {}",
            human(self.limit),
            self.limit,
            match self.version {
                CgroupVersion::V2 => "v2",
                CgroupVersion::V1 => "v1",
            },
            self.dir.display()
        )
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // Back to the parent, then remove the (now empty) cgroup; its page
        // cache charges move to the parent.
        let _ = write_file(
            &self.parent.join("cgroup.procs"),
            &std::process::id().to_string(),
        );
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!(
                "warning: could not remove cgroup {}: {e}",
                self.dir.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("1.5G").expect("1.5G"), 1536 << 20);
        assert_eq!(parse_size("512M").expect("512M"), 512 << 20);
        assert_eq!(parse_size("1536MiB").expect("MiB"), 1536 << 20);
        assert_eq!(parse_size("2gib").expect("gib"), 2 << 30);
        assert_eq!(parse_size("4096").expect("bytes"), 4096);
        for bad in ["", "G", "1.5X", "-1G", "0", "1..5G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn floor_refuses_small_limits() {
        let cfg = basalt_backends::BackendConfig::default();
        let floor = floor_bytes("leveled", 1, &cfg, 96 << 20);
        assert!(floor.0 > PROCESS_FLOOR_BYTES + (96 << 20));
        let e = check_floor(100 << 20, floor.clone()).expect_err("too small");
        assert!(e.to_string().contains("raise --memory-limit"), "{e}");
        check_floor(1536 << 20, floor).expect("1.5 GiB is enough");
    }
}
