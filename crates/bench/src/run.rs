//! One benchmark run: prepare the results directory (failing before any
//! load if it cannot be written), open the stores, start the workers,
//! write a row per report interval, then `errors.csv`, `report.md`,
//! `report.html` and `summary.png`.

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
    /// disk) or a driver could not go on; the reports cover the time
    /// measured until then.
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
             bloom {} bits/key; dynamic level bytes {}; background jobs {}; bytes_per_sync {}; \
             compaction threads at lowest priority {}",
            crate::memlimit::human(t.block_cache_for(bc.memory_budget_bytes)),
            crate::memlimit::human(t.write_buffer_bytes),
            t.max_write_buffers,
            t.compression,
            t.bloom_bits_per_key,
            t.dynamic_level_bytes,
            t.background_jobs,
            crate::memlimit::human(t.bytes_per_sync),
            t.lower_compaction_priority
        ));
    }
    if cfg.driver == DriverKind::Embedded && cfg.backend == "leveled" {
        let bc = crate::driver::backend_config(cfg);
        let on = |o: Option<bool>| o.map_or("default".to_string(), |b| b.to_string());
        v.push(format!(
            "leveled journal: one read {}; fadvise random {}; skip active lock {}; preallocate {}; release written {}; write groups {}; sync bytes {}; fsync bytes {}; ledger sync bytes {}; background nice {}; compaction runs/day {}; max garbage {}; reclaim in place {}; slowdown above {}; compaction stream bytes {}; compaction read pace {}; remove pace {}; flush {}; block cache {}; value cache {}; value cache refresh {}; direct reads {}",
            on(cfg.journal_one_read),
            on(cfg.journal_fadvise_random),
            on(cfg.journal_skip_active_lock),
            on(cfg.journal_preallocate),
            on(cfg.journal_release_written),
            on(cfg.write_group),
            cfg.journal_sync_bytes
                .map_or("default".to_string(), crate::memlimit::human),
            cfg.journal_fsync_bytes.map_or("default".to_string(), |n| if n == 0 {
                "only at rolls".into()
            } else {
                crate::memlimit::human(n)
            }),
            cfg.ledger_sync_bytes.map_or("default".to_string(), |n| if n == 0 {
                "when finished".into()
            } else {
                crate::memlimit::human(n)
            }),
            cfg.background_nice.map_or("default".to_string(), |n| n.to_string()),
            cfg.compaction_runs_per_day
                .map_or("default".to_string(), |n| n.to_string()),
            cfg.compaction_max_garbage_pct
                .map_or("default".to_string(), |p| format!("{p}%")),
            cfg.compaction_punch.map_or("auto (in place until punching proves slow)".to_string(), |b| b.to_string()),
            cfg.journal_slowdown_garbage_pct
                .map_or("default".to_string(), |p| format!("{p}%")),
            cfg.compaction_stream_bytes
                .map_or("default".to_string(), crate::memlimit::human),
            cfg.compaction_read_bytes_per_sec
                .map_or("default".to_string(), |n| if n == 0 { "unpaced".into() } else { format!("{}/s", crate::memlimit::human(n)) }),
            cfg.remove_bytes_per_sec
                .map_or("default".to_string(), |n| if n == 0 { "at once".into() } else { format!("{}/s", crate::memlimit::human(n)) }),
            cfg.journal_flush
                .map_or("default".to_string(), |m| format!("{m:?}").to_lowercase()),
            cfg.block_cache_bytes
                .map_or("default".to_string(), |n| if n == 0 { "none".into() } else { crate::memlimit::human(n) }),
            match bc.leveled_value_cache_bytes() {
                0 => "none".to_string(),
                n => crate::memlimit::human(n),
            },
            on(cfg.value_cache_refresh),
            bc.leveled_direct_reads()
        ));
        let dflt = |o: Option<usize>| o.map_or("default".to_string(), |n| n.to_string());
        v.push(format!(
            "leveled ledger: memtable {}; L0 merge trigger {}; L1 files {}",
            cfg.memtable_bytes
                .map_or("default".to_string(), crate::memlimit::human),
            dflt(cfg.l0_merge_trigger),
            dflt(cfg.l1_files)
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
///
/// In order: refuse a memory budget too small for the stores; check that
/// a live node answers; enter the memory cgroup; prepare the results
/// directory; open the stores and connect the drivers; start the workers;
/// write a row per report interval until the end ([`Rows`]); close the
/// stores; write `store_stats.csv`, `errors.csv`, the report and the chart.
pub fn run(
    cfg: BenchConfig,
    warnings: &[String],
    opts: &RunOptions,
) -> Result<RunOutcome, RunError> {
    let mut cfg = cfg;
    cfg.memory_limit = opts.memory_limit.or(cfg.memory_limit);
    // A memory budget too small to open the stores is refused before
    // anything else (never an OOM kill mid-run); the process then moves into
    // its cgroup before the value pool and the stores take memory.
    check_memory_floor(&cfg)?;
    // A live node must answer before anything is written.
    let stop = Arc::new(AtomicBool::new(false));
    let net = match &cfg.net {
        Some(n) => {
            check_reachable(n).map_err(RunError::Driver)?;
            Some(NetShared::new(&cfg, n.clone(), stop.clone()))
        }
        None => None,
    };
    let cgroup = cfg
        .memory_limit
        .map(crate::memlimit::MemoryCgroup::enter)
        .transpose()?;
    let dir = output::prepare_results_dir(&opts.results_parent, opts.name.as_deref())?;
    copy_config_files(&cfg.files, &dir)?;
    let labels: Vec<String> = cfg.operations.iter().map(|o| o.file_label()).collect();
    let open_loop = cfg.rate_mode == RateMode::OpenLoop && matches!(cfg.mode, Mode::Rate(_));
    let csv = CsvWriters::create(&dir, &labels, open_loop)?;
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
    let pool = ValuePool::for_run(
        &cfg.value_generator,
        cfg.value_blob_file.as_deref(),
        cfg.value_source_size,
        cfg.rng_seed.for_worker(0),
    )
    .map_err(|e| RunError::Driver(format!("value_generator_blob_file: {e}")))?;
    let cfg = Arc::new(cfg);
    let shared = Shared {
        stats: Arc::new(Stats::new(cfg.operations.len())),
        stop,
        exit_code: Arc::new(AtomicI32::new(0)),
        fatal: Arc::default(),
    };
    // Every driver first (network drivers connect here), then the workers.
    let drivers = make_drivers(&cfg, net.as_ref(), &targets, &user_bytes)?;
    // Wait counters of the stores (leveled's engine timers), as of the start.
    let mut rows = Rows::create(
        &dir,
        csv,
        sample_counters(&targets),
        cfg.operations.len(),
        cfg.duration,
    )?;
    let handles = spawn_workers(&cfg, drivers, &shared, &pool, rows.deadline)?;

    drive(
        &mut rows,
        &shared,
        handles,
        cfg.report_interval,
        &progress,
        || user_bytes.load(Ordering::Relaxed),
        || sample_counters(&targets),
    )?;
    progress.finish();
    let (cumulative, total_ok, total_err) = rows.finish();
    // The stores' counters at the end (compactions, merges, stalls, ...).
    let end_counters = sample_counters(&targets);
    write_store_stats(&dir, &end_counters)?;
    for t in &targets {
        if let Err(e) = t.close() {
            progress.println(&format!("warning: closing a store: {e}"));
        }
    }
    drop(targets);
    if cfg.driver == DriverKind::Embedded && !cfg.keep_data && cfg.data_dir.is_none() {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    let op_names: Vec<(String, &'static str)> = cfg
        .operations
        .iter()
        .map(|o| (o.label.clone(), o.op.name()))
        .collect();
    output::write_errors(&dir, &shared.stats.error_totals(), &op_names)?;
    let data = RunData::load(&dir)?;
    let stopped = shared.fatal.lock().clone();
    let extra = ReportExtra {
        header: report_header(
            &cfg,
            cgroup.as_ref(),
            &end_counters,
            stopped.as_deref().map(|why| (why, data.elapsed())),
            warnings,
        ),
        totals: totals(&labels, &cumulative),
        service: if open_loop {
            service_totals(&labels, &cumulative)
        } else {
            Vec::new()
        },
        repl_pair: repl_pair(&cfg),
    };
    let replication = report::repl_delay(&data, &extra);
    let report = report::write(&data, &extra)?;
    crate::htmlreport::write_report(&data, &extra)?;
    crate::chart::summary_png(&data, &dir.join("summary.png"))?;
    Ok(RunOutcome {
        dir,
        exit_code: shared.exit_code.load(Ordering::SeqCst),
        ok: total_ok,
        errors: total_err,
        avg_tps: data.avg_tps(),
        report,
        stopped,
        replication,
    })
}

/// Writes a row per report interval until the deadline, a stop (a failed
/// store with `shutdown_on_error`) or the end of every worker; then joins
/// the workers and writes the last row, which covers the rest.
fn drive(
    rows: &mut Rows,
    shared: &Shared,
    mut handles: Vec<std::thread::JoinHandle<()>>,
    interval: Duration,
    progress: &Progress,
    user_bytes: impl Fn() -> u64,
    counters: impl Fn() -> crate::waits::Sample,
) -> Result<(), RunError> {
    let mut next_report = rows.start + interval;
    let deadline = rows.deadline;
    loop {
        let now = Instant::now();
        let done = shared.stop.load(Ordering::Relaxed)
            || deadline.is_some_and(|d| now >= d)
            || handles.iter().all(|h| h.is_finished());
        // A regular row, unless the run ends within 5% of an interval:
        // then the final row covers it (no sliver rows).
        let regular =
            now >= next_report && deadline.is_none_or(|d| next_report + interval.mul_f64(0.05) < d);
        if done {
            shared.stop.store(true, Ordering::SeqCst);
            for h in handles.drain(..) {
                let _ = h.join();
            }
        }
        if regular || done {
            let snaps = shared.stats.take_interval();
            rows.write(&snaps, user_bytes(), &counters)?;
            rows.show(progress);
            if regular {
                next_report += interval;
            }
        }
        if done {
            return Ok(());
        }
        let wait = next_report
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        std::thread::sleep(wait.max(Duration::from_millis(1)));
    }
}

/// Each operation's latencies and errors over the whole run.
fn totals(labels: &[String], cumulative: &Cumulative) -> Vec<(String, LatencySummary, u64)> {
    labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            (
                l.clone(),
                LatencySummary::of(&cumulative.hists[i]),
                cumulative.errors[i],
            )
        })
        .collect()
}

/// Each operation's service times over the whole run (open loop only).
fn service_totals(labels: &[String], cumulative: &Cumulative) -> Vec<(String, LatencySummary)> {
    labels
        .iter()
        .enumerate()
        .map(|(i, l)| (l.clone(), LatencySummary::of(&cumulative.service[i])))
        .collect()
}

/// Refuses a `memory_limit` below what the stores (and the value pool)
/// need to open, with the figures.
fn check_memory_floor(cfg: &BenchConfig) -> Result<(), RunError> {
    let Some(limit) = cfg.memory_limit else {
        return Ok(());
    };
    let pool = cfg.value_source_size as u64;
    let floor = match cfg.driver {
        DriverKind::Embedded => crate::memlimit::floor_bytes(
            &cfg.backend,
            cfg.stores,
            &crate::driver::backend_config(cfg),
            pool,
        ),
        _ => crate::memlimit::floor_bytes("(none)", 0, &Default::default(), pool),
    };
    Ok(crate::memlimit::check_floor(limit, floor)?)
}

/// Copies the run's config files into its results directory.
fn copy_config_files(files: &[PathBuf], dir: &Path) -> Result<(), RunError> {
    for f in files {
        if let Some(name) = f.file_name() {
            std::fs::copy(f, dir.join(name)).map_err(|source| OutputError::Io {
                path: f.clone(),
                source,
            })?;
        }
    }
    Ok(())
}

/// One driver per worker: a network driver (connected here), an embedded
/// one over the opened stores, or the null driver.
fn make_drivers(
    cfg: &Arc<BenchConfig>,
    net: Option<&NetShared>,
    targets: &[Arc<dyn KvTarget>],
    user_bytes: &Arc<AtomicU64>,
) -> Result<Vec<Box<dyn Driver>>, RunError> {
    let mut drivers = Vec::with_capacity(cfg.concurrent);
    for id in 1..=cfg.concurrent {
        let driver: Box<dyn Driver> = match (net, cfg.driver) {
            (Some(n), _) => n.driver(cfg, id).map_err(RunError::Driver)?,
            (None, DriverKind::Embedded) => Box::new(EmbeddedDriver::new(
                targets.to_vec(),
                cfg,
                user_bytes.clone(),
            )),
            (None, _) => Box::new(NullDriver),
        };
        drivers.push(driver);
    }
    Ok(drivers)
}

/// What the workers share with the run loop.
struct Shared {
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    exit_code: Arc<AtomicI32>,
    fatal: Arc<parking_lot::Mutex<Option<String>>>,
}

/// Starts one thread per driver.
fn spawn_workers(
    cfg: &Arc<BenchConfig>,
    drivers: Vec<Box<dyn Driver>>,
    shared: &Shared,
    pool: &ValuePool,
    deadline: Option<Instant>,
) -> Result<Vec<std::thread::JoinHandle<()>>, RunError> {
    let mut handles = Vec::with_capacity(drivers.len());
    for (i, driver) in drivers.into_iter().enumerate() {
        let id = i + 1;
        let ctx = WorkerCtx {
            id,
            cfg: cfg.clone(),
            driver,
            stats: shared.stats.clone(),
            stop: shared.stop.clone(),
            exit_code: shared.exit_code.clone(),
            fatal: shared.fatal.clone(),
            pool: pool.clone(),
            deadline,
        };
        let h = std::thread::Builder::new()
            .name(format!("bench-worker-{id}"))
            .spawn(move || worker::run(ctx))
            .map_err(|e| RunError::Driver(format!("spawning a worker: {e}")))?;
        handles.push(h);
    }
    Ok(handles)
}

/// The stores' counters now, summed over stores.
fn sample_counters(targets: &[Arc<dyn KvTarget>]) -> crate::waits::Sample {
    crate::waits::merge(&targets.iter().map(|t| t.counters()).collect::<Vec<_>>())
}

/// The interval rows of a run: the CSV files they go to, and what one row
/// needs from the previous (its time, the process's counters) and adds to
/// the totals.
struct Rows {
    start: Instant,
    /// `start` plus the run's duration, if it has one.
    deadline: Option<Instant>,
    last: Instant,
    last_sys: sysstats::ProcSample,
    last_user: u64,
    csv: CsvWriters,
    waits_csv: Option<crate::waits::WaitsCsv>,
    activity_csv: crate::activity::ActivityCsv,
    cumulative: Cumulative,
    /// Ops and length of the last row (for the progress line).
    last_row: (u64, Duration),
    total_ok: u64,
    total_err: u64,
}

impl Rows {
    /// Creates the counter CSVs against `baseline` (the stores' counters
    /// at the start); the run's clock starts now and ends after `duration`.
    fn create(
        dir: &Path,
        csv: CsvWriters,
        baseline: crate::waits::Sample,
        ops: usize,
        duration: Option<Duration>,
    ) -> Result<Rows, RunError> {
        let waits_csv = crate::waits::WaitsCsv::create(dir, baseline.clone())?;
        let activity_csv = crate::activity::ActivityCsv::create(dir, baseline)?;
        let start = Instant::now();
        Ok(Rows {
            start,
            deadline: duration.map(|d| start + d),
            last: start,
            last_sys: sysstats::sample(),
            last_user: 0,
            csv,
            waits_csv,
            activity_csv,
            cumulative: Cumulative::new(ops),
            last_row: (0, Duration::ZERO),
            total_ok: 0,
            total_err: 0,
        })
    }

    /// Writes the row of the interval since the last one: latencies of
    /// `snaps`, the process's CPU and I/O, `user_now` (value bytes written
    /// so far), and the stores' counters from `counters`.
    fn write(
        &mut self,
        snaps: &[crate::stats::OpSnapshot],
        user_now: u64,
        counters: &impl Fn() -> crate::waits::Sample,
    ) -> Result<(), RunError> {
        let now = Instant::now();
        self.cumulative.add(snaps);
        let ops: Vec<(LatencySummary, u64)> = snaps
            .iter()
            .map(|s| (LatencySummary::of(&s.hist), s.errors))
            .collect();
        let service: Vec<LatencySummary> = snaps
            .iter()
            .map(|s| LatencySummary::of(&s.service))
            .collect();
        let sys_now = sysstats::sample();
        let window = now - self.last;
        let cpu_secs = sys_now.cpu_us.saturating_sub(self.last_sys.cpu_us) as f64 / 1e6;
        let sys = SysRow {
            cpu_secs,
            cpu_pct: if window.as_secs_f64() > 0.0 {
                cpu_secs / window.as_secs_f64() * 100.0
            } else {
                0.0
            },
            write_bytes: sys_now
                .write_bytes
                .saturating_sub(self.last_sys.write_bytes),
            wchar: sys_now.wchar.saturating_sub(self.last_sys.wchar),
            user_bytes: user_now.saturating_sub(self.last_user),
        };
        let elapsed_us = (now - self.start).as_micros() as u64;
        let window_us = window.as_micros() as u64;
        self.csv.row(elapsed_us, window_us, &ops, &service, &sys)?;
        let (elapsed, window_s) = (output::secs(elapsed_us), output::secs(window_us));
        let counters = counters();
        self.activity_csv
            .row(&elapsed, &window_s, counters.clone())?;
        if let Some(w) = self.waits_csv.as_mut() {
            w.row(&elapsed, &window_s, counters)?;
        }
        let ok: u64 = ops.iter().map(|(s, _)| s.n).sum();
        let err: u64 = ops.iter().map(|(_, e)| e).sum();
        self.total_ok += ok;
        self.total_err += err;
        self.last_row = (ok, window);
        self.last = now;
        self.last_sys = sys_now;
        self.last_user = user_now;
        Ok(())
    }

    /// Closes (and so flushes) the CSV files; returns the run's totals:
    /// latencies and errors per operation, ops and errors.
    fn finish(self) -> (Cumulative, u64, u64) {
        (self.cumulative, self.total_ok, self.total_err)
    }

    /// The progress line after a row.
    fn show(&self, progress: &Progress) {
        let (ok, window) = self.last_row;
        progress.update(
            self.last - self.start,
            self.deadline
                .map(|d| d.saturating_duration_since(self.last)),
            ok as f64 / window.as_secs_f64().max(1e-9),
            self.total_err,
        );
    }
}

/// `store_stats.csv`: every store counter at the end of the run (none for
/// network drivers).
fn write_store_stats(dir: &Path, counters: &crate::waits::Sample) -> Result<(), RunError> {
    if counters.is_empty() {
        return Ok(());
    }
    let path = dir.join("store_stats.csv");
    let mut text = String::from("counter, value\n");
    for (k, v) in counters {
        text.push_str(&format!("{k}, {v}\n"));
    }
    std::fs::write(&path, text).map_err(|source| OutputError::Io { path, source })?;
    Ok(())
}

/// The report's header lines: the run's settings, its memory limit, a few
/// store counters at the end, why it stopped early (the reason and when)
/// if it did, and the config's warnings.
fn report_header(
    cfg: &BenchConfig,
    cgroup: Option<&crate::memlimit::MemoryCgroup>,
    end_counters: &crate::waits::Sample,
    stopped: Option<(&str, f64)>,
    warnings: &[String],
) -> Vec<String> {
    let mut header = describe(cfg);
    if let Some(cg) = cgroup {
        let mut line = cg.describe();
        if let Some(peak) = cg.peak_bytes() {
            line.push_str(&format!("; peak charged {}", crate::memlimit::human(peak)));
        }
        if let Some(hits) = cg.limit_hits() {
            line.push_str(&format!("; limit reached {hits} times (reclaim)"));
        }
        header.push(line);
    } else if cfg.driver == DriverKind::Embedded {
        header.push("memory limit: none (the page cache may hold the whole data set)".into());
    } else {
        // The store is the nodes': their memory is theirs to state (the
        // cluster runner adds each node's limit and peak beside this).
        header.push("memory limit: none on the bench process; the nodes' own apply".into());
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
    if let Some((why, at)) = stopped {
        header.push(format!("**stopped early** at {at:.1} s: {why}"));
    }
    header.extend(warnings.iter().map(|w| format!("warning: {w}")));
    header
}

/// The (`put_unique`, `put_unique_checkrepl`) labels when both run: the
/// report then shows the replication delay.
fn repl_pair(cfg: &BenchConfig) -> Option<(String, String)> {
    let label = |k: OpKind| {
        cfg.operations
            .iter()
            .find(|o| o.op == k)
            .map(|o| o.file_label())
    };
    label(OpKind::PutUnique).zip(label(OpKind::PutUniqueCheckRepl))
}

/// Runs the config files `paths` (for tests and the CLI).
pub fn run_files<P: AsRef<Path>>(
    paths: &[P],
    opts: &RunOptions,
) -> Result<RunOutcome, anyhow::Error> {
    let (cfg, warnings) = BenchConfig::from_files(paths)?;
    Ok(run(cfg, &warnings, opts)?)
}
