//! `mc-guest bench`: Memory Channel operations measured through the API, each
//! printed next to the real hardware's figure from the seeds and next to the raw
//! limit of this machine measured in the same run.
//!
//! Seed figures: MC2 one-way latency 2.9 us (seed 004 Table 2) to 3.3 us (seed
//! 000 s.3.1), bandwidth 64 MB/s (seed 004 Table 2) to 75 MB/s (seed 000 s.2.2);
//! imc_ckerrcnt under 5 us (seed 004, Error Management).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cashmere::CsmError;
use mc_api::{Barrier, McError, MemoryChannel, Sharing};

const T: Duration = Duration::from_secs(120);
const KEY_BARRIER: u32 = 0xbe4c_0001;
const KEY_PING: u32 = 0xbe4c_0002;
const KEY_STREAM: u32 = 0xbe4c_0003;
const KEY_DONE: u32 = 0xbe4c_0004;
const KEY_LOCK: u32 = 0xbe4c_0005;
const KEY_BCAST: u32 = 0xbe4c_0006;
const KEY_LOOP: u32 = 0xbe4c_0007;
const KEY_POST: u32 = 0xbe4c_0008;

/// Which benchmarks to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    All,
    /// One node: a store with loopback until it comes back (the hub and one
    /// guest thread: fits two cores).
    Loopback,
    /// The sender's cost of one posted 8-byte store.
    Post,
    Latency,
    Bandwidth,
    Broadcast,
    Lock,
    Errcheck,
    /// Cashmere's Table II operations (not part of `all`).
    Csm,
    /// UMP's Figures 8 and 9 (seed 004; not part of `all`): bench_ump.rs.
    Ump,
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Which::All => "all",
            Which::Loopback => "loopback",
            Which::Post => "post",
            Which::Latency => "latency",
            Which::Bandwidth => "bandwidth",
            Which::Broadcast => "broadcast",
            Which::Lock => "lock",
            Which::Errcheck => "errcheck",
            Which::Csm => "csm",
            Which::Ump => "ump",
        })
    }
}

impl Which {
    /// Whether the benchmark measures between two nodes (a sender and a
    /// receiver, or a requester and a home), so a cluster of one cannot run it.
    pub fn needs_two_nodes(self) -> bool {
        matches!(
            self,
            Which::Latency | Which::Bandwidth | Which::Broadcast | Which::Csm
        )
    }
}

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Api(#[from] McError),
    #[error(transparent)]
    Csm(#[from] CsmError),
    /// The benchmark measures between two nodes and the cluster has fewer.
    #[error("bench {which} needs a second node to measure against, and this cluster has {nodes}: start it with --nodes 2 or more (e.g. mc-host run --nodes 2 -- mc-guest bench {which})")]
    NeedsNodes { which: Which, nodes: u32 },
}

/// What node 0 prints: the measured rows, and the benchmarks `all` left out
/// because the cluster is too small for them.
#[derive(Clone, Debug, Default)]
pub struct BenchReport {
    pub rows: Vec<BenchRow>,
    pub skipped: Vec<Which>,
    pub nodes: u32,
}

/// One printed row.
#[derive(Clone, Debug)]
pub struct BenchRow {
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
    /// The real hardware's figure, if the seeds give one.
    pub hardware: Option<f64>,
    /// This machine's raw limit for the same thing, measured now.
    pub raw: Option<f64>,
    /// Lower is better (times) or higher is better (bandwidths).
    pub lower_is_better: bool,
}

/// The median of `v` (sorted in place); NaN when nothing was measured.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[((v.len() - 1) as f64 * p) as usize]
}

/// Raw limit: a value passed between two threads through one cache line.
pub fn raw_cache_line_one_way_ns(iters: u32) -> f64 {
    #[repr(align(64))]
    struct CacheLine(AtomicU64);
    let a = Arc::new((CacheLine(AtomicU64::new(0)), CacheLine(AtomicU64::new(0))));
    let b = a.clone();
    let t = std::thread::spawn(move || {
        for i in 1..=u64::from(iters) {
            while b.0 .0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            b.1 .0.store(i, Ordering::Release);
        }
    });
    let mut samples = Vec::with_capacity(iters as usize);
    for i in 1..=u64::from(iters) {
        let t0 = Instant::now();
        a.0 .0.store(i, Ordering::Release);
        while a.1 .0.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        samples.push(t0.elapsed().as_nanos() as f64 / 2.0);
    }
    let _ = t.join();
    median(&mut samples)
}

/// Raw limit: memcpy bandwidth in MB/s for `size`-byte copies.
pub fn raw_memcpy_mb_s(size: usize) -> f64 {
    let src = vec![7u8; 8 << 20];
    let mut dst = vec![0u8; 8 << 20];
    let mut samples = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        let mut off = 0;
        let mut bytes = 0usize;
        while bytes < 64 << 20 {
            dst[off..off + size].copy_from_slice(&src[off..off + size]);
            bytes += size;
            off = (off + size) % (src.len() - size + 1);
        }
        std::hint::black_box(&dst);
        samples.push(bytes as f64 / t0.elapsed().as_secs_f64() / 1e6);
    }
    median(&mut samples)
}

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

fn spin_until(mut f: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !f() {
        spins = spins.saturating_add(1);
        if spins > 50 {
            // More busy threads than cores (hub, sender, receiver on two cores
            // here): after a short spin, let the hub and the peer run.
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Node 0 streams writes of several sizes; node 1 (or everyone, for
/// broadcast) receives; throughput is measured until the last receiver has seen
/// the end marker.
fn stream(
    mc: &MemoryChannel,
    sync: &mut dyn FnMut() -> Result<(), McError>,
    key: u32,
    broadcast: bool,
) -> Result<Vec<BenchRow>, McError> {
    const REGION: usize = 1 << 20;
    let me = mc.node_id().0;
    let nodes = mc.nodes();
    let receives = if broadcast { me != 0 } else { me == 1 };
    let id = mc.region_alloc(key, REGION as u64 + 4096, false)?;
    let done_id = mc.region_alloc(KEY_DONE, 8 * 64, true)?;
    let done_tx = mc.attach_transmit(done_id, Sharing::Shared, false)?;
    let done_rx = mc.attach_receive(done_id, Sharing::Shared, false)?;
    let rx = if receives {
        Some(mc.attach_receive(id, Sharing::Shared, false)?)
    } else {
        None
    };
    let tx = if me == 0 {
        Some(mc.attach_transmit(id, Sharing::Shared, false)?)
    } else {
        None
    };
    sync()?;
    // The done words outlive this call (the bandwidth and the broadcast runs
    // share them, and a cluster may run the bench again): markers start above
    // every value already there, so an old one is never taken for the end of
    // this run. Each receiver's last one came before its arrival at `sync`.
    let members = mc.registers().members;
    let old = (1..nodes)
        .filter(|n| members & (1 << n) != 0)
        .map(|n| done_rx.load_u64(8 * n as usize))
        .collect::<Result<Vec<_>, _>>()?;
    let base = (old.into_iter().max().unwrap_or(0) | 0xff) + 1;
    let mut rows = Vec::new();
    let receivers = if broadcast { nodes - 1 } else { 1 };
    for (round, size) in [32usize, 256, 4096, 65536].into_iter().enumerate() {
        let total: usize = if size < 256 { 4 << 20 } else { 32 << 20 };
        let marker = base + (round + 1) as u64;
        let t0 = Instant::now();
        if let Some(tx) = &tx {
            let data = vec![0x5au8; size];
            let batch = (REGION / size).clamp(1, 64);
            let mut off = 0usize;
            let mut sent = 0usize;
            while sent < total {
                let writes: Vec<(usize, &[u8])> = (0..batch)
                    .map(|k| ((off + k * size) % REGION, &data[..]))
                    .collect();
                tx.write_many(&writes)?;
                off = (off + batch * size) % REGION;
                sent += batch * size;
            }
            // The end marker, after every data packet in the total order.
            tx.write_u64(REGION, marker)?;
        }
        if let Some(rx) = &rx {
            // Attached in this call, so the word held nothing older; only
            // node 0 knows `base`: the low byte says which round it ended.
            let mut seen = 0;
            spin_until(|| {
                seen = rx.load_u64(REGION).unwrap_or(0);
                seen & 0xff > round as u64
            });
            // Seen on this node: everything before the marker is here too
            // (one source, in order), and the echo comes after it.
            done_tx.write_u64(8 * me as usize, seen)?;
        }
        if me == 0 {
            spin_until(|| {
                (1..nodes)
                    .filter(|n| members & (1 << n) != 0 && (broadcast || *n == 1))
                    .all(|n| {
                        done_rx
                            .load_u64(8 * n as usize)
                            .map(|v| v >= marker)
                            .unwrap_or(false)
                    })
            });
            let secs = t0.elapsed().as_secs_f64();
            let mb_s = total as f64 * f64::from(receivers) / secs / 1e6;
            let raw = raw_memcpy_mb_s(size);
            if broadcast && receivers > 1 {
                rows.push(BenchRow {
                    name: format!("broadcast, {size} B writes, per receiver (of {receivers})"),
                    value: mb_s / f64::from(receivers),
                    unit: "MB/s",
                    hardware: Some(75.0),
                    raw: Some(raw),
                    lower_is_better: false,
                });
            }
            rows.push(BenchRow {
                name: if broadcast {
                    format!("broadcast to {receivers} nodes, {size} B writes (delivered, total)")
                } else {
                    format!("streaming, {size} B writes")
                },
                value: mb_s,
                unit: "MB/s",
                hardware: Some(if broadcast {
                    75.0 * f64::from(receivers)
                } else {
                    75.0
                }),
                raw: Some(raw),
                lower_is_better: false,
            });
        }
        sync()?;
    }
    Ok(rows)
}

/// One node: an 8-byte store to a page it transmits with loopback and
/// receives, timed until its own copy shows it. The guest thread and the hub
/// thread are all that run: the configuration that fits two cores.
fn loopback_latency(mc: &MemoryChannel, iters: u32) -> Result<Vec<BenchRow>, McError> {
    let id = mc.region_alloc(KEY_LOOP, 8192, false)?;
    let rx = mc.attach_receive(id, Sharing::Shared, false)?;
    let tx = mc.attach_transmit(id, Sharing::Shared, true)?;
    let warm = iters / 10;
    let mut samples = Vec::with_capacity(iters as usize);
    for i in 1..=u64::from(iters + warm) {
        let t0 = Instant::now();
        tx.write_u64(0, i)?;
        spin_until(|| rx.load_u64(0).map(|v| v == i).unwrap_or(false));
        if i > u64::from(warm) {
            samples.push(t0.elapsed().as_nanos() as f64);
        }
    }
    let raw = raw_cache_line_one_way_ns(iters.max(1000));
    let p99 = pct(&mut samples.clone(), 0.99);
    Ok(vec![
        BenchRow {
            name: "loopback latency, 8-byte write, 1 node (median)".into(),
            value: median(&mut samples) / 1e3,
            unit: "us",
            hardware: Some(2.9),
            raw: Some(2.0 * raw / 1e3),
            lower_is_better: true,
        },
        BenchRow {
            name: "loopback latency, 8-byte write, 1 node (p99)".into(),
            value: p99 / 1e3,
            unit: "us",
            hardware: Some(3.3),
            raw: None,
            lower_is_better: true,
        },
    ])
}

/// What one posted 8-byte store costs the thread that makes it, in the
/// steady state: batches of stores into an empty-enough FIFO, each batch
/// timed as a whole (a clock read per store would cost as much as the
/// store), then flushed untimed.
fn posted_store_cost(mc: &MemoryChannel, iters: u32) -> Result<BenchRow, McError> {
    const BATCH: u32 = 256;
    let id = mc.region_alloc(KEY_POST, 8192, false)?;
    let tx = mc.attach_transmit(id, Sharing::Shared, false)?;
    let rounds = (iters / 10).max(20);
    let mut per_store = Vec::with_capacity(rounds as usize);
    for round in 0..rounds + 2 {
        let t0 = Instant::now();
        for k in 0..BATCH {
            tx.write_u64(8 * (k as usize % 1024), u64::from(k))?;
        }
        let ns = t0.elapsed().as_nanos() as f64 / f64::from(BATCH);
        mc.flush()?;
        if round >= 2 {
            per_store.push(ns);
        }
    }
    // The raw limit: the same 8-byte write to ordinary memory.
    let word = AtomicU64::new(0);
    let t0 = Instant::now();
    for k in 0..u64::from(BATCH * rounds) {
        word.store(std::hint::black_box(k), Ordering::Relaxed);
    }
    let raw = t0.elapsed().as_nanos() as f64 / f64::from(BATCH * rounds);
    Ok(BenchRow {
        name: "posted store, 8 bytes, sender's cost (median)".into(),
        value: median(&mut per_store),
        unit: "ns",
        hardware: None,
        raw: Some(raw),
        lower_is_better: true,
    })
}

/// The table node 0 prints.
pub fn format(report: &BenchReport) -> String {
    let rows = &report.rows;
    let mut s = format!(
        "{:<52} {:>12} {:>10} {:>9} {:>12} {:>9}\n",
        "operation", "measured", "MC2 (seed)", "vs MC2", "raw limit", "vs raw"
    );
    for r in rows {
        let fmt = |v: f64| {
            if v >= 100.0 {
                format!("{v:.0}")
            } else if v >= 1.0 {
                format!("{v:.2}")
            } else {
                format!("{v:.3}")
            }
        };
        let ratio = |other: Option<f64>| match other {
            Some(o) if o > 0.0 && r.value > 0.0 => {
                let x = if r.lower_is_better {
                    o / r.value
                } else {
                    r.value / o
                };
                format!("{x:.2}x")
            }
            _ => "-".into(),
        };
        s += &format!(
            "{:<52} {:>7} {:<4} {:>10} {:>9} {:>12} {:>9}\n",
            r.name,
            fmt(r.value),
            r.unit,
            r.hardware.map_or("-".into(), fmt),
            ratio(r.hardware),
            r.raw
                .map_or("-".into(), |v| format!("{} {}", fmt(v), r.unit)),
            ratio(r.raw),
        );
    }
    s += "ratios: above 1x means faster than the reference (vs MC2: than the real hardware; vs raw: than this machine's limit).\n";
    if !report.skipped.is_empty() {
        let names: Vec<String> = report.skipped.iter().map(Which::to_string).collect();
        s += &format!(
            "not measured: {}: they need a second node, and this cluster has {}; start it with --nodes 2 or more.\n",
            names.join(", "),
            report.nodes
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> BenchRow {
        BenchRow {
            name: "lock acquire, uncontended".into(),
            value: 1.5,
            unit: "us",
            hardware: None,
            raw: None,
            lower_is_better: true,
        }
    }

    #[test]
    fn a_cluster_of_one_is_told_what_was_not_measured() {
        let report = BenchReport {
            rows: vec![row()],
            skipped: vec![Which::Latency, Which::Bandwidth, Which::Broadcast],
            nodes: 1,
        };
        let s = format(&report);
        assert!(s.contains("lock acquire, uncontended"), "{s}");
        assert!(
            s.contains("not measured: latency, bandwidth, broadcast: they need a second node, and this cluster has 1; start it with --nodes 2"),
            "{s}"
        );
        let full = BenchReport {
            skipped: Vec::new(),
            nodes: 2,
            ..report
        };
        assert!(!format(&full).contains("not measured"));
    }

    #[test]
    fn what_needs_two_nodes_says_so_by_name() {
        for w in [
            Which::Latency,
            Which::Bandwidth,
            Which::Broadcast,
            Which::Csm,
        ] {
            assert!(w.needs_two_nodes());
            let e = BenchError::NeedsNodes { which: w, nodes: 1 };
            let s = e.to_string();
            assert!(
                s.starts_with(&format!("bench {w} needs a second node")),
                "{s}"
            );
            assert!(s.contains("--nodes 2"), "{s}");
        }
        for w in [Which::All, Which::Lock, Which::Errcheck] {
            assert!(!w.needs_two_nodes());
        }
    }
}
