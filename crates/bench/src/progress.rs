//! Progress display: an `indicatif` bar on a terminal (ops/s of the last
//! interval, errors, time left), plain log lines on stderr otherwise.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// Reports progress once per interval.
pub enum Progress {
    /// A terminal bar.
    Bar(ProgressBar),
    /// Log lines.
    Lines,
    /// Nothing (tests, `--quiet`).
    Silent,
}

impl Progress {
    /// A bar when stderr is a terminal, else log lines; `quiet` silences both.
    pub fn new(duration: Option<Duration>, quiet: bool) -> Progress {
        if quiet {
            return Progress::Silent;
        }
        if !std::io::stderr().is_terminal() {
            return Progress::Lines;
        }
        let len = duration.map_or(0, |d| d.as_secs().max(1));
        let bar = ProgressBar::new(len);
        let style =
            ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {pos}/{len}s {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Progress::Bar(bar)
    }

    /// Updates after an interval.
    pub fn update(&self, elapsed: Duration, left: Option<Duration>, ops_per_sec: f64, errors: u64) {
        let left = left.map_or_else(|| "∞".to_string(), |l| format!("{}s", l.as_secs()));
        match self {
            Progress::Bar(b) => {
                b.set_position(elapsed.as_secs());
                b.set_message(format!(
                    "{ops_per_sec:.0} ops/s, {errors} errors, {left} left"
                ));
            }
            Progress::Lines => eprintln!(
                "[{:>6.0}s] {ops_per_sec:.0} ops/s, {errors} errors, {left} left",
                elapsed.as_secs_f64()
            ),
            Progress::Silent => {}
        }
    }

    /// Prints a message above the bar (or as a line).
    pub fn println(&self, msg: &str) {
        match self {
            Progress::Bar(b) => b.println(msg),
            Progress::Lines => eprintln!("{msg}"),
            Progress::Silent => {}
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Progress::Bar(b) = self {
            b.finish_and_clear();
        }
    }
}
