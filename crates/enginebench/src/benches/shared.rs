//! What the benchmarks share beyond [`crate::common`]: the [`Ctx`] each one
//! gets, progress lines on stderr, and the result of one timed phase.

use crate::common::{EngineOpts, WorkDir};
use anyhow::Result;
use hdrhistogram::Histogram;
use std::path::PathBuf;
use std::time::Duration;

/// A mebibyte.
pub(super) const MIB: u64 = 1024 * 1024;

/// Options every benchmark gets.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Parent of the work directory.
    pub dir: Option<PathBuf>,
    /// Keep the work directory.
    pub keep: bool,
    /// Engine settings.
    pub engine: EngineOpts,
}

impl Ctx {
    pub(super) fn workdir(&self, name: &str) -> Result<WorkDir> {
        WorkDir::create(self.dir.as_deref(), name, self.keep)
    }
}

/// A progress line on stderr (the report goes to stdout).
pub(super) fn progress(msg: &str) {
    eprintln!("engine-bench: {msg}");
}

/// What one timed phase of a benchmark did: operations, time taken and
/// their latencies.
pub(super) struct PhaseResult {
    pub(super) ops: u64,
    pub(super) elapsed: Duration,
    pub(super) hist: Histogram<u64>,
}
