//! From [`RawConfig`] to [`BenchConfig`]: [`RawConfig::build`] applies
//! basho_bench's defaults, checks every key, reads the driver's options and
//! collects the warnings (unknown keys, settings without effect).

use super::error::ConfigError;
use super::ops::{valid_backends, DriverKind, OpKind, OpSpec, VALID_DRIVERS};
use super::raw::RawConfig;
use super::typed::{BenchConfig, Mode, RateMode, RngSeed};
use super::upstream::UPSTREAM_DRIVERS;
use crate::keygen::KeyGenSpec;
use crate::netcfg::NetOptions;
use crate::term::Term;
use crate::valgen::ValGenSpec;
use std::path::PathBuf;
use std::time::Duration;

/// Largest `value_generator_blob_file` (it is read into memory whole).
pub const MAX_BLOB_FILE: u64 = 1 << 30;

impl RawConfig {
    /// Builds the typed configuration; returns it with the warnings.
    pub fn build(&self) -> Result<(BenchConfig, Vec<String>), ConfigError> {
        let mut warnings = Vec::new();
        let unknown = self.unknown_keys();
        if !unknown.is_empty() {
            warnings.push(format!(
                "unknown config keys (ignored): {}",
                unknown.join(", ")
            ));
        }
        let upstream = self.upstream_keys();
        if !upstream.is_empty() {
            let named: Vec<String> = upstream
                .iter()
                .map(|(k, why)| format!("{k} ({why})"))
                .collect();
            warnings.push(format!(
                "basho_bench keys not used by basalt bench (ignored): {}",
                named.join(", ")
            ));
        }
        let mode = match self.get("mode") {
            None => Mode::Rate(5.0),
            Some(t) => parse_mode(t).ok_or_else(|| {
                self.invalid(
                    "mode",
                    format!("expected max, {{rate, max}} or {{rate, N}} with N > 0, got {t}"),
                )
            })?,
        };
        let rate_mode = match self.get("basalt_rate_mode").map(|t| t.as_atom()) {
            None | Some(Some("closed_loop")) => RateMode::ClosedLoop,
            Some(Some("open_loop")) => RateMode::OpenLoop,
            Some(_) => {
                return Err(self.invalid("basalt_rate_mode", "expected closed_loop or open_loop"))
            }
        };
        if rate_mode == RateMode::OpenLoop && mode == Mode::Max {
            warnings.push("basalt_rate_mode open_loop has no effect with mode max".into());
        }
        let duration = self.duration()?;
        let report_interval = self.report_interval()?;
        let concurrent = self.int("concurrent", 3, 1)? as usize;
        let driver = self.driver()?;
        let operations = match self.get("operations") {
            None => vec![
                op("get", OpKind::Get, 4),
                op("put", OpKind::Put, 4),
                op("delete", OpKind::Delete, 1),
            ],
            Some(t) => self.parse_ops(t, driver)?,
        };
        let key_generator = match self.get("key_generator") {
            None => KeyGenSpec::UniformInt {
                start: 1,
                n: 100_000,
            },
            Some(t) => KeyGenSpec::from_term(t)?,
        };
        let value_generator = match self.get("value_generator") {
            None => ValGenSpec::FixedBin(100),
            Some(t) => ValGenSpec::from_term(t)?,
        };
        let mut value_source_size =
            self.int("value_generator_source_size", 96 * 1048576, 1)? as usize;
        let value_blob_file = self.blob_file(&value_generator, &mut warnings)?;
        if let Some((_, len)) = &value_blob_file {
            value_source_size = *len;
        }
        let value_blob_file = value_blob_file.map(|(p, _)| p);
        let rng_seed = self.rng_seed()?;
        let shutdown_on_error = self.bool("shutdown_on_error", false)?;
        let backend = self
            .text("basalt_backend")?
            .unwrap_or_else(|| "leveled".into());
        if driver == DriverKind::Embedded && !valid_backends().contains(&backend.as_str()) {
            return Err(self.invalid(
                "basalt_backend",
                format!(
                    "unknown backend {backend}; valid: {}",
                    valid_backends().join(", ")
                ),
            ));
        }
        let data_dir = self.text("basalt_data_dir")?.map(PathBuf::from);
        let stores = self.int("basalt_stores", 1, 1)? as usize;
        let sync = self.bool("basalt_sync", false)?;
        let bucket = self
            .text("basalt_bucket")?
            .map_or_else(|| b"test".to_vec(), String::into_bytes);
        if bucket.is_empty() {
            return Err(self.invalid("basalt_bucket", "must not be empty"));
        }
        let keep_data = self.bool("basalt_keep_data", false)?;
        let memory_limit = self.memory_limit()?;
        let compaction_runs_per_day = match self.get("basalt_compaction_runs_per_day") {
            None => None,
            Some(_) => Some(
                u32::try_from(self.int("basalt_compaction_runs_per_day", 24, 0)?)
                    .map_err(|_| self.invalid("basalt_compaction_runs_per_day", "too large"))?,
            ),
        };
        let compaction_max_garbage_pct = self.pct("basalt_compaction_max_garbage_pct", 60)?;
        let compaction_punch = self.opt_bool("basalt_compaction_punch")?;
        let disk_min_free_pct = self.fraction_pct("basalt_disk_min_free_pct")?;
        let journal_slowdown_garbage_pct = self.pct("basalt_journal_slowdown_pct", 75)?;
        let journal_one_read = self.opt_bool("basalt_journal_one_read")?;
        let journal_fadvise_random = self.opt_bool("basalt_journal_fadvise_random")?;
        let journal_skip_active_lock = self.opt_bool("basalt_journal_skip_active_lock")?;
        let journal_preallocate = self.opt_bool("basalt_journal_preallocate")?;
        let journal_release_written = self.opt_bool("basalt_journal_release_written")?;
        let value_cache_refresh = self.opt_bool("basalt_value_cache_refresh")?;
        let write_group = self.opt_bool("basalt_write_group")?;
        let journal_sync_bytes = self.size("basalt_journal_sync_bytes")?;
        let journal_fsync_bytes = self.size_or_zero("basalt_journal_fsync_bytes")?;
        let background_nice = match self.get("basalt_background_nice") {
            None => None,
            Some(Term::Int(n)) if (0..=19).contains(n) => Some(*n as i32),
            Some(_) => {
                return Err(self.invalid("basalt_background_nice", "expected an integer in 0..=19"))
            }
        };
        let ledger_sync_bytes = self.size_or_zero("basalt_ledger_sync_bytes")?;
        let compaction_stream_bytes = self.size("basalt_compaction_stream_bytes")?;
        let compaction_read_bytes_per_sec = self.size_or_zero("basalt_compaction_read_pace")?;
        let remove_bytes_per_sec = self.size_or_zero("basalt_remove_pace")?;
        let journal_flush = match self.get("basalt_journal_flush").map(|t| t.as_atom()) {
            None => None,
            Some(Some("fsync")) => Some(basalt_backends::JournalFlush::Fsync),
            Some(Some("writeback")) => Some(basalt_backends::JournalFlush::Writeback),
            Some(_) => {
                return Err(self.invalid("basalt_journal_flush", "expected fsync or writeback"))
            }
        };
        let block_cache_bytes = self.size_or_zero("basalt_block_cache")?;
        let value_cache_bytes = self.size_or_zero("basalt_value_cache")?;
        let journal_direct_reads = self.opt_bool("basalt_journal_direct_reads")?;
        let memtable_bytes = self.size("basalt_memtable_bytes")?;
        let l0_merge_trigger = self.opt_count("basalt_l0_merge_trigger")?;
        let l1_files = self.opt_count("basalt_l1_files")?;
        let rocksdb = self.rocks_tuning()?;
        let net = match driver {
            DriverKind::RiakcPb => Some(NetOptions::RiakcPb(self.pb_options(&mut warnings)?)),
            DriverKind::Nhs => Some(NetOptions::Nhs(self.nhs_options(&operations)?)),
            DriverKind::HttpRaw => Some(NetOptions::HttpRaw(self.http_options()?)),
            DriverKind::Embedded | DriverKind::Null => None,
        };
        let has_query = operations.iter().any(|o| o.op == OpKind::IndexQuery);
        let index_terms = self.int("basalt_index_terms", i64::from(has_query), 0)? as usize;
        if key_generator.is_finite() && duration.is_none() {
            // Fine: the run ends when every worker's keys run out.
        } else if duration.is_none() {
            warnings.push("duration infinity with an endless key generator: the run stops only when interrupted".into());
        }
        if matches!(key_generator, KeyGenSpec::SequentialInt(_)) && concurrent > 1 {
            warnings.push(
                "sequential_int gives every worker the same keys; partitioned_sequential_int splits them"
                    .into(),
            );
        }
        Ok((
            BenchConfig {
                mode,
                rate_mode,
                duration,
                report_interval,
                concurrent,
                driver,
                operations,
                key_generator,
                value_generator,
                value_source_size,
                value_blob_file,
                rng_seed,
                shutdown_on_error,
                backend,
                data_dir,
                stores,
                sync,
                bucket,
                keep_data,
                index_terms,
                memory_limit,
                compaction_runs_per_day,
                compaction_max_garbage_pct,
                compaction_punch,
                disk_min_free_pct,
                journal_slowdown_garbage_pct,
                journal_one_read,
                journal_fadvise_random,
                journal_skip_active_lock,
                journal_preallocate,
                journal_release_written,
                value_cache_refresh,
                write_group,
                journal_sync_bytes,
                journal_fsync_bytes,
                ledger_sync_bytes,
                background_nice,
                compaction_stream_bytes,
                compaction_read_bytes_per_sec,
                remove_bytes_per_sec,
                journal_flush,
                block_cache_bytes,
                value_cache_bytes,
                journal_direct_reads,
                memtable_bytes,
                l0_merge_trigger,
                l1_files,
                rocksdb,
                net,
                files: self.files.clone(),
            },
            warnings,
        ))
    }

    /// `basalt_duration_secs`, else `duration` in minutes or `infinity`
    /// (`None`); 5 minutes by default.
    fn duration(&self) -> Result<Option<Duration>, ConfigError> {
        Ok(
            match (self.get("basalt_duration_secs"), self.get("duration")) {
                (Some(t), _) => match t.as_number() {
                    Some(s) if s > 0.0 && s.is_finite() => Some(Duration::from_secs_f64(s)),
                    _ => {
                        return Err(self.invalid(
                            "basalt_duration_secs",
                            "expected a positive number of seconds",
                        ))
                    }
                },
                (None, None) => Some(Duration::from_secs(5 * 60)),
                (None, Some(Term::Atom(a))) if a == "infinity" => None,
                (None, Some(t)) => match t.as_number() {
                    Some(m) if m > 0.0 && m.is_finite() => Some(Duration::from_secs_f64(m * 60.0)),
                    _ => {
                        return Err(self.invalid(
                            "duration",
                            format!("expected minutes (a positive number) or infinity, got {t}"),
                        ))
                    }
                },
            },
        )
    }

    /// `report_interval` in seconds (10 by default).
    fn report_interval(&self) -> Result<Duration, ConfigError> {
        Ok(match self.get("report_interval") {
            None => Duration::from_secs(10),
            Some(t) => match t.as_number() {
                Some(s) if s > 0.0 && s.is_finite() => Duration::from_secs_f64(s),
                _ => {
                    return Err(
                        self.invalid("report_interval", format!("expected seconds > 0, got {t}"))
                    )
                }
            },
        })
    }

    /// `driver`, with or without basho_bench's `basho_bench_driver_` prefix.
    fn driver(&self) -> Result<DriverKind, ConfigError> {
        Ok(match self.get("driver") {
            None => DriverKind::Embedded,
            Some(t) => {
                let name = t.as_atom().unwrap_or_default();
                match name.strip_prefix("basho_bench_driver_").unwrap_or(name) {
                    "basalt_embedded" => DriverKind::Embedded,
                    "null" => DriverKind::Null,
                    "riakc_pb" => DriverKind::RiakcPb,
                    "nhs" => DriverKind::Nhs,
                    "http_raw" => DriverKind::HttpRaw,
                    other => {
                        let why = UPSTREAM_DRIVERS
                            .iter()
                            .find(|(n, _)| *n == other)
                            .map_or_else(
                                || format!("unknown driver {t}"),
                                |(_, why)| {
                                    format!("{t} is basho_bench's, not basalt bench's: {why}")
                                },
                            );
                        return Err(self.invalid(
                            "driver",
                            format!("{why}; valid: {}", VALID_DRIVERS.join(", ")),
                        ));
                    }
                }
            }
        })
    }

    /// `value_generator_blob_file`: a readable, non-empty file of at most
    /// [`MAX_BLOB_FILE`] bytes, with its size; a warning when
    /// `value_generator` takes no slices of a source.
    fn blob_file(
        &self,
        spec: &ValGenSpec,
        warnings: &mut Vec<String>,
    ) -> Result<Option<(PathBuf, usize)>, ConfigError> {
        const KEY: &str = "value_generator_blob_file";
        let Some(path) = self.text(KEY)? else {
            return Ok(None);
        };
        let len = std::fs::metadata(&path)
            .map_err(|e| self.invalid(KEY, format!("{path}: {e}")))?
            .len();
        if len == 0 || len > MAX_BLOB_FILE {
            return Err(self.invalid(
                KEY,
                format!("{path}: {len} bytes; expected 1 to {MAX_BLOB_FILE} bytes"),
            ));
        }
        if !spec.slices_source() {
            warnings.push(format!(
                "{KEY} has no effect with this value_generator: only fixed_bin, \
                 exponential_bin and uniform_bin values are cut from it, as upstream"
            ));
        }
        Ok(Some((PathBuf::from(path), len as usize)))
    }

    /// `rng_seed`: `{A, B, C}` or `now`.
    fn rng_seed(&self) -> Result<RngSeed, ConfigError> {
        Ok(match self.get("rng_seed") {
            None => RngSeed::Fixed(42, 23, 12),
            Some(Term::Atom(a)) if a == "now" => RngSeed::Now,
            Some(Term::Tuple(v)) => match v.as_slice() {
                [Term::Int(a), Term::Int(b), Term::Int(c)] => RngSeed::Fixed(*a, *b, *c),
                _ => return Err(self.invalid("rng_seed", "expected {A, B, C} or now")),
            },
            Some(_) => return Err(self.invalid("rng_seed", "expected {A, B, C} or now")),
        })
    }

    /// `basalt_memory_limit`: a size such as `"1.5G"` or a byte count.
    fn memory_limit(&self) -> Result<Option<u64>, ConfigError> {
        Ok(match self.get("basalt_memory_limit") {
            None => None,
            Some(Term::Int(n)) if *n > 0 => Some(*n as u64),
            Some(t) => match t.as_text() {
                Some(text) => Some(
                    crate::memlimit::parse_size(&text)
                        .map_err(|e| self.invalid("basalt_memory_limit", e.to_string()))?,
                ),
                None => {
                    return Err(self.invalid(
                        "basalt_memory_limit",
                        format!("expected a size such as \"1.5G\" or a byte count, got {t}"),
                    ))
                }
            },
        })
    }

    fn rocks_tuning(&self) -> Result<basalt_backends::RocksTuning, ConfigError> {
        let mut t = basalt_backends::RocksTuning {
            block_cache_bytes: self.size("basalt_rocksdb_block_cache")?,
            ..Default::default()
        };
        if let Some(b) = self.size("basalt_rocksdb_write_buffer")? {
            t.write_buffer_bytes = b;
        }
        if let Some(c) = self.get("basalt_rocksdb_compression") {
            t.compression = c
                .as_atom()
                .and_then(basalt_backends::RocksCompression::parse)
                .ok_or_else(|| {
                    self.invalid(
                        "basalt_rocksdb_compression",
                        format!("expected none, lz4, snappy or zstd, got {c}"),
                    )
                })?;
        }
        t.bloom_bits_per_key = self.int("basalt_rocksdb_bloom_bits", 10, 0)? as f64;
        t.dynamic_level_bytes = self.bool("basalt_rocksdb_dynamic_level_bytes", true)?;
        t.lower_compaction_priority = self.bool("basalt_rocksdb_lower_priority", true)?;
        Ok(t)
    }
}

fn op(name: &str, op: OpKind, weight: u32) -> OpSpec {
    OpSpec {
        label: name.into(),
        op,
        weight,
    }
}

fn parse_mode(t: &Term) -> Option<Mode> {
    match t {
        Term::Atom(a) if a == "max" => Some(Mode::Max),
        Term::Tuple(v) => match v.as_slice() {
            [Term::Atom(r), Term::Atom(m)] if r == "rate" && m == "max" => Some(Mode::Max),
            [Term::Atom(r), n] if r == "rate" => n
                .as_number()
                .filter(|n| *n > 0.0 && n.is_finite())
                .map(Mode::Rate),
            _ => None,
        },
        _ => None,
    }
}
