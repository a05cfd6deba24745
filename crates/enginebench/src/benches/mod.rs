//! The benchmarks. Each returns a Markdown section; numbers that are meant to
//! be compared are measured in the same run, back to back.
//!
//! One file per benchmark (`seq_vs_put`, `sync_writers`, `get_vs_head`,
//! `write_amp`, `quick`); of their siblings they import only `shared`
//! ([`Ctx`], progress lines, a timed phase's result) and `wa` (write
//! amplification of a phase, for `write_amp` and `quick`). This file
//! re-exports them and runs the four for `all`.

mod get_vs_head;
mod quick;
mod seq_vs_put;
mod shared;
mod sync_writers;
mod wa;
mod write_amp;

pub use get_vs_head::{get_vs_head, GetVsHead};
pub use quick::{quick, Quick};
pub use seq_vs_put::{seq_vs_put, SeqVsPut};
pub use shared::Ctx;
pub use sync_writers::{sync_writers, SyncWriters};
pub use write_amp::{write_amp, WriteAmp};

use anyhow::Result;
use std::fmt::Write as _;

/// Runs the four benchmarks with quick defaults, in one report.
pub fn all(ctx: &Ctx) -> Result<String> {
    let seq = SeqVsPut {
        mib: 1024,
        value_bytes: 8192,
    };
    let sync = SyncWriters {
        secs: 5,
        value_bytes: 8192,
        threads: 32,
    };
    let reads = GetVsHead {
        keys: 100_000,
        value_bytes: 8192,
        secs: 5,
    };
    let wa = WriteAmp {
        keys: 50_000,
        overwrites: 200_000,
        value_bytes: 8192,
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Sizes: seq-vs-put --mib {}; sync-writers --secs {}; get-vs-head --keys {} --secs {}; write-amp --keys {} --overwrites {}; 8 KiB values.\n",
        seq.mib, sync.secs, reads.keys, reads.secs, wa.keys, wa.overwrites
    );
    s.push_str(&seq_vs_put(ctx, &seq)?);
    s.push_str(&sync_writers(ctx, &sync)?);
    s.push_str(&get_vs_head(ctx, &reads)?);
    s.push_str(&write_amp(ctx, &wa)?);
    Ok(s)
}
