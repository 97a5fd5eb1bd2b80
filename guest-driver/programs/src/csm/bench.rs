//! `mc-guest bench csm`: the operations of Table II of seed 000 (s.3.1),
//! measured on this emulation and printed next to the paper's figures.

use std::time::Instant;

use cashmere::{Config, Csm, CsmError};
use mc_api::MemoryChannel;

use crate::bench::{BenchError, Which};

/// (name, paper microseconds, measured microseconds).
pub type CsmBenchRow = (&'static str, &'static str, f64, f64);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn time_us(iters: u32, mut f: impl FnMut() -> Result<(), CsmError>) -> Result<f64, CsmError> {
    let mut s = Vec::with_capacity(iters as usize);
    for _ in 0..iters {
        let t = Instant::now();
        f()?;
        s.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(s))
}

/// Every node runs this (at least two nodes); node 0 measures and returns
/// the rows, node 1 is the remote home.
pub fn run(mc: &MemoryChannel, iters: u32) -> Result<Vec<CsmBenchRow>, BenchError> {
    if mc.nodes() < 2 {
        return Err(BenchError::NeedsNodes {
            which: Which::Csm,
            nodes: mc.nodes(),
        });
    }
    let cfg = Config {
        heap_bytes: 4 * 8192,
        ..Config::default()
    };
    let csm = Csm::start(mc, &cfg)?;
    let me = csm.node_id();
    let page: cashmere::SharedArray<u32> = csm.alloc(4 * 2048, true)?;
    // Node 1 touches page 0 first: it is the home; node 0 is a remote sharer.
    if me == 1 {
        for i in 0..2048 {
            page.set(i, i as u32);
        }
    }
    csm.barrier()?;
    let mut rows = Vec::new();
    if me == 0 {
        let _ = page.get(0);
        rows.push((
            "null message round trip",
            "15",
            time_us(iters, || csm.null_round_trip(1))?,
            15.0,
        ));
        rows.push((
            "page fetch (8 KiB)",
            "220",
            time_us(iters, || csm.bench_fetch(0).map(drop))?,
            220.0,
        ));
        rows.push((
            "twin (8 KiB)",
            "68",
            time_us(iters, || csm.bench_twin(0))?,
            68.0,
        ));
        rows.push((
            "diff, small (16 words)",
            "31",
            time_us(iters, || csm.bench_diff(0, 16).map(|_| ()))?,
            31.0,
        ));
        rows.push((
            "diff, large (whole page)",
            "129",
            time_us(iters, || csm.bench_diff(0, 2048).map(|_| ()))?,
            129.0,
        ));
        rows.push((
            "lock acquire (+release)",
            "10",
            time_us(iters, || {
                csm.lock_acquire(0)?;
                csm.lock_release(0)
            })?,
            10.0,
        ));
    }
    csm.barrier()?;
    let b = time_us(iters.min(200), || csm.barrier())?;
    if me == 0 {
        rows.push(("barrier (all nodes)", "29", b, 29.0));
    }
    csm.finish()?;
    Ok(rows)
}

pub fn format(rows: &[CsmBenchRow], nodes: u32) -> String {
    let mut s = format!(
        "Cashmere CSM-DMS, Table II operations (seed 000 s.3.1; paper: 32 processors on 8 nodes; here: {nodes} virtual nodes)\n{:<28} {:>12} {:>12} {:>8}\n",
        "operation", "paper (us)", "here (us)", "ratio"
    );
    for (name, paper, here, p) in rows {
        s += &format!("{name:<28} {paper:>12} {here:>12.1} {:>8.2}\n", here / p);
    }
    s
}
