//! The configuration as written: [`RawConfig`] merges the `{Key, Value}`
//! terms of one or more files (a later file wins), remembers the
//! `file:line` of each value for messages, tells which keys are unknown,
//! and reads one key as a typed value (integer, boolean, string, size,
//! percentage) with a message naming the key. What each key means and
//! defaults to is decided in `build`.

use super::error::ConfigError;
use super::upstream::upstream_key;
use crate::netcfg;
use crate::term::{parse_terms, SyntaxError, Term};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// basho_bench keys we accept but do not use.
const IGNORED: &[&str] = &[
    "log_level",
    "code_paths",
    "source_dir",
    "pre_hook",
    "post_hook",
    "stats",
    "measurement_driver",
    "measurements",
    "distribute_work",
    "remote_nodes",
    "disable_sequential_int_progress_report",
    "sequential_int_state_dir",
    "test_dir",
    "app_run_mode",
    // Read upstream only by riakc_pb ops that are refused here with why
    // (search, MapReduce).
    "riakc_pb_search_queries",
    "query_step_interval",
    "riakc_pb_preloaded_keys",
    "riakc_pb_keylist_length",
];

/// Keys this tool reads.
const KNOWN: &[&str] = &[
    "mode",
    "duration",
    "report_interval",
    "concurrent",
    "driver",
    "operations",
    "key_generator",
    "value_generator",
    "rng_seed",
    "shutdown_on_error",
    "value_generator_source_size",
    "value_generator_blob_file",
    "basalt_duration_secs",
    "basalt_rate_mode",
    "basalt_backend",
    "basalt_data_dir",
    "basalt_stores",
    "basalt_sync",
    "basalt_bucket",
    "basalt_keep_data",
    "basalt_index_terms",
    "basalt_memory_limit",
    "basalt_compaction_runs_per_day",
    "basalt_compaction_max_garbage_pct",
    "basalt_compaction_punch",
    "basalt_disk_min_free_pct",
    "basalt_journal_slowdown_pct",
    "basalt_journal_one_read",
    "basalt_journal_fadvise_random",
    "basalt_journal_skip_active_lock",
    "basalt_journal_preallocate",
    "basalt_journal_release_written",
    "basalt_value_cache_refresh",
    "basalt_write_group",
    "basalt_journal_sync_bytes",
    "basalt_journal_fsync_bytes",
    "basalt_ledger_sync_bytes",
    "basalt_background_nice",
    "basalt_compaction_stream_bytes",
    "basalt_compaction_read_pace",
    "basalt_remove_pace",
    "basalt_journal_flush",
    "basalt_block_cache",
    "basalt_value_cache",
    "basalt_journal_direct_reads",
    "basalt_memtable_bytes",
    "basalt_l0_merge_trigger",
    "basalt_l1_files",
    "basalt_rocksdb_block_cache",
    "basalt_rocksdb_write_buffer",
    "basalt_rocksdb_compression",
    "basalt_rocksdb_bloom_bits",
    "basalt_rocksdb_dynamic_level_bytes",
    "basalt_rocksdb_lower_priority",
];

/// A value with where it came from.
#[derive(Debug, Clone)]
struct Located {
    value: Term,
    at: String,
}

/// The merged `{Key, Value}` pairs of several files.
#[derive(Debug, Clone, Default)]
pub struct RawConfig {
    entries: BTreeMap<String, Located>,
    /// Keys in first-seen order (for warnings).
    order: Vec<String>,
    pub(super) files: Vec<PathBuf>,
}

impl RawConfig {
    /// Reads and merges `paths` in order (a later file wins).
    pub fn from_files<P: AsRef<Path>>(paths: &[P]) -> Result<RawConfig, ConfigError> {
        let mut raw = RawConfig::default();
        for p in paths {
            let p = p.as_ref();
            let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Io {
                path: p.to_path_buf(),
                source,
            })?;
            raw.add_text(&text, &p.display().to_string())
                .map_err(|error| ConfigError::Syntax {
                    path: p.to_path_buf(),
                    error,
                })?;
            raw.files.push(p.to_path_buf());
        }
        Ok(raw)
    }

    /// Merges the terms of `text` (named `source` in messages).
    pub fn add_text(&mut self, text: &str, source: &str) -> Result<(), SyntaxError> {
        for (term, line) in parse_terms(text)? {
            // Like basho_bench, only {Key, Value} pairs are applied.
            if let Term::Tuple(items) = term {
                if let [Term::Atom(k), v] = items.as_slice() {
                    if !self.entries.contains_key(k) {
                        self.order.push(k.clone());
                    }
                    self.entries.insert(
                        k.clone(),
                        Located {
                            value: v.clone(),
                            at: format!("{source}:{line}"),
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// The value of `key`, if given.
    pub fn get(&self, key: &str) -> Option<&Term> {
        self.entries.get(key).map(|l| &l.value)
    }

    /// Keys neither read nor knowingly ignored.
    pub fn unknown_keys(&self) -> Vec<String> {
        self.order
            .iter()
            .filter(|k| {
                !KNOWN.contains(&k.as_str())
                    && !IGNORED.contains(&k.as_str())
                    && !netcfg::KNOWN_KEYS.contains(&k.as_str())
                    && upstream_key(k).is_none()
            })
            .cloned()
            .collect()
    }

    /// basho_bench keys given that basalt bench does not read, with why.
    pub fn upstream_keys(&self) -> Vec<(String, &'static str)> {
        self.order
            .iter()
            .filter_map(|k| upstream_key(k).map(|why| (k.clone(), why)))
            .collect()
    }

    /// `file:line` where `key` was given, if it came from a file.
    pub(crate) fn location(&self, key: &str) -> Option<String> {
        self.entries.get(key).map(|l| l.at.clone())
    }

    pub(crate) fn invalid(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: key.into(),
            message: message.into(),
            at: self.location(key),
        }
    }

    pub(crate) fn int(&self, key: &str, default: i64, min: i64) -> Result<i64, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(t) => match t.as_int() {
                Some(i) if i >= min => Ok(i),
                _ => Err(self.invalid(key, format!("expected an integer >= {min}, got {t}"))),
            },
        }
    }

    pub(super) fn bool(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.get(key).map(|t| t.as_atom()) {
            None => Ok(default),
            Some(Some("true")) => Ok(true),
            Some(Some("false")) => Ok(false),
            Some(_) => Err(self.invalid(key, "expected true or false")),
        }
    }

    pub(crate) fn text(&self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(t) => t
                .as_text()
                .map(Some)
                .ok_or_else(|| self.invalid(key, format!("expected a string, got {t}"))),
        }
    }

    /// A percentage 0..=100 that is `None` when not given (the store's
    /// default, `default` here only for `int`'s message).
    pub(super) fn pct(&self, key: &str, default: i64) -> Result<Option<f64>, ConfigError> {
        Ok(match self.get(key) {
            None => None,
            Some(_) => {
                let n = self.int(key, default, 0)?;
                if n > 100 {
                    return Err(self.invalid(key, format!("expected a percentage 0..100, got {n}")));
                }
                Some(n as f64)
            }
        })
    }

    /// A percentage 0..=100 that may have a fraction, `None` when not given.
    pub(super) fn fraction_pct(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        let Some(t) = self.get(key) else {
            return Ok(None);
        };
        match t.as_number() {
            Some(p) if (0.0..=100.0).contains(&p) => Ok(Some(p)),
            _ => Err(self.invalid(key, "expected a percentage 0..100 (a fraction is allowed)")),
        }
    }

    /// A boolean that is `None` when not given (the store's default).
    pub(super) fn opt_bool(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.bool(key, true).map(Some),
        }
    }

    /// A count of at least 1, or `None` when not given.
    pub(super) fn opt_count(&self, key: &str) -> Result<Option<usize>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => Ok(Some(self.int(key, 1, 1)? as usize)),
        }
    }

    /// [`RawConfig::size`], where a plain `0` is allowed too (it turns the
    /// setting off).
    pub(super) fn size_or_zero(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.get(key) {
            Some(Term::Int(0)) => Ok(Some(0)),
            _ => self.size(key),
        }
    }

    /// A size given as text (`"32M"`) or a byte count.
    pub(super) fn size(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Term::Int(n)) if *n > 0 => Ok(Some(*n as u64)),
            Some(t) => match t.as_text() {
                Some(text) => crate::memlimit::parse_size(&text)
                    .map(Some)
                    .map_err(|e| self.invalid(key, e.to_string())),
                None => Err(self.invalid(key, format!("expected a size such as \"32M\", got {t}"))),
            },
        }
    }
}
