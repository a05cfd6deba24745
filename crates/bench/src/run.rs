//! One benchmark run: prepare the results directory (failing before any
//! load if it cannot be written), open the stores, start the workers,
//! write a row per report interval, then `errors.csv`, `report.md` and
//! `summary.png`.

use crate::config::{BenchConfig, DriverKind, Mode, OpKind, RateMode};
use crate::driver::{open_targets, Driver, EmbeddedDriver, KvTarget, NullDriver};
use crate::netcfg::NetOptions;
use crate::netdriver::{check_reachable, NetShared};
use crate::output::{self, CsvWriters, OutputError, RunData, SysRow};
use crate::progress::Progress;
use crate::report::{self, ReportExtra};
use crate::stats::{Cumulative, LatencySummary, Stats};
use crate::sysstats;
use crate::valgen::ValuePool;
use crate::worker::{self, WorkerCtx};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A run error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Output files.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The driver could not start (e.g. a store failed to open).
    #[error("driver: {0}")]
    Driver(String),
    /// The chart could not be drawn.
    #[error(transparent)]
    Chart(#[from] crate::chart::ChartError),
    /// `--memory-limit` could not be applied (checked before the run).
    #[error(transparent)]
    MemLimit(#[from] crate::memlimit::MemLimitError),
}

/// Options that are not part of the config.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Parent of the run directory (basho_bench `-d`, default `tests`).
    pub results_parent: PathBuf,
    /// Run name (`-n`, default a timestamp).
    pub name: Option<String>,
    /// No progress output.
    pub quiet: bool,
    /// `--memory-limit` in bytes (overrides `basalt_memory_limit`).
    pub memory_limit: Option<u64>,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run directory.
    pub dir: PathBuf,
    /// 0, or 1 when `shutdown_on_error` stopped the run.
    pub exit_code: i32,
    /// Successful ops.
    pub ok: u64,
    /// Failed ops.
    pub errors: u64,
    /// Avg TPS.
    pub avg_tps: f64,
    /// The report.
    pub report: PathBuf,
    /// Why the run stopped before its end, if a store failed (e.g. a full
    /// disk); the reports cover the time measured until then.
    pub stopped: Option<String>,
    /// `put_unique_checkrepl` against `put_unique`, when both ran (also in
    /// the report).
    pub replication: Option<report::ReplDelay>,
}

fn describe(cfg: &BenchConfig) -> Vec<String> {
    let mode = match (cfg.mode, cfg.rate_mode) {
        (Mode::Max, _) => "max".to_string(),
        (Mode::Rate(n), RateMode::ClosedLoop) => format!("{{rate, {n}}} per worker, closed loop"),
        (Mode::Rate(n), RateMode::OpenLoop) => {
            format!("{{rate, {n}}} per worker, open loop (latency from intended start)")
        }
    };
    let ops: Vec<String> = cfg
        .operations
        .iter()
        .map(|o| format!("{}:{}", o.label, o.weight))
        .collect();
    let mut v = vec![
        format!("mode: {mode}; concurrent: {}", cfg.concurrent),
        format!(
            "duration: {}; report_interval: {} s",
            cfg.duration.map_or_else(
                || "infinity".into(),
                |d| format!("{:.0} s", d.as_secs_f64())
            ),
            cfg.report_interval.as_secs_f64()
        ),
        format!("operations: {}", ops.join(", ")),
        format!(
            "key_generator: {:?}; value_generator: {:?}",
            cfg.key_generator, cfg.value_generator
        ),
    ];
    if cfg.driver == DriverKind::Embedded && cfg.backend.starts_with("rocksdb") {
        let bc = crate::driver::backend_config(cfg);
        let t = &bc.rocksdb;
        v.push(format!(
            "rocksdb settings: block cache {} per store; write buffer {} × {}; compression {:?}; \
             bloom {} bits/key; dynamic level bytes {}; background jobs {}; bytes_per_sync {}",
            crate::memlimit::human(t.block_cache_for(bc.memory_budget_bytes)),
            crate::memlimit::human(t.write_buffer_bytes),
            t.max_write_buffers,
            t.compression,
            t.bloom_bits_per_key,
            t.dynamic_level_bytes,
            t.background_jobs,
            crate::memlimit::human(t.bytes_per_sync)
        ));
    }
    if cfg.driver == DriverKind::Embedded && cfg.backend == "leveled" {
        let on = |o: Option<bool>| o.map_or("default".to_string(), |b| b.to_string());
        v.push(format!(
            "leveled journal: one read {}; fadvise random {}; skip active lock {}; write groups {}; sync bytes {}; compaction runs/day {}; max garbage {}; compaction stream bytes {}; compaction read pace {}; flush {}; block cache {}",
            on(cfg.journal_one_read),
            on(cfg.journal_fadvise_random),
            on(cfg.journal_skip_active_lock),
            on(cfg.write_group),
            cfg.journal_sync_bytes
                .map_or("default".to_string(), crate::memlimit::human),
            cfg.compaction_runs_per_day
                .map_or("default".to_string(), |n| n.to_string()),
            cfg.compaction_max_garbage_pct
                .map_or("default".to_string(), |p| format!("{p}%")),
            cfg.compaction_stream_bytes
                .map_or("default".to_string(), crate::memlimit::human),
            cfg.compaction_read_bytes_per_sec
                .map_or("default".to_string(), |n| if n == 0 { "unpaced".into() } else { format!("{}/s", crate::memlimit::human(n)) }),
            cfg.journal_flush
                .map_or("default".to_string(), |m| format!("{m:?}").to_lowercase()),
            cfg.block_cache_bytes
                .map_or("default".to_string(), |n| if n == 0 { "none".into() } else { crate::memlimit::human(n) })
        ));
    }
    match cfg.driver {
        DriverKind::Embedded => v.push(format!(
            "driver: basalt_embedded; backend: {}; stores: {}; sync: {}; 2i terms per put: {}",
            cfg.backend, cfg.stores, cfg.sync, cfg.index_terms
        )),
        DriverKind::Null => v.push("driver: null".into()),
        DriverKind::RiakcPb | DriverKind::Nhs | DriverKind::HttpRaw => {
            let name = match cfg.driver {
                DriverKind::RiakcPb => "basho_bench_driver_riakc_pb",
                DriverKind::Nhs => "basho_bench_driver_nhs",
                _ => "basho_bench_driver_http_raw",
            };
            let targets: Vec<String> = cfg
                .net
                .as_ref()
                .map(|n| n.targets().iter().map(|t| t.to_string()).collect())
                .unwrap_or_default();
            v.push(format!("driver: {name}; nodes: {}", targets.join(" ")));
            if let Some(NetOptions::Nhs(o)) = &cfg.net {
                if !o.repl_targets.is_empty() {
                    let passive: Vec<String> =
                        o.repl_targets.iter().map(|t| t.to_string()).collect();
                    v.push(format!(
                        "passive cluster (replpb_ips, read by put_unique_checkrepl): {}; \
                         replication check bound (basalt_checkrepl_timeout): {} ms",
                        passive.join(" "),
                        o.checkrepl_timeout.as_millis()
                    ));
                }
            }
        }
    }
    v.push(format!(
        "config: {}",
        cfg.files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    ));
    v
}

/// Runs `cfg`; `warnings` are printed and kept in the report.
pub fn run(
    cfg: BenchConfig,
    warnings: &[String],
    opts: &RunOptions,
) -> Result<RunOutcome, RunError> {
    // A memory budget too small to open the stores is refused before
    // anything else (never an OOM kill mid-run); the process then moves into
    // its cgroup before the value pool and the stores take memory.
    let mut cfg = cfg;
    cfg.memory_limit = opts.memory_limit.or(cfg.memory_limit);
    let memory_limit = cfg.memory_limit;
    if let Some(limit) = memory_limit {
        let pool = cfg.value_source_size as u64;
        let floor = match cfg.driver {
            DriverKind::Embedded => crate::memlimit::floor_bytes(
                &cfg.backend,
                cfg.stores,
                &crate::driver::backend_config(&cfg),
                pool,
            ),
            _ => crate::memlimit::floor_bytes("(none)", 0, &Default::default(), pool),
        };
        crate::memlimit::check_floor(limit, floor)?;
    }
    // A live node must answer before anything is written.
    let stop = Arc::new(AtomicBool::new(false));
    let net = match &cfg.net {
        Some(n) => {
            check_reachable(n).map_err(RunError::Driver)?;
            Some(NetShared::new(&cfg, n.clone(), stop.clone()))
        }
        None => None,
    };
    let cgroup = match memory_limit {
        Some(limit) => Some(crate::memlimit::MemoryCgroup::enter(limit)?),
        None => None,
    };
    let dir = output::prepare_results_dir(&opts.results_parent, opts.name.as_deref())?;
    for f in &cfg.files {
        if let Some(name) = f.file_name() {
            std::fs::copy(f, dir.join(name)).map_err(|source| OutputError::Io {
                path: f.clone(),
                source,
            })?;
        }
    }
    let labels: Vec<String> = cfg.operations.iter().map(|o| o.file_label()).collect();
    let open_loop = cfg.rate_mode == RateMode::OpenLoop && matches!(cfg.mode, Mode::Rate(_));
    let mut csv = CsvWriters::create(&dir, &labels, open_loop)?;
    let progress = Progress::new(cfg.duration, opts.quiet);
    for w in warnings {
        progress.println(&format!("warning: {w}"));
    }
    let data_dir = cfg.data_dir.clone().unwrap_or_else(|| dir.join("data"));
    let user_bytes = Arc::new(AtomicU64::new(0));
    let targets: Vec<Arc<dyn KvTarget>> = match cfg.driver {
        DriverKind::Embedded => open_targets(&cfg, &data_dir).map_err(RunError::Driver)?,
        _ => Vec::new(),
    };
    let pool = ValuePool::new(
        &cfg.value_generator,
        cfg.value_source_size,
        cfg.rng_seed.for_worker(0),
    );
    let cfg = Arc::new(cfg);
    let stats = Arc::new(Stats::new(cfg.operations.len()));
    let exit_code = Arc::new(AtomicI32::new(0));
    let fatal: Arc<parking_lot::Mutex<Option<String>>> = Arc::default();
    // Every driver first (network drivers connect here), then the workers.
    let mut drivers = Vec::with_capacity(cfg.concurrent);
    for id in 1..=cfg.concurrent {
        let driver: Box<dyn Driver> = match (&net, cfg.driver) {
            (Some(n), _) => n.driver(&cfg, id).map_err(RunError::Driver)?,
            (None, DriverKind::Embedded) => Box::new(EmbeddedDriver::new(
                targets.clone(),
                &cfg,
                user_bytes.clone(),
            )),
            (None, _) => Box::new(NullDriver),
        };
        drivers.push(driver);
    }
    // Wait counters of the stores (leveled's engine timers), as of the start.
    let sample_waits =
        || crate::waits::merge(&targets.iter().map(|t| t.counters()).collect::<Vec<_>>());
    let start_counters = sample_waits();
    let mut waits_csv = crate::waits::WaitsCsv::create(&dir, start_counters.clone())?;
    let mut activity_csv = crate::activity::ActivityCsv::create(&dir, start_counters)?;
    let start = Instant::now();
    let deadline = cfg.duration.map(|d| start + d);
    let mut handles = Vec::new();
    for (i, driver) in drivers.into_iter().enumerate() {
        let id = i + 1;
        let ctx = WorkerCtx {
            id,
            cfg: cfg.clone(),
            driver,
            stats: stats.clone(),
            stop: stop.clone(),
            exit_code: exit_code.clone(),
            fatal: fatal.clone(),
            pool: pool.clone(),
            deadline,
        };
        let h = std::thread::Builder::new()
            .name(format!("bench-worker-{id}"))
            .spawn(move || worker::run(ctx))
            .map_err(|e| RunError::Driver(format!("spawning a worker: {e}")))?;
        handles.push(h);
    }

    let interval = cfg.report_interval;
    let mut cumulative = Cumulative::new(cfg.operations.len());
    let mut last = start;
    let mut next_report = start + interval;
    let mut last_sys = sysstats::sample();
    let mut last_user = 0u64;
    let (mut total_ok, mut total_err) = (0u64, 0u64);
    loop {
        let now = Instant::now();
        let done = stop.load(Ordering::Relaxed)
            || deadline.is_some_and(|d| now >= d)
            || handles.iter().all(|h| h.is_finished());
        // A regular row, unless the run ends within 5% of an interval:
        // then the final row covers it (no sliver rows).
        let regular =
            now >= next_report && deadline.is_none_or(|d| next_report + interval.mul_f64(0.05) < d);
        if done {
            stop.store(true, Ordering::SeqCst);
            for h in handles.drain(..) {
                let _ = h.join();
            }
        }
        if regular || done {
            let now = Instant::now();
            let snaps = stats.take_interval();
            cumulative.add(&snaps);
            let ops: Vec<(LatencySummary, u64)> = snaps
                .iter()
                .map(|s| (LatencySummary::of(&s.hist), s.errors))
                .collect();
            let service: Vec<LatencySummary> = snaps
                .iter()
                .map(|s| LatencySummary::of(&s.service))
                .collect();
            let sys_now = sysstats::sample();
            let user_now = user_bytes.load(Ordering::Relaxed);
            let window = now - last;
            let cpu_secs = sys_now.cpu_us.saturating_sub(last_sys.cpu_us) as f64 / 1e6;
            let sys = SysRow {
                cpu_secs,
                cpu_pct: if window.as_secs_f64() > 0.0 {
                    cpu_secs / window.as_secs_f64() * 100.0
                } else {
                    0.0
                },
                write_bytes: sys_now.write_bytes.saturating_sub(last_sys.write_bytes),
                wchar: sys_now.wchar.saturating_sub(last_sys.wchar),
                user_bytes: user_now - last_user,
            };
            csv.row(
                (now - start).as_micros() as u64,
                window.as_micros() as u64,
                &ops,
                &service,
                &sys,
            )?;
            let counters = sample_waits();
            activity_csv.row(
                &output::secs((now - start).as_micros() as u64),
                &output::secs(window.as_micros() as u64),
                counters.clone(),
            )?;
            if let Some(w) = waits_csv.as_mut() {
                w.row(
                    &output::secs((now - start).as_micros() as u64),
                    &output::secs(window.as_micros() as u64),
                    counters,
                )?;
            }
            let ok: u64 = ops.iter().map(|(s, _)| s.n).sum();
            let err: u64 = ops.iter().map(|(_, e)| e).sum();
            total_ok += ok;
            total_err += err;
            progress.update(
                now - start,
                deadline.map(|d| d.saturating_duration_since(now)),
                ok as f64 / window.as_secs_f64().max(1e-9),
                total_err,
            );
            last = now;
            last_sys = sys_now;
            last_user = user_now;
            if regular {
                next_report += interval;
            }
        }
        if done {
            break;
        }
        let wait = next_report
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        std::thread::sleep(wait.max(Duration::from_millis(1)));
    }
    progress.finish();
    drop(waits_csv);
    drop(activity_csv);
    // The stores' counters at the end (compactions, merges, stalls, ...).
    let end_counters = sample_waits();
    if !end_counters.is_empty() {
        let path = dir.join("store_stats.csv");
        let mut text = String::from("counter, value\n");
        for (k, v) in &end_counters {
            text.push_str(&format!("{k}, {v}\n"));
        }
        std::fs::write(&path, text).map_err(|source| OutputError::Io { path, source })?;
    }
    for t in &targets {
        if let Err(e) = t.close() {
            progress.println(&format!("warning: closing a store: {e}"));
        }
    }
    drop(targets);
    if cfg.driver == DriverKind::Embedded && !cfg.keep_data && cfg.data_dir.is_none() {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    drop(csv);
    let op_names: Vec<(String, &'static str)> = cfg
        .operations
        .iter()
        .map(|o| (o.label.clone(), o.op.name()))
        .collect();
    output::write_errors(&dir, &stats.error_totals(), &op_names)?;
    let data = RunData::load(&dir)?;
    let mut header = describe(&cfg);
    if let Some(cg) = &cgroup {
        let mut line = cg.describe();
        if let Some(peak) = cg.peak_bytes() {
            line.push_str(&format!("; peak charged {}", crate::memlimit::human(peak)));
        }
        if let Some(hits) = cg.limit_hits() {
            line.push_str(&format!("; limit reached {hits} times (reclaim)"));
        }
        header.push(line);
    } else {
        header.push("memory limit: none (the page cache may hold the whole data set)".into());
    }
    let shown: Vec<String> = [
        "ledger_flushes",
        "ledger_merges",
        "write_stalls",
        "journal_rolls",
        "compaction_runs",
        "compaction_bytes_reclaimed",
    ]
    .iter()
    .filter_map(|k| end_counters.get(*k).map(|v| format!("{k} {v}")))
    .collect();
    if !shown.is_empty() {
        header.push(format!(
            "store at the end (store_stats.csv has all): {}",
            shown.join(", ")
        ));
    }
    let stopped = fatal.lock().clone();
    if let Some(why) = &stopped {
        header.push(format!(
            "**stopped early** at {:.1} s: the store failed: {why}",
            data.elapsed()
        ));
    }
    header.extend(warnings.iter().map(|w| format!("warning: {w}")));
    let extra = ReportExtra {
        header,
        totals: labels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                (
                    l.clone(),
                    LatencySummary::of(&cumulative.hists[i]),
                    cumulative.errors[i],
                )
            })
            .collect(),
        service: if open_loop {
            labels
                .iter()
                .enumerate()
                .map(|(i, l)| (l.clone(), LatencySummary::of(&cumulative.service[i])))
                .collect()
        } else {
            Vec::new()
        },
        repl_pair: {
            let label = |k: OpKind| {
                cfg.operations
                    .iter()
                    .find(|o| o.op == k)
                    .map(|o| o.file_label())
            };
            label(OpKind::PutUnique).zip(label(OpKind::PutUniqueCheckRepl))
        },
    };
    let replication = report::repl_delay(&data, &extra);
    let report = report::write(&data, &extra)?;
    crate::chart::summary_png(&data, &dir.join("summary.png"))?;
    Ok(RunOutcome {
        dir,
        exit_code: exit_code.load(Ordering::SeqCst),
        ok: total_ok,
        errors: total_err,
        avg_tps: data.avg_tps(),
        report,
        stopped,
        replication,
    })
}

/// Runs the config files `paths` (for tests and the CLI).
pub fn run_files<P: AsRef<Path>>(
    paths: &[P],
    opts: &RunOptions,
) -> Result<RunOutcome, anyhow::Error> {
    let (cfg, warnings) = BenchConfig::from_files(paths)?;
    Ok(run(cfg, &warnings, opts)?)
}
