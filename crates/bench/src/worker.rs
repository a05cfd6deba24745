//! One load worker: picks an operation by weight, paces itself by `mode`,
//! generates the key and value, calls the driver and records the outcome.
//!
//! Pacing:
//! - `max`: no pause (closed loop).
//! - `{rate, N}`, `closed_loop` (default, basho_bench's): before each op,
//!   sleep an exponential gap with mean 1/N s; the sleep ignores service
//!   time, so a slow store lowers the real rate. Latency = service time.
//! - `{rate, N}`, `open_loop`: intended start times form a Poisson
//!   schedule of rate N (each = previous + exponential gap). The worker
//!   sleeps only until the next intended start; when it is late it goes at
//!   once. Latency is measured from the intended start, so time spent
//!   queued behind a slow request counts (coordinated omission corrected,
//!   basho_bench #183); service time is kept too.
//!
//! As in basho_bench, key and value generation is inside the timed region,
//! only successful ops are timed, and a key generator that runs out ends
//! the worker.

use crate::config::{BenchConfig, Mode, RateMode};
use crate::driver::{Driver, Outcome};
use crate::keygen::KeyGen;
use crate::stats::Stats;
use crate::valgen::{ValGen, ValuePool};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything a worker thread needs.
pub struct WorkerCtx {
    /// Worker Id, 1-based.
    pub id: usize,
    /// The run's config.
    pub cfg: Arc<BenchConfig>,
    /// This worker's driver.
    pub driver: Box<dyn Driver>,
    /// Shared statistics.
    pub stats: Arc<Stats>,
    /// Set to stop all workers.
    pub stop: Arc<AtomicBool>,
    /// Set to 1 by the first error under `shutdown_on_error`, or by a
    /// fatal store error.
    pub exit_code: Arc<AtomicI32>,
    /// The first fatal error (a full disk, a store that closed itself, a
    /// PB worker that cannot reconnect): it stops every worker.
    pub fatal: Arc<parking_lot::Mutex<Option<String>>>,
    /// The run's value pool.
    pub pool: ValuePool,
    /// When to stop, if the run has a duration.
    pub deadline: Option<Instant>,
}

/// The op table: op indexes repeated by weight (basho_bench draws one
/// entry uniformly).
pub fn op_table(cfg: &BenchConfig) -> Vec<usize> {
    cfg.operations
        .iter()
        .enumerate()
        .flat_map(|(i, o)| std::iter::repeat_n(i, o.weight as usize))
        .collect()
}

fn exp_gap<R: Rng>(rng: &mut R, rate: f64) -> Duration {
    let u: f64 = rng.gen();
    Duration::from_secs_f64((-(1.0 - u).ln() / rate).min(3600.0))
}

/// Sleeps until `t` in short steps; false if stopped or past the deadline first.
fn sleep_until(t: Instant, stop: &AtomicBool, deadline: Option<Instant>) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d || t >= d) {
            return false;
        }
        if now >= t {
            return true;
        }
        std::thread::sleep((t - now).min(Duration::from_millis(50)));
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

/// Runs the worker until the deadline, a stop, or the end of its keys.
pub fn run(mut ctx: WorkerCtx) {
    let cfg = ctx.cfg.clone();
    let table = op_table(&cfg);
    if table.is_empty() {
        return;
    }
    let mut rng = StdRng::seed_from_u64(cfg.rng_seed.for_worker(ctx.id));
    let mut keys = KeyGen::new(&cfg.key_generator, ctx.id, cfg.concurrent);
    let mut values = ValGen::new(&cfg.value_generator, ctx.pool.clone());
    let mut next_intended = Instant::now();
    loop {
        if ctx.stop.load(Ordering::Relaxed) || ctx.deadline.is_some_and(|d| Instant::now() >= d) {
            return;
        }
        let i = table[rng.gen_range(0..table.len())];
        let spec = &cfg.operations[i];
        let intended = match cfg.mode {
            Mode::Max => None,
            Mode::Rate(n) => match cfg.rate_mode {
                RateMode::ClosedLoop => {
                    let t = Instant::now() + exp_gap(&mut rng, n);
                    if !sleep_until(t, &ctx.stop, ctx.deadline) {
                        return;
                    }
                    None
                }
                RateMode::OpenLoop => {
                    next_intended += exp_gap(&mut rng, n);
                    if !sleep_until(next_intended, &ctx.stop, ctx.deadline) {
                        return;
                    }
                    Some(next_intended)
                }
            },
        };
        let t0 = Instant::now();
        let Some(key) = keys.next_key(&mut rng) else {
            return;
        };
        let value: &[u8] = if spec.op.writes() {
            values.next_value(&mut rng)
        } else {
            &[]
        };
        let res = ctx.driver.run(spec.op, &key, value);
        let t1 = Instant::now();
        match res {
            Ok(Outcome::Silent) => {}
            Ok(Outcome::Done) => ctx.stats.record(
                i,
                micros(t1 - t0),
                intended.map(|it| micros(t1.saturating_duration_since(it))),
            ),
            Err(e) => {
                ctx.stats.error(i, &spec.label, &e.reason);
                if let Some(why) = e.fatal {
                    ctx.fatal.lock().get_or_insert(why);
                    ctx.exit_code.store(1, Ordering::SeqCst);
                    ctx.stop.store(true, Ordering::SeqCst);
                    return;
                }
                if cfg.shutdown_on_error {
                    ctx.exit_code.store(1, Ordering::SeqCst);
                    ctx.stop.store(true, Ordering::SeqCst);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::NullDriver;

    #[test]
    fn table_follows_weights() {
        let (cfg, _) =
            BenchConfig::from_text("{operations, [{get, 5}, {update, 1}]}.").expect("cfg");
        let t = op_table(&cfg);
        assert_eq!(t.iter().filter(|&&i| i == 0).count(), 5);
        assert_eq!(t.len(), 6);
    }

    #[test]
    fn open_loop_rate_is_kept() {
        let (cfg, _) = BenchConfig::from_text(
            "{mode, {rate, 200}}.\n{basalt_rate_mode, open_loop}.\n{operations, [{get,1}]}.\n{key_generator, {uniform_int, 10}}.\n{value_generator, {fixed_bin, 10}}.",
        )
        .expect("cfg");
        let cfg = Arc::new(cfg);
        let stats = Arc::new(Stats::new(1));
        let ctx = WorkerCtx {
            id: 1,
            pool: ValuePool::new(&cfg.value_generator, 1 << 20, 1),
            cfg: cfg.clone(),
            driver: Box::new(NullDriver),
            stats: stats.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            exit_code: Arc::new(AtomicI32::new(0)),
            fatal: Arc::default(),
            deadline: Some(Instant::now() + Duration::from_millis(1000)),
        };
        run(ctx);
        let n = stats.take_interval()[0].hist.len();
        assert!((120..=280).contains(&n), "{n} ops in 1 s at 200/s");
    }
}
