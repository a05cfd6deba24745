//! Generator distributions with fixed seeds and generous tolerances:
//! `eightytwenty_int` puts 80% of draws on the first 20% of keys;
//! `pareto_int` follows `trunc(((1-U)^(-1/1.5) - 1) * 0.5 * trunc(0.2*Max))`
//! (≈80.8% of draws ≤ 20% of Max, ≈2.7% above Max); `truncated_pareto_int`
//! caps at Max; `uniform_int` is flat over 1..Max; per-worker seeds make a
//! worker's sequence repeatable.

use basalt_bench::config::RngSeed;
use basalt_bench::keygen::{pareto, KeyGen, KeyGenSpec};
use rand::rngs::StdRng;
use rand::SeedableRng;

const DRAWS: usize = 200_000;

fn draws(spec: &KeyGenSpec, seed: u64) -> Vec<u64> {
    let mut g = KeyGen::new(spec, 1, 1);
    let mut rng = StdRng::seed_from_u64(seed);
    (0..DRAWS)
        .map(|_| g.next_int(&mut rng).expect("endless"))
        .collect()
}

fn share(v: &[u64], pred: impl Fn(u64) -> bool) -> f64 {
    v.iter().filter(|&&x| pred(x)).count() as f64 / v.len() as f64
}

#[test]
fn eightytwenty_puts_80_percent_in_first_20_percent() {
    let v = draws(&KeyGenSpec::EightyTwentyInt(100_000), 1);
    let hot = share(&v, |k| (1..=20_000).contains(&k));
    assert!((hot - 0.80).abs() < 0.01, "hot share {hot}");
    assert!(v.iter().all(|&k| (1..=100_000).contains(&k)));
    // The cold 20% is spread over the other 80% of keys.
    let cold_half = share(&v, |k| k > 60_000);
    assert!((cold_half - 0.10).abs() < 0.01, "{cold_half}");
}

#[test]
fn pareto_matches_the_formula() {
    let v = draws(&KeyGenSpec::ParetoInt(100_000), 2);
    let le20 = share(&v, |k| k <= 20_000);
    let le10 = share(&v, |k| k <= 10_000);
    let above = share(&v, |k| k > 100_000);
    assert!((le20 - 0.808).abs() < 0.01, "≤20%: {le20}");
    assert!((le10 - 0.648).abs() < 0.01, "≤10%: {le10}");
    assert!((above - 0.027).abs() < 0.005, ">Max: {above}");
    assert!(v.contains(&0), "pareto_int can draw 0");
    // The formula itself for a fixed U: U = 0 gives 0.
    let mut rng = StdRng::seed_from_u64(9);
    assert!(pareto(&mut rng, 10) < 1_000_000);
}

#[test]
fn truncated_pareto_caps_at_max() {
    let v = draws(&KeyGenSpec::TruncatedParetoInt(100_000), 3);
    assert!(v.iter().all(|&k| k <= 100_000));
    let at_max = share(&v, |k| k == 100_000);
    assert!((at_max - 0.027).abs() < 0.005, "{at_max}");
}

#[test]
fn uniform_is_flat() {
    let v = draws(&KeyGenSpec::UniformInt { start: 1, n: 10 }, 4);
    for k in 1..=10u64 {
        let s = share(&v, |x| x == k);
        assert!((s - 0.1).abs() < 0.01, "key {k}: {s}");
    }
}

#[test]
fn worker_streams_are_deterministic() {
    let seed = RngSeed::Fixed(42, 23, 12);
    let spec = KeyGenSpec::ParetoInt(1000);
    let a = draws(&spec, seed.for_worker(3));
    let b = draws(&spec, seed.for_worker(3));
    let c = draws(&spec, seed.for_worker(4));
    assert_eq!(a, b);
    assert_ne!(a, c);
}
