//! Which delivery modes a test runs under (docs/device.md section 19): code
//! that is right on the hardware must pass eagerly and with every skew seed.
//!
//! An ordinary run takes eager delivery and the few skewed seeds each test
//! names (a representative set, so the suite stays quick);
//! `MC_TEST_EXHAUSTIVE=1` takes eager and skewed seeds 1 ..=
//! [`EXHAUSTIVE_SEEDS`]; `MC_TEST_SEEDS=3,17` names the skewed seeds instead
//! (to replay a failure).

use firmware_model::{ClusterConfig, DeliveryMode};

/// Skewed seeds of an exhaustive run.
pub const EXHAUSTIVE_SEEDS: u64 = 16;

/// Whether `MC_TEST_EXHAUSTIVE` asks for the full matrix.
pub fn exhaustive() -> bool {
    std::env::var("MC_TEST_EXHAUSTIVE").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The seeds `MC_TEST_SEEDS` names, if it is set.
fn named_seeds() -> Option<Vec<u64>> {
    let v = std::env::var("MC_TEST_SEEDS").ok()?;
    let seeds: Vec<u64> = v
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("MC_TEST_SEEDS={v:?}: not a list of numbers"))
        })
        .collect();
    Some(seeds)
}

/// The skewed seeds to run: `ci` in an ordinary run, all of them in an
/// exhaustive one, or those `MC_TEST_SEEDS` names.
pub fn skewed_seeds(ci: &[u64]) -> Vec<u64> {
    if let Some(s) = named_seeds() {
        s
    } else if exhaustive() {
        (1..=EXHAUSTIVE_SEEDS).collect()
    } else {
        ci.to_vec()
    }
}

/// Eager delivery, then skewed delivery with each of [`skewed_seeds`].
pub fn delivery_modes(ci: &[u64]) -> Vec<DeliveryMode> {
    std::iter::once(DeliveryMode::Eager)
        .chain(skewed_seeds(ci).into_iter().map(DeliveryMode::skewed))
        .collect()
}

/// [`delivery_modes`] for a slow test: at most `max` skewed seeds.
pub fn delivery_modes_up_to(ci: &[u64], max: usize) -> Vec<DeliveryMode> {
    let mut modes = delivery_modes(ci);
    modes.truncate(1 + max);
    modes
}

/// A cluster of `nodes` with every default but `delivery`.
pub fn config(nodes: u8, delivery: DeliveryMode) -> ClusterConfig {
    ClusterConfig {
        delivery,
        ..ClusterConfig::new(nodes)
    }
}

/// Run `f` once per mode of [`delivery_modes`], saying which on stderr (shown
/// with a failing test's output).
pub fn for_each_delivery(ci: &[u64], f: impl FnMut(DeliveryMode)) {
    run_each(delivery_modes(ci), f);
}

/// [`for_each_delivery`] for a slow test: at most `max` skewed seeds even in
/// an exhaustive run.
pub fn for_each_delivery_up_to(ci: &[u64], max: usize, f: impl FnMut(DeliveryMode)) {
    run_each(delivery_modes_up_to(ci, max), f);
}

fn run_each(modes: Vec<DeliveryMode>, mut f: impl FnMut(DeliveryMode)) {
    for mode in modes {
        eprintln!("--- delivery {mode}");
        f(mode);
    }
}

/// The `mc-host` options for `mode`.
pub fn host_args(mode: DeliveryMode) -> Vec<String> {
    match mode {
        DeliveryMode::Eager => vec!["--delivery".into(), "eager".into()],
        DeliveryMode::Skewed(p) => vec![
            "--delivery".into(),
            "skewed".into(),
            "--seed".into(),
            p.seed.to_string(),
        ],
    }
}
