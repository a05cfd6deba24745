//! Write amplification of a measured write phase, shared by `write-amp`
//! and `quick`: finish the phase (sync, settle, close), read
//! `/proc/self/io` and the engine's counters, and print them as a table.

use crate::common::{delta, disk_usage, mib, proc_write_bytes};
use anyhow::{Context, Result};
use basalt_engine::{Store, StoreStats};
use std::fmt::Write as _;
use std::path::Path;

/// Write amplification and disk use of a write phase that ends with
/// `sync` + `settle` + `close`.
pub(super) struct WaResult {
    /// `/proc/self/io` write_bytes over the phase, including the final close.
    pub(super) os_bytes: u64,
    /// User bytes written in the phase (engine counter).
    pub(super) user_bytes: u64,
    /// Engine counters across the phase (up to before `close`).
    pub(super) before: StoreStats,
    pub(super) after: StoreStats,
    /// Apparent and allocated bytes under the store directory after close.
    pub(super) disk: (u64, u64),
}

impl WaResult {
    fn wa(&self) -> f64 {
        self.os_bytes as f64 / self.user_bytes.max(1) as f64
    }
}

/// Finishes a measured phase: sync, settle, close, then reads the counters.
pub(super) fn finish_phase(
    store: Store,
    dir: &Path,
    os_before: u64,
    before: StoreStats,
) -> Result<WaResult> {
    store.sync().context("sync")?;
    store.settle().context("settle")?;
    let after = store.stats();
    store.close().context("close")?;
    drop(store);
    let os_bytes = proc_write_bytes()?.saturating_sub(os_before);
    Ok(WaResult {
        os_bytes,
        user_bytes: delta(&before, &after, "user_bytes_written"),
        before,
        after,
        disk: disk_usage(dir)?,
    })
}

pub(super) fn wa_lines(s: &mut String, r: &WaResult, live_bytes: u64) {
    let (b, a) = (&r.before, &r.after);
    let journal = delta(b, a, "journal_bytes_written");
    let ledger = delta(b, a, "ledger_bytes_written");
    let _ = writeln!(s, "| measure | value |");
    let _ = writeln!(s, "|---|---:|");
    let _ = writeln!(
        s,
        "| **write amplification** (/proc/self/io write_bytes / user bytes, incl. sync + settle + close) | **{:.3}** |",
        r.wa()
    );
    let _ = writeln!(
        s,
        "| user bytes written (key + bucket + value) | {} MiB |",
        mib(r.user_bytes)
    );
    let _ = writeln!(s, "| OS write_bytes | {} MiB |", mib(r.os_bytes));
    let _ = writeln!(
        s,
        "| engine: journal bytes written | {} MiB ({:.3} x user) |",
        mib(journal),
        journal as f64 / r.user_bytes.max(1) as f64
    );
    let _ = writeln!(
        s,
        "| engine: ledger bytes written | {} MiB ({:.3} x user; {} flushes, {} merges) |",
        mib(ledger),
        ledger as f64 / r.user_bytes.max(1) as f64,
        delta(b, a, "ledger_flushes"),
        delta(b, a, "ledger_merges")
    );
    let _ = writeln!(
        s,
        "| engine: write stalls | {} ({} ms) |",
        delta(b, a, "write_stalls"),
        delta(b, a, "write_stall_us") / 1000
    );
    let _ = writeln!(
        s,
        "| disk use after close (apparent / allocated) | {} / {} MiB |",
        mib(r.disk.0),
        mib(r.disk.1)
    );
    let _ = writeln!(
        s,
        "| live data (keys x (key + bucket + value)) | {} MiB |",
        mib(live_bytes)
    );
    let _ = writeln!(
        s,
        "| **space amplification** (apparent disk use / live data) | **{:.2}** |",
        r.disk.0 as f64 / live_bytes.max(1) as f64
    );
    let files: u64 = a.journal_files.len() as u64;
    let levels: Vec<String> = a
        .levels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.files > 0)
        .map(|(i, l)| {
            format!(
                "L{i}: {} files {} MiB {} entries",
                l.files,
                mib(l.bytes),
                l.entries
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "| shape at the end | {files} journal files; {} |",
        if levels.is_empty() {
            "ledger empty".to_string()
        } else {
            levels.join("; ")
        }
    );
}
