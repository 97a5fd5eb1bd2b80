//! `mc-guest bench`: Memory Channel operations measured through the API, each
//! printed next to the real hardware's figure from the seeds and next to the raw
//! limit of this machine measured in the same run.
//!
//! Seed figures: MC2 one-way latency 2.9 us (seed 004 Table 2) to 3.3 us (seed
//! 000 s.3.1), bandwidth 64 MB/s (seed 004 Table 2) to 75 MB/s (seed 000 s.2.2);
//! imc_ckerrcnt under 5 us (seed 004, Error Management).
//!
//! Files: `report` (what is reported and how it prints), `stats` (medians
//! and this machine's raw limits), `measure` (streams, loopback, posted
//! stores); `run` here runs what was asked, in the same order on every
//! node.

mod measure;
mod report;
mod stats;

use std::time::Instant;

use mc_api::{Barrier, MemoryChannel, Sharing};

pub(crate) use measure::spin_until;
pub use report::{format, BenchError, BenchReport, BenchRow, Which};
pub(crate) use stats::median;
pub use stats::{raw_cache_line_one_way_ns, raw_memcpy_mb_s};

use measure::*;
use stats::pct;

/// Run the benchmarks; node 0 returns the rows, others return none. One
/// that needs two nodes, asked for by name on a cluster of one, is an error
/// that says so; `all` leaves those out and says which.
pub fn run(mc: &MemoryChannel, which: Which, iters: u32) -> Result<BenchReport, BenchError> {
    let me = mc.node_id().0;
    let nodes = mc.nodes();
    if nodes < 2 && which.needs_two_nodes() {
        return Err(BenchError::NeedsNodes { which, nodes });
    }
    let mut rows = Vec::new();
    let mut barrier = Barrier::new(mc, KEY_BARRIER)?;
    let mut sync = || barrier.wait(T);
    let want = |w: Which| which == Which::All || which == w;
    let skipped = if nodes < 2 && which == Which::All {
        // `all` does not include csm.
        vec![Which::Latency, Which::Bandwidth, Which::Broadcast]
    } else {
        Vec::new()
    };

    if want(Which::Loopback) {
        sync()?;
        if me == 0 {
            rows.extend(loopback_latency(mc, iters)?);
        }
        sync()?;
    }
    if want(Which::Post) {
        sync()?;
        if me == 0 {
            rows.push(posted_store_cost(mc, iters)?);
        }
        sync()?;
    }

    if want(Which::Latency) && nodes >= 2 {
        let id = mc.region_alloc(KEY_PING, 64, true)?;
        let tx = mc.attach_transmit(id, Sharing::Shared, false)?;
        let rx = mc.attach_receive(id, Sharing::Shared, false)?;
        sync()?;
        let mut samples = Vec::new();
        let warm = iters / 10;
        for i in 1..=u64::from(iters + warm) {
            match me {
                0 => {
                    let t0 = Instant::now();
                    tx.write_u64(0, i)?;
                    spin_until(|| rx.load_u64(8).map(|v| v == i).unwrap_or(false));
                    if i > u64::from(warm) {
                        samples.push(t0.elapsed().as_nanos() as f64 / 2.0);
                    }
                }
                1 => {
                    spin_until(|| rx.load_u64(0).map(|v| v == i).unwrap_or(false));
                    tx.write_u64(8, i)?;
                }
                _ => break,
            }
        }
        sync()?;
        if me == 0 {
            let raw = raw_cache_line_one_way_ns(iters.max(1000));
            let p99 = pct(&mut samples.clone(), 0.99);
            rows.push(BenchRow {
                name: "one-way latency, 8-byte write (median)".into(),
                value: median(&mut samples) / 1e3,
                unit: "us",
                hardware: Some(2.9),
                raw: Some(raw / 1e3),
                lower_is_better: true,
            });
            rows.push(BenchRow {
                name: "one-way latency, 8-byte write (p99)".into(),
                value: p99 / 1e3,
                unit: "us",
                hardware: Some(3.3),
                raw: None,
                lower_is_better: true,
            });
        }
    }

    if want(Which::Bandwidth) && nodes >= 2 {
        rows.extend(stream(mc, &mut sync, KEY_STREAM, false)?);
    }
    if want(Which::Broadcast) && nodes >= 2 {
        rows.extend(stream(mc, &mut sync, KEY_BCAST, true)?);
    }

    if want(Which::Lock) {
        let locks = mc.lock_alloc(KEY_LOCK, 1, false, false)?;
        sync()?;
        if me == 0 {
            let mut s = Vec::new();
            for _ in 0..iters.min(2000) {
                let t0 = Instant::now();
                locks.acquire(0)?;
                s.push(t0.elapsed().as_nanos() as f64);
                locks.release(0)?;
            }
            rows.push(BenchRow {
                name: "lock acquire, uncontended".into(),
                value: median(&mut s) / 1e3,
                unit: "us",
                hardware: None,
                raw: None,
                lower_is_better: true,
            });
        }
        sync()?;
        let n = iters.min(500);
        let t0 = Instant::now();
        for _ in 0..n {
            locks.acquire(0)?;
            locks.release(0)?;
        }
        let per = t0.elapsed().as_nanos() as f64 / f64::from(n);
        sync()?;
        if me == 0 {
            rows.push(BenchRow {
                name: format!("lock acquire+release, {nodes} nodes contending"),
                value: per / 1e3,
                unit: "us",
                hardware: None,
                raw: None,
                lower_is_better: true,
            });
        }
    }

    if want(Which::Errcheck) {
        sync()?;
        if me == 0 {
            let n = 100_000u32;
            let t0 = Instant::now();
            let mut x = 0;
            for _ in 0..n {
                x ^= mc.error_count();
            }
            std::hint::black_box(x);
            let rd = t0.elapsed().as_nanos() as f64 / f64::from(n);
            let mut s = Vec::new();
            for _ in 0..iters.min(2000) {
                let t0 = Instant::now();
                mc.check_errors()?;
                s.push(t0.elapsed().as_nanos() as f64);
            }
            rows.push(BenchRow {
                name: "error count read (imc_rderrcnt)".into(),
                value: rd / 1e3,
                unit: "us",
                hardware: None,
                raw: None,
                lower_is_better: true,
            });
            rows.push(BenchRow {
                name: "error check via ACK page (imc_ckerrcnt)".into(),
                value: median(&mut s) / 1e3,
                unit: "us",
                hardware: Some(5.0),
                raw: None,
                lower_is_better: true,
            });
        }
        sync()?;
    }
    Ok(BenchReport {
        rows,
        skipped,
        nodes,
    })
}
