//! `mc-guest bench hlrc`: seed 001's Table 4 (the software DSM's own
//! operations, measured on two nodes) for HLRC on this emulation, beside
//! the paper's figures. Run it on the virtual clock with seed 001's
//! network for the comparison the table makes:
//!
//! ```sh
//! mc-host run --nodes 2 --clock virtual --link clan -- mc-guest bench hlrc
//! ```
//!
//! Node 1 is the home of the page and the last holder of the lock; node 0
//! measures. Each operation is timed on node 0's clock: wall-clock, and the
//! virtual clock's advance when the run has one (its CPU time at the
//! run's scale and the modelled network; the communication thread's work
//! at the home is not on the clock, docs/hlrc.md).

use std::time::Instant;

use dsm_core::{Dsm, DsmError, SharedArray};
use dsm_select::ProtocolName;
use mc_api::{vclock, MemoryChannel};

use crate::bench::{BenchError, Which};

/// One operation: the paper's figure and the ones measured here.
#[derive(Clone, Debug)]
pub struct HlrcBenchRow {
    pub operation: &'static str,
    /// Seed 001 Table 4, microseconds.
    pub paper: f64,
    /// Wall-clock median here, microseconds.
    pub here: f64,
    /// Virtual-clock median, microseconds, when the run has one.
    pub predicted: Option<f64>,
}

impl HlrcBenchRow {
    fn new(operation: &'static str, paper: f64, (here, predicted): (f64, Option<f64>)) -> Self {
        HlrcBenchRow {
            operation,
            paper,
            here,
            predicted,
        }
    }
}

/// A sample's wall-clock and virtual microseconds.
struct Samples {
    wall: Vec<f64>,
    virt: Vec<f64>,
}

impl Samples {
    fn new() -> Samples {
        Samples {
            wall: Vec::new(),
            virt: Vec::new(),
        }
    }

    /// Time `f` once.
    fn time(&mut self, f: impl FnOnce() -> Result<(), DsmError>) -> Result<(), DsmError> {
        let vt = vclock::tick();
        let t = Instant::now();
        f()?;
        self.wall.push(t.elapsed().as_secs_f64() * 1e6);
        if vclock::enabled() {
            #[allow(
                clippy::cast_precision_loss,
                reason = "a clock difference far below 2^52 ns"
            )]
            self.virt
                .push(vclock::tick().saturating_sub(vt) as f64 / 1e3);
        }
        Ok(())
    }

    fn medians(mut self) -> (f64, Option<f64>) {
        let wall = crate::bench::median(&mut self.wall);
        let virt = (!self.virt.is_empty()).then(|| crate::bench::median(&mut self.virt));
        (wall, virt)
    }
}

/// Every node runs this (two or more); node 0 returns the rows.
pub fn run(mc: &MemoryChannel, iters: u32) -> Result<Vec<HlrcBenchRow>, BenchError> {
    if mc.nodes() < 2 {
        return Err(BenchError::NeedsNodes {
            which: Which::Hlrc,
            nodes: mc.nodes(),
        });
    }
    let cfg = cashmere::Config {
        heap_bytes: 4 * 4096,
        page_size: 4096,
        threads: 1,
        ..cashmere::Config::default()
    };
    let dsm = ProtocolName::Hlrc.start(mc, &cfg)?;
    let rows = measure(&dsm, iters)?;
    dsm.finish()?;
    Ok(rows)
}

fn measure(dsm: &Dsm, iters: u32) -> Result<Vec<HlrcBenchRow>, BenchError> {
    let me = dsm.node_id();
    // One 4 KiB page (seed 001's page size): node 1 writes it first, so
    // it is the page's home.
    let page: SharedArray<u32> = dsm.alloc(1024, true)?;
    let words = |n: usize, v: u32| {
        for i in 0..n {
            page.set(
                i,
                v.wrapping_add(u32::try_from(i).expect("a word index fits u32")),
            );
        }
    };
    if me == 1 {
        words(1024, 1);
    }
    dsm.barrier()?;
    let n = iters.clamp(1, 200);
    let mut local = Samples::new();
    let mut remote = Samples::new();
    let mut release = Samples::new();
    let mut fetch = Samples::new();
    let mut diff = Samples::new();
    let mut barrier = Samples::new();
    for round in 0..n {
        // Lock 1 was last held by node 1: node 0's acquire is remote (a
        // request to the manager, node 1, and the grant from the holder).
        if me == 1 {
            dsm.lock_acquire(1)?;
            dsm.lock_release(1)?;
        }
        dsm.barrier()?;
        if me == 0 {
            remote.time(|| dsm.lock_acquire(1))?;
            release.time(|| dsm.lock_release(1))?;
            // Now node 0 keeps it: the next acquire is local.
            local.time(|| dsm.lock_acquire(1))?;
            dsm.lock_release(1)?;
        }
        // Node 1 (the home) changes the page: after the barrier node 0's
        // copy is invalid and its first read fetches the page.
        if me == 1 {
            words(16, round);
        }
        dsm.barrier()?;
        if me == 0 {
            fetch.time(|| {
                let _ = page.get(0);
                Ok(())
            })?;
            // A write twins the page; the release diffs the whole page
            // and sends the diff to the home.
            words(1024, round.wrapping_mul(7));
            diff.time(|| {
                dsm.lock_acquire(2)?;
                dsm.lock_release(2)
            })?;
        }
        barrier.time(|| dsm.barrier())?;
    }
    if me != 0 {
        return Ok(Vec::new());
    }
    Ok(vec![
        HlrcBenchRow::new("acquire, local", 1.0, local.medians()),
        HlrcBenchRow::new("acquire, remote", 34.0, remote.medians()),
        HlrcBenchRow::new("release", 1.0, release.medians()),
        HlrcBenchRow::new("page fetch (4 KiB)", 89.0, fetch.medians()),
        HlrcBenchRow::new("diff computation (4 KiB, +send)", 24.0, diff.medians()),
        HlrcBenchRow::new("barrier (2 nodes)", 17.0, barrier.medians()),
    ])
}

pub fn format(rows: &[HlrcBenchRow], nodes: u32) -> String {
    let virt = rows.iter().any(|r| r.predicted.is_some());
    let mut s = format!(
        "HLRC, Table 4 operations (seed 001 s.5.2: 2 nodes, cLAN VIA, 300 MHz Pentium II; here: {nodes} virtual nodes)\n{:<34} {:>11} {:>12} {:>15} {:>8}\n",
        "operation", "paper (us)", "wall (us)", "predicted (us)", "ratio"
    );
    for r in rows {
        let predicted = r.predicted.map_or("-".to_string(), |p| format!("{p:.1}"));
        s += &format!(
            "{:<34} {:>11} {:>12.1} {:>15} {:>8.2}\n",
            r.operation,
            r.paper,
            r.here,
            predicted,
            r.predicted.unwrap_or(r.here) / r.paper
        );
    }
    s += "diff application (paper 22 us) is the home's communication thread's work: not measured here\n";
    s += if virt {
        "ratio: predicted / paper (for seed 001's network: mc-host run --clock virtual --link clan)\n"
    } else {
        "ratio: wall-clock / paper; `mc-host run --clock virtual --link clan` adds predicted times\n"
    };
    s
}
