//! The measurements that need more than a loop around one API call: a
//! stream of writes to one or every node, a store's loopback round trip,
//! and the cost of posting one store; and the keys and timeout every
//! benchmark uses.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mc_api::{McError, MemoryChannel, Sharing};

use super::report::BenchRow;
use super::stats::{median, pct, raw_cache_line_one_way_ns, raw_memcpy_mb_s};

pub(super) const T: Duration = Duration::from_secs(120);
pub(super) const KEY_BARRIER: u32 = 0xbe4c_0001;
pub(super) const KEY_PING: u32 = 0xbe4c_0002;
pub(super) const KEY_STREAM: u32 = 0xbe4c_0003;
pub(super) const KEY_DONE: u32 = 0xbe4c_0004;
pub(super) const KEY_LOCK: u32 = 0xbe4c_0005;
pub(super) const KEY_BCAST: u32 = 0xbe4c_0006;
pub(super) const KEY_LOOP: u32 = 0xbe4c_0007;
pub(super) const KEY_POST: u32 = 0xbe4c_0008;

/// Wait until `f` holds: spin briefly, then yield (what every benchmark's
/// waits do, so that their figures compare).
pub(crate) fn spin_until(mut f: impl FnMut() -> bool) {
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
pub(super) fn stream(
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
pub(super) fn loopback_latency(mc: &MemoryChannel, iters: u32) -> Result<Vec<BenchRow>, McError> {
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
pub(super) fn posted_store_cost(mc: &MemoryChannel, iters: u32) -> Result<BenchRow, McError> {
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
