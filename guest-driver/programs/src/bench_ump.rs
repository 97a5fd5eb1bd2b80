//! `mc-guest bench ump`: seed 004's Figures 8 and 9 on the emulator:
//! UMP's message transfer time and bandwidth against message size (8 B to
//! 1 MiB), with blocking and non-blocking writes, over Memory Channel
//! (node 0 to node 1) and over shared memory (two tasks of node 0), next to
//! the seed's figures (MC 5.8 us and 61 MB/s, shared memory 2 us and 75
//! MB/s, with 32 KB and 256 KB rings) and this machine's raw limits
//! measured in the same run: the adapter's own one-way latency (an 8-byte
//! store ping-pong), its 64 KiB streaming bandwidth (stores without flow
//! control) and memcpy of 64 KiB. Medians throughout.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mc_api::{Barrier, McError, MemoryChannel, NodeId, Sharing};
use serde::Serialize;
use ump::{ChannelId, Config, Node, Transport, Ump, UmpError};

// Waits, medians and the raw memcpy limit as `mc-guest bench latency`
// has them, so the figures compare.
use crate::bench::{median, raw_memcpy_mb_s, spin_until};

const T: Duration = Duration::from_secs(120);
const KEY_BARRIER: u32 = 0x554d_b001;
const KEY_PING: u32 = 0x554d_b002;
const KEY_STREAM: u32 = 0x554d_b004;
const SIZES: &[usize] = &[8, 64, 512, 4096, 32 << 10, 64 << 10, 256 << 10, 1 << 20];
const STREAM_REGION: usize = 1 << 20;

/// Why the UMP benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchUmpError {
    #[error(transparent)]
    Api(#[from] McError),
    #[error(transparent)]
    Ump(#[from] UmpError),
    #[error("bench ump needs two nodes (mc-host run --nodes 2 -- mc-guest bench ump); this cluster has {0}")]
    NeedsNodes(u32),
    #[error("writing {path}")]
    Json {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// One measured point of Figures 8 and 9.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub transport: &'static str,
    pub mode: &'static str,
    pub size: usize,
    /// One-way transfer time of one message (half a round trip), median.
    pub one_way_us: f64,
    /// Streaming bandwidth, MB/s (10^6 bytes).
    pub mb_s: f64,
}

/// This machine's raw limits, measured in the same run.
#[derive(Clone, Debug, Serialize)]
pub struct Raw {
    pub adapter_one_way_us: f64,
    pub adapter_stream_64k_mb_s: f64,
    pub memcpy_64k_mb_s: f64,
}

/// The whole report (what `--json` writes).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub nodes: u32,
    pub ring_bytes: usize,
    pub shm_ring_bytes: usize,
    pub raw: Raw,
    pub points: Vec<Point>,
    /// Multicast from node 0 to one channel on each of up to 3 other nodes
    /// (run with 3 or more nodes), one copy (outbuf) against one per channel.
    pub mcast: Vec<McastPoint>,
    pub seed: Seed,
}

/// One multicast point: a stream of `ump_mcast`s of `size` bytes to
/// `readers` nodes, until every reader has read them all.
#[derive(Clone, Debug, Serialize)]
pub struct McastPoint {
    pub size: usize,
    pub readers: u8,
    /// Through node 0's outbuf (one copy) or one copy per channel.
    pub outbuf: bool,
    pub us_per_mcast: f64,
}

/// Multicast sizes: the outbuf's range (`ump::OUTBUF_MIN_PAYLOAD` to
/// `ump::OUTBUF_MAX_PAYLOAD`).
const MCAST_SIZES: &[usize] = &[1024, 4096];
const KEY_MCAST: u64 = 0xd0;

/// Multicasts per point.
fn mcasts(size: usize, iters: u32) -> usize {
    ((8usize << 20) / size).min(iters as usize * 4).max(20)
}

/// The multicast points: node 0 writes, nodes 1..=readers read, each
/// answering once it has read a point's messages.
fn measure_mcast(
    node: &Arc<Node>,
    me: u8,
    readers: u8,
    iters: u32,
) -> Result<Vec<McastPoint>, BenchUmpError> {
    let u = Ump::init(node);
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 << 10];
    if me == 0 {
        let chans = (1..=readers)
            .map(|n| {
                let n = u64::from(n);
                u.open(KEY_MCAST, KEY_MCAST + n, Transport::MemoryChannel)
            })
            .collect::<Result<Vec<_>, _>>()?;
        for &size in MCAST_SIZES {
            let data = vec![0x5au8; size];
            for outbuf in [false, true] {
                node.set_outbuf(outbuf);
                let n = mcasts(size, iters);
                let t0 = Instant::now();
                for _ in 0..n {
                    u.mcast(&chans, &data)?;
                }
                for &ch in &chans {
                    u.read(ch, &mut buf)?;
                }
                out.push(McastPoint {
                    size,
                    readers,
                    outbuf,
                    us_per_mcast: t0.elapsed().as_secs_f64() * 1e6 / n as f64,
                });
            }
        }
        node.set_outbuf(node.config().outbuf);
    } else {
        let ch = u.open(
            KEY_MCAST + u64::from(me),
            KEY_MCAST,
            Transport::MemoryChannel,
        )?;
        for &size in MCAST_SIZES {
            for _ in 0..2 {
                for _ in 0..mcasts(size, iters) {
                    u.read(ch, &mut buf)?;
                }
                u.write(ch, &[0u8; 8])?;
            }
        }
    }
    u.exit()?;
    Ok(out)
}

/// Seed 004's figures (AlphaServer 4100 5/300, MEMORY CHANNEL 1.5).
#[derive(Clone, Debug, Serialize)]
pub struct Seed {
    pub mc_latency_us: f64,
    pub mc_peak_mb_s: f64,
    pub shm_latency_us: f64,
    pub shm_peak_mb_s: f64,
}

const SEED: Seed = Seed {
    mc_latency_us: 5.8,
    mc_peak_mb_s: 61.0,
    shm_latency_us: 2.0,
    shm_peak_mb_s: 75.0,
};

/// Round trips for a message of `size` bytes.
fn rounds(size: usize, iters: u32) -> u32 {
    let by_bytes = (16usize << 20) / size.max(1);
    // At most `iters`, so it fits.
    u32::try_from(by_bytes)
        .map_or(iters, |b| iters.min(b))
        .max(10)
}

/// Bytes streamed for a bandwidth point.
fn stream_bytes(size: usize) -> usize {
    if size < 4096 {
        size * 4000
    } else {
        (16 << 20).max(8 * size)
    }
}

/// Run the benchmark (nodes 0 and 1 measure; others wait). Node 0 returns
/// the report.
pub fn run(
    mc: &MemoryChannel,
    iters: u32,
    json: Option<&Path>,
) -> Result<Option<Report>, BenchUmpError> {
    if mc.nodes() < 2 {
        return Err(BenchUmpError::NeedsNodes(mc.nodes()));
    }
    let me = mc.node_id().0;
    let mut barrier = Barrier::new(mc, KEY_BARRIER)?;
    // Rings that hold a 64 KiB message twice over, so streaming keeps the
    // adapter busy while consumer indexes travel back (the seed measured
    // with 32 KB Memory Channel rings and 256 KB shared-memory ones).
    let config = Config {
        ring_bytes: 256 << 10,
        fragment_bytes: 32 << 10,
        region_bytes: 4 << 20,
        // The rest (spins, checks) as MC_UMP_* say.
        ..Config::from_env()
    };
    let node = Node::open(mc, config.clone())?;
    barrier.wait(T)?;
    let adapter_one_way_us = adapter_latency(mc, iters, &mut barrier)?;
    let adapter_stream = adapter_stream(mc, &mut barrier)?;
    let mut points = Vec::new();
    // Memory Channel: node 0 and node 1, one task each.
    if me <= 1 {
        let u = Ump::init(&node);
        let ch = u.open(
            0xb0 + u64::from(me),
            0xb1 - u64::from(me),
            Transport::MemoryChannel,
        )?;
        for &size in SIZES {
            for nb in [false, true] {
                let p = measure(&u, ch, me == 0, size, iters, nb)?;
                if let Some(p) = p {
                    points.push(Point {
                        transport: "memory-channel",
                        ..p
                    });
                }
            }
        }
        u.exit()?;
    }
    barrier.wait(T)?;
    // Shared memory: two tasks (threads) of node 0.
    if me == 0 {
        let other = {
            let node = node.clone();
            std::thread::spawn(move || -> Result<(), UmpError> {
                let u = Ump::init(&node);
                let ch = u.open(0xc1, 0xc0, Transport::SharedMemory)?;
                for &size in SIZES {
                    for nb in [false, true] {
                        measure(&u, ch, false, size, iters, nb)?;
                    }
                }
                u.exit()
            })
        };
        let u = Ump::init(&node);
        let ch = u.open(0xc0, 0xc1, Transport::SharedMemory)?;
        for &size in SIZES {
            for nb in [false, true] {
                if let Some(p) = measure(&u, ch, true, size, iters, nb)? {
                    points.push(Point {
                        transport: "shared-memory",
                        ..p
                    });
                }
            }
        }
        u.exit()?;
        other.join().expect("shared-memory task")?;
    }
    barrier.wait(T)?;
    let readers = mc.nodes().saturating_sub(1).min(3) as u8;
    let mut mcast = Vec::new();
    if readers >= 2 && me <= readers {
        mcast = measure_mcast(&node, me, readers, iters)?;
    }
    barrier.wait(T)?;
    if me != 0 {
        return Ok(None);
    }
    let report = Report {
        nodes: mc.nodes(),
        ring_bytes: config.ring_bytes,
        shm_ring_bytes: config.shm_ring_bytes,
        raw: Raw {
            adapter_one_way_us,
            adapter_stream_64k_mb_s: adapter_stream,
            memcpy_64k_mb_s: raw_memcpy_mb_s(64 << 10),
        },
        points,
        mcast,
        seed: SEED,
    };
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&report).expect("a report serialises");
        std::fs::write(path, text + "\n").map_err(|source| BenchUmpError::Json {
            path: path.display().to_string(),
            source,
        })?;
    }
    Ok(Some(report))
}

/// One size, one mode, on channel `ch`: the driver (`lead`) times round
/// trips and a stream; the other end echoes and drains.
fn measure(
    u: &Ump,
    ch: ChannelId,
    lead: bool,
    size: usize,
    iters: u32,
    nb: bool,
) -> Result<Option<Point>, UmpError> {
    let payload: Arc<Vec<u8>> = Arc::new(vec![0x5a; size]);
    let mut buf = vec![0u8; size];
    let n = rounds(size, iters);
    let warm = (n / 10).max(1);
    let send = |u: &Ump| -> Result<(), UmpError> {
        if nb {
            let w = u.nbwrite(ch, payload.clone())?;
            // The call returned at once; the background thread finishes.
            w.wait(T)?;
            Ok(())
        } else {
            u.write(ch, &payload)
        }
    };
    let mut samples = Vec::with_capacity(n as usize);
    for i in 0..n + warm {
        if lead {
            let t0 = Instant::now();
            send(u)?;
            u.read(ch, &mut buf)?;
            if i >= warm {
                samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
            }
        } else {
            u.read(ch, &mut buf)?;
            send(u)?;
        }
    }
    // Streaming: many messages one way, one short answer at the end.
    let count = (stream_bytes(size) / size).max(1);
    let t0 = Instant::now();
    if lead {
        if nb {
            let mut last = None;
            for _ in 0..count {
                last = Some(u.nbwrite(ch, payload.clone())?);
            }
            if let Some(w) = last {
                w.wait(T)?;
            }
        } else {
            for _ in 0..count {
                u.write(ch, &payload)?;
            }
        }
        u.read(ch, &mut buf)?;
    } else {
        for _ in 0..count {
            u.read(ch, &mut buf)?;
        }
        u.write(ch, b"done")?;
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok(lead.then(|| Point {
        transport: "",
        mode: if nb { "non-blocking" } else { "blocking" },
        size,
        one_way_us: median(&mut samples),
        mb_s: (count * size) as f64 / secs / 1e6,
    }))
}

/// The adapter's own one-way latency: an 8-byte store ping-pong between
/// nodes 0 and 1 through point-to-point regions (what UMP's channels use).
fn adapter_latency(mc: &MemoryChannel, iters: u32, b: &mut Barrier) -> Result<f64, McError> {
    let me = mc.node_id().0;
    let mut samples = Vec::new();
    if me <= 1 {
        let mine = mc.region_alloc(KEY_PING + u32::from(me), 8192, false)?;
        let rx = mc.attach_receive(mine, Sharing::Exclusive, false)?;
        b.wait(T)?;
        let theirs = mc.region_lookup(KEY_PING + u32::from(1 - me))?;
        let tx = mc.attach_transmit_to(theirs, Sharing::Shared, NodeId(1 - me))?;
        b.wait(T)?;
        let warm = iters / 10;
        for i in 1..=u64::from(iters + warm) {
            if me == 0 {
                let t0 = Instant::now();
                tx.write_u64(0, i)?;
                spin_until(|| rx.load_u64(0).is_ok_and(|v| v == i));
                if i > u64::from(warm) {
                    samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
                }
            } else {
                spin_until(|| rx.load_u64(0).is_ok_and(|v| v == i));
                tx.write_u64(0, i)?;
            }
        }
    } else {
        b.wait(T)?;
        b.wait(T)?;
    }
    b.wait(T)?;
    Ok(median(&mut samples))
}

/// The adapter's own streaming bandwidth with 64 KiB writes (no flow
/// control: the stores just go), node 0 to node 1, until node 1 has seen
/// the end marker and said so.
fn adapter_stream(mc: &MemoryChannel, b: &mut Barrier) -> Result<f64, McError> {
    let me = mc.node_id().0;
    let size = 64 << 10;
    let total = 32 << 20;
    let mut mb_s = f64::NAN;
    if me <= 1 {
        let data_id = mc.region_alloc(KEY_STREAM, (STREAM_REGION + 8192) as u64, false)?;
        let back_id = mc.region_alloc(KEY_STREAM + 1, 8192, false)?;
        let (rx, tx) = if me == 1 {
            (
                mc.attach_receive(data_id, Sharing::Exclusive, false)?,
                mc.attach_transmit_to(back_id, Sharing::Shared, NodeId(0))?,
            )
        } else {
            (
                mc.attach_receive(back_id, Sharing::Exclusive, false)?,
                mc.attach_transmit_to(data_id, Sharing::Shared, NodeId(1))?,
            )
        };
        b.wait(T)?;
        let marker = 0x5eed_0001u64;
        if me == 0 {
            let data = vec![0x33u8; size];
            let t0 = Instant::now();
            let mut off = 0;
            let mut sent = 0;
            while sent < total {
                tx.write(off, &data)?;
                off = (off + size) % STREAM_REGION;
                sent += size;
            }
            tx.write_u64(STREAM_REGION, marker)?;
            spin_until(|| rx.load_u64(0).is_ok_and(|v| v == marker));
            mb_s = total as f64 / t0.elapsed().as_secs_f64() / 1e6;
        } else {
            spin_until(|| rx.load_u64(STREAM_REGION).is_ok_and(|v| v == marker));
            tx.write_u64(0, marker)?;
        }
    } else {
        b.wait(T)?;
    }
    b.wait(T)?;
    Ok(mb_s)
}

fn point<'a>(r: &'a Report, transport: &str, mode: &str, size: usize) -> Option<&'a Point> {
    r.points
        .iter()
        .find(|p| p.transport == transport && p.mode == mode && p.size == size)
}

/// The report as node 0 prints it: Figures 8 and 9 as a table, the seed's
/// figures and the raw limits, and the goals.
pub fn format(r: &Report) -> String {
    let mut s = String::new();
    s += &format!(
        "UMP (seed 004, Figures 8 and 9), {} nodes; rings: Memory Channel {} KiB, shared memory {} KiB; medians\n",
        r.nodes,
        r.ring_bytes >> 10,
        r.shm_ring_bytes >> 10
    );
    s += "            | one-way transfer time (us)                | bandwidth (MB/s)\n";
    s += "       size |  MC blk   MC nb   shm blk  shm nb          |  MC blk   MC nb   shm blk  shm nb\n";
    for &size in SIZES {
        let get = |t, m| point(r, t, m, size);
        let cols = [
            get("memory-channel", "blocking"),
            get("memory-channel", "non-blocking"),
            get("shared-memory", "blocking"),
            get("shared-memory", "non-blocking"),
        ];
        let t: Vec<String> = cols
            .iter()
            .map(|p| p.map_or("-".into(), |p| format!("{:.1}", p.one_way_us)))
            .collect();
        let b: Vec<String> = cols
            .iter()
            .map(|p| p.map_or("-".into(), |p| format!("{:.0}", p.mb_s)))
            .collect();
        s += &format!(
            "{size:>11} | {:>7} {:>7} {:>9} {:>7}          | {:>7} {:>7} {:>9} {:>7}\n",
            t[0], t[1], t[2], t[3], b[0], b[1], b[2], b[3]
        );
    }
    s += &format!(
        "seed 004 (AlphaServer 4100, MC 1.5): MC {} us, {} MB/s; shared memory {} us, {} MB/s\n",
        r.seed.mc_latency_us, r.seed.mc_peak_mb_s, r.seed.shm_latency_us, r.seed.shm_peak_mb_s
    );
    s += &format!(
        "this machine, same run: adapter one-way {:.2} us; adapter 64 KiB streaming {:.0} MB/s; memcpy 64 KiB {:.0} MB/s\n",
        r.raw.adapter_one_way_us, r.raw.adapter_stream_64k_mb_s, r.raw.memcpy_64k_mb_s
    );
    for &size in MCAST_SIZES {
        let get = |outbuf| {
            r.mcast
                .iter()
                .find(|p| p.size == size && p.outbuf == outbuf)
        };
        if let (Some(per), Some(one)) = (get(false), get(true)) {
            s += &format!(
                "mcast {size} B to {} nodes: one copy (outbuf) {:.1} us, per channel {:.1} us ({:.2}x)\n",
                one.readers,
                one.us_per_mcast,
                per.us_per_mcast,
                per.us_per_mcast / one.us_per_mcast
            );
        }
    }
    let goal = |name: &str, ok: bool, detail: String| {
        format!(
            "goal {}: {name}: {detail}\n",
            if ok { "met" } else { "MISSED" }
        )
    };
    if let Some(p) = point(r, "memory-channel", "blocking", 8) {
        let x = p.one_way_us / r.raw.adapter_one_way_us;
        s += &goal(
            "8-byte one-way within 1.5x of the adapter's",
            x <= 1.5,
            format!("{:.2} us = {x:.2}x", p.one_way_us),
        );
    }
    let best = |t: &str| {
        ["blocking", "non-blocking"]
            .iter()
            .filter_map(|m| point(r, t, m, 64 << 10))
            .map(|p| p.mb_s)
            .fold(f64::NAN, f64::max)
    };
    let mc = best("memory-channel");
    s += &goal(
        "64 KiB over MC at 0.8x the adapter's streaming bandwidth",
        mc >= 0.8 * r.raw.adapter_stream_64k_mb_s,
        format!("{mc:.0} MB/s = {:.2}x", mc / r.raw.adapter_stream_64k_mb_s),
    );
    let shm = best("shared-memory");
    s += &goal(
        "64 KiB over shared memory at half a memcpy",
        shm >= 0.5 * r.raw.memcpy_64k_mb_s,
        format!("{shm:.0} MB/s = {:.2}x", shm / r.raw.memcpy_64k_mb_s),
    );
    s
}

#[cfg(test)]
mod error_tests {
    use super::*;

    /// Each cause of a failed `bench ump` prints once under ErrorChain.
    #[test]
    fn each_cause_prints_once() {
        let cause = || std::io::Error::other("the distinctive cause");
        let errors = [
            BenchUmpError::Json {
                path: "out.json".into(),
                source: cause(),
            },
            BenchUmpError::Api(McError::JoinThread(cause())),
            BenchUmpError::Ump(UmpError::Thread(cause())),
            BenchUmpError::Ump(UmpError::Mc(McError::JoinThread(cause()))),
        ];
        for e in &errors {
            assert_eq!(firmware_model::doubled_cause(e), None);
            let line = firmware_model::ErrorChain(e).to_string();
            assert_eq!(line.matches("the distinctive cause").count(), 1, "{line}");
        }
    }
}
