//! `mc-guest bench csm [--variant V]`: the operations of Table II of seed
//! 000 (s.3.1), measured on this emulation and printed next to the paper's
//! figures: its "MC Direct" column (remote writes, broadcast, total order)
//! and its "MC Messages" column (explicit messages) where it has one. The
//! ratio compares with the column of the mechanism the variant uses for
//! that operation: CSM-MS's diffs are messages, its locks and barriers
//! Memory Channel; CSM-None's locks and barriers are messages too.

use std::time::Instant;

use cashmere::{Config, Csm, CsmError};
use mc_api::{vclock, MemoryChannel};

use crate::bench::{BenchError, Which};
use cashmere::CsmVariant;
use cashmere::MessageDetection;

/// One operation: the paper's figures and the one measured here.
#[derive(Clone, Debug)]
pub struct CsmBenchRow {
    pub operation: &'static str,
    /// The paper's cost with Memory Channel features, microseconds.
    pub mc_direct: f64,
    /// The paper's cost with explicit messages, where it gives one.
    pub mc_messages: Option<f64>,
    /// Measured here (median), microseconds of wall-clock time.
    pub here: f64,
    /// Predicted by the virtual clock (median), microseconds, when the
    /// run has one (`mc-host run --clock virtual`).
    pub predicted: Option<f64>,
    /// The variant did it by explicit messages (compare with `mc_messages`).
    pub by_messages: bool,
}

impl CsmBenchRow {
    fn new(
        operation: &'static str,
        mc_direct: f64,
        mc_messages: Option<f64>,
        (here, predicted): (f64, Option<f64>),
    ) -> Self {
        CsmBenchRow {
            operation,
            mc_direct,
            mc_messages,
            here,
            predicted,
            by_messages: false,
        }
    }

    /// The figure to compare with the paper's: the predicted one when the
    /// run has a virtual clock (it models the real cluster), else the
    /// wall-clock one.
    pub fn measured(&self) -> f64 {
        self.predicted.unwrap_or(self.here)
    }

    fn by_messages(mut self, yes: bool) -> Self {
        self.by_messages = yes && self.mc_messages.is_some();
        self
    }

    /// The paper's figure for the mechanism used here.
    pub fn paper(&self) -> f64 {
        match (self.by_messages, self.mc_messages) {
            (true, Some(m)) => m,
            _ => self.mc_direct,
        }
    }
}

/// The operation's median cost in microseconds: wall-clock, and on the
/// virtual clock when the run has one (the thread's clock before and after,
/// which counts its CPU time and the modelled network, never its waiting).
fn time_us(
    iters: u32,
    mut f: impl FnMut() -> Result<(), CsmError>,
) -> Result<(f64, Option<f64>), CsmError> {
    let virt = vclock::enabled();
    let mut s = Vec::with_capacity(iters as usize);
    let mut v = Vec::with_capacity(if virt { iters as usize } else { 0 });
    for _ in 0..iters {
        let vt = vclock::tick();
        let t = Instant::now();
        f()?;
        s.push(t.elapsed().as_secs_f64() * 1e6);
        if virt {
            v.push(vclock::tick().saturating_sub(vt) as f64 / 1e3);
        }
    }
    let predicted = virt.then(|| crate::bench::median(&mut v));
    Ok((crate::bench::median(&mut s), predicted))
}

/// Every node runs this (at least two nodes); node 0 measures and returns
/// the rows, node 1 is the remote home.
pub fn run(
    mc: &MemoryChannel,
    iters: u32,
    variant: CsmVariant,
    detection: MessageDetection,
) -> Result<Vec<CsmBenchRow>, BenchError> {
    if mc.nodes() < 2 {
        return Err(BenchError::NeedsNodes {
            which: Which::Csm,
            nodes: mc.nodes(),
        });
    }
    let cfg = Config {
        heap_bytes: 4 * 8192,
        variant,
        detection,
        ..Config::default()
    };
    // Diffs by message in every variant but CSM-DMS; locks and barriers
    // by messages in CSM-None and CSM-None-Mg, through Memory Channel in
    // the others.
    let diff_messages = variant.data_by_messages();
    let sync_messages = variant.sync_by_messages();
    let csm = Csm::start(mc, &cfg)?;
    let me = csm.node_id();
    let page: cashmere::SharedArray<u32> = csm.alloc(4 * 2048, true)?;
    // Node 1 touches page 0 first: it is the home; node 0 is a remote sharer.
    if me == 1 {
        for i in 0..2048 {
            page.set(i, u32::try_from(i).expect("a word index fits u32"));
        }
    }
    csm.barrier()?;
    let mut rows = Vec::new();
    if me == 0 {
        let _ = page.get(0);
        rows.push(CsmBenchRow::new(
            "null message round trip",
            15.0,
            None,
            time_us(iters, || csm.null_round_trip(1))?,
        ));
        rows.push(CsmBenchRow::new(
            "page fetch (8 KiB)",
            220.0,
            None,
            time_us(iters, || csm.bench_fetch(0).map(drop))?,
        ));
        rows.push(CsmBenchRow::new(
            "twin (8 KiB)",
            68.0,
            None,
            time_us(iters, || csm.bench_twin(0))?,
        ));
        rows.push(
            CsmBenchRow::new(
                "diff, small (16 words)",
                31.0,
                Some(70.0),
                time_us(iters, || csm.bench_diff(0, 16).map(|_| ()))?,
            )
            .by_messages(diff_messages),
        );
        rows.push(
            CsmBenchRow::new(
                "diff, large (whole page)",
                129.0,
                Some(245.0),
                time_us(iters, || csm.bench_diff(0, 2048).map(|_| ()))?,
            )
            .by_messages(diff_messages),
        );
        // Lock 1: with message-based locks its manager is node 1, so each
        // acquire is a request to a remote manager and its answer (seed
        // 002 s.6.1's steps; the lock comes back from node 0 itself, the
        // last holder, once the manager forwards the request).
        rows.push(
            CsmBenchRow::new(
                "lock acquire (+release)",
                10.0,
                Some(33.0),
                time_us(iters, || {
                    csm.lock_acquire(1)?;
                    csm.lock_release(1)
                })?,
            )
            .by_messages(sync_messages),
        );
    }
    csm.barrier()?;
    let b = time_us(iters.min(200), || csm.barrier())?;
    if me == 0 {
        rows.push(
            CsmBenchRow::new("barrier (all nodes)", 29.0, Some(53.0), b).by_messages(sync_messages),
        );
    }
    csm.finish()?;
    Ok(rows)
}

pub fn format(
    rows: &[CsmBenchRow],
    nodes: u32,
    variant: CsmVariant,
    detection: MessageDetection,
) -> String {
    let virt = rows.iter().any(|r| r.predicted.is_some());
    let mut s = format!(
        "Cashmere CSM-{}, Table II operations (seed 000 s.3.1; paper: 32 processors on 8 nodes; here: {nodes} virtual nodes; requests noticed by {})\n{:<28} {:>14} {:>16} {:>12} {:>15} {:>8}\n",
        variant.name().to_uppercase(),
        detection.name(),
        "operation",
        "MC Direct (us)",
        "MC Messages (us)",
        "wall (us)",
        "predicted (us)",
        "ratio"
    );
    for r in rows {
        let msgs = r.mc_messages.map_or("-".to_string(), |m| format!("{m}"));
        let predicted = r.predicted.map_or("-".to_string(), |p| format!("{p:.1}"));
        let mark = if r.by_messages { " (msg)" } else { "" };
        s += &format!(
            "{:<28} {:>14} {:>16} {:>12.1} {:>15} {:>8.2}{mark}\n",
            r.operation,
            r.mc_direct,
            msgs,
            r.here,
            predicted,
            r.measured() / r.paper()
        );
    }
    s += if virt {
        "ratio: predicted / the paper's column for the mechanism used ((msg): messages)\n"
    } else {
        "ratio: wall-clock / the paper's column for the mechanism used ((msg): messages); \
         `mc-host run --clock virtual` adds predicted times\n"
    };
    s
}

/// The rows as a JSON record (`mc-guest bench csm --json`): what `mc-host
/// report` shows as Table II beside the paper's columns.
pub fn record(
    rows: &[CsmBenchRow],
    nodes: u32,
    variant: CsmVariant,
    detection: MessageDetection,
    iters: u32,
) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "operation": r.operation,
                "mc_direct_us": r.mc_direct,
                "mc_messages_us": r.mc_messages,
                "here_us": r.here,
                "predicted_us": r.predicted,
                "by_messages": r.by_messages,
            })
        })
        .collect();
    serde_json::json!({
        "schema": 1,
        "kind": "table2",
        "variant": variant.name(),
        "detection": detection.name(),
        "nodes": nodes,
        "iters": iters,
        "clock": if vclock::enabled() { "virtual" } else { "wall" },
        "rows": rows,
    })
}
