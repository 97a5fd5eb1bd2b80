//! EM3D: electromagnetic wave propagation through a 3-D object (Culler et
//! al. 1993; seed 000 s.3.2). A bipartite graph of E nodes and H nodes; each
//! iteration updates every E value from its H neighbours, then (after a
//! barrier) every H value from its E neighbours. Each processor owns a
//! contiguous range of E nodes and of H nodes; `remote_pct` percent of a
//! node's edges go to the nodes of an adjacent processor (one on either
//! side), the rest stay in its own range: the "nearest neighbor sharing
//! pattern" of seed 000 s.3.4.1, where diffs occur "only between adjacent
//! processors spanning nodes" and are performed at barriers.
//!
//! The graph depends on the number of processors (which ranges are
//! adjacent), so the sequential run builds the same graph for the same
//! count. Every value is computed by one processor with the same operations
//! in the same order as the sequential run: compared bit for bit.

use std::ops::Range;
use std::sync::OnceLock;

use dsm_core::{Dsm, DsmError, SharedArray};

use super::error::AppError;
use super::problem::HeapPlan;
use super::verify;
use super::workload::{ComputeWindow, Workload};

/// The graph's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Em3dShape {
    pub nodes: usize,
    pub degree: usize,
    pub remote_pct: u32,
    pub iters: u32,
}

impl Em3dShape {
    fn e_nodes(&self) -> usize {
        self.nodes / 2
    }
    fn h_nodes(&self) -> usize {
        self.nodes - self.nodes / 2
    }
}

/// Processor `p`'s share of `len` nodes.
fn range(p: usize, procs: usize, len: usize) -> Range<usize> {
    p * len / procs..(p + 1) * len / procs
}

/// SplitMix64: the graph's random numbers, a pure function of the position.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn unit(x: u64) -> f64 {
    (mix(x) >> 11) as f64 / (1u64 << 53) as f64
}

/// Edge `k` of node `i` of one side (`side` 0: E, 1: H), owned by processor
/// `p`: the neighbour's index on the other side and the edge's weight.
fn edge(s: &Em3dShape, procs: usize, side: u64, p: usize, i: usize, k: usize) -> (u32, f64) {
    let other = if side == 0 { s.h_nodes() } else { s.e_nodes() };
    let key = (side << 62) ^ ((i * s.degree + k) as u64).wrapping_mul(0x1000_0000_01b3);
    let remote = procs > 1 && mix(key ^ 1) % 100 < u64::from(s.remote_pct);
    let q = if !remote {
        p
    } else if mix(key ^ 2) % 2 == 0 {
        (p + 1) % procs
    } else {
        (p + procs - 1) % procs
    };
    let r = range(q, procs, other);
    let j = if r.is_empty() {
        usize::try_from(mix(key ^ 3) % other as u64).expect("below a node count")
    } else {
        r.start + usize::try_from(mix(key ^ 3) % r.len() as u64).expect("below a range's length")
    };
    let w = (unit(key ^ 4) - 0.5) / s.degree as f64;
    (u32::try_from(j).expect("a node number fits u32"), w)
}

fn initial(side: u64, i: usize) -> f64 {
    unit((side << 62) ^ (i as u64) ^ 0x5eed)
}

/// The graph's edges for one side, node by node, for `procs` processors.
fn edges(s: &Em3dShape, procs: usize, side: u64) -> (Vec<u32>, Vec<f64>) {
    let len = if side == 0 { s.e_nodes() } else { s.h_nodes() };
    let mut nbr = Vec::with_capacity(len * s.degree);
    let mut w = Vec::with_capacity(len * s.degree);
    for p in 0..procs {
        for i in range(p, procs, len) {
            for k in 0..s.degree {
                let (j, wt) = edge(s, procs, side, p, i, k);
                nbr.push(j);
                w.push(wt);
            }
        }
    }
    (nbr, w)
}

/// The sequential run: final E and H values.
pub fn sequential(s: &Em3dShape, procs: usize) -> (Vec<f64>, Vec<f64>) {
    let d = s.degree;
    let (en, ew) = edges(s, procs, 0);
    let (hn, hw) = edges(s, procs, 1);
    let mut e: Vec<f64> = (0..s.e_nodes()).map(|i| initial(0, i)).collect();
    let mut h: Vec<f64> = (0..s.h_nodes()).map(|i| initial(1, i)).collect();
    super::seq_timing::compute_begins();
    for _ in 0..s.iters {
        relax(&mut e, &en, &ew, &h, d);
        relax(&mut h, &hn, &hw, &e, d);
    }
    (e, h)
}

/// The kernel of both runs: each value of `val` less its `d` edges'
/// weights `w` times the neighbours' values in `from` (`nbr` and `w`: the
/// edges of `val`'s nodes, `d` each, in order).
fn relax(val: &mut [f64], nbr: &[u32], w: &[f64], from: &[f64], d: usize) {
    for ((v, nb), wt) in val
        .iter_mut()
        .zip(nbr.chunks_exact(d))
        .zip(w.chunks_exact(d))
    {
        let mut x = *v;
        for (j, wk) in nb.iter().zip(wt) {
            x -= wk * from[*j as usize];
        }
        *v = x;
    }
}

pub fn footprint(s: &Em3dShape, page_size: u32) -> usize {
    let (ne, nh, d) = (s.e_nodes(), s.h_nodes(), s.degree);
    HeapPlan::new(page_size)
        .array::<f64>(ne, true)
        .array::<f64>(nh, true)
        .array::<u32>(ne * d, true)
        .array::<f64>(ne * d, true)
        .array::<u32>(nh * d, true)
        .array::<f64>(nh * d, true)
        .bytes()
}

/// One side of the graph in shared memory.
struct Side {
    val: SharedArray<f64>,
    nbr: SharedArray<u32>,
    w: SharedArray<f64>,
}

pub struct Em3d {
    shape: Em3dShape,
    procs: usize,
    e: Side,
    h: Side,
    reference: OnceLock<(Vec<f64>, Vec<f64>)>,
    window: ComputeWindow,
}

pub fn setup(csm: &Dsm, shape: Em3dShape) -> Result<Em3d, AppError> {
    let (ne, nh, d) = (shape.e_nodes(), shape.h_nodes(), shape.degree);
    let e_val = csm.alloc(ne, true)?;
    let h_val = csm.alloc(nh, true)?;
    let e = Side {
        val: e_val,
        nbr: csm.alloc(ne * d, true)?,
        w: csm.alloc(ne * d, true)?,
    };
    let h = Side {
        val: h_val,
        nbr: csm.alloc(nh * d, true)?,
        w: csm.alloc(nh * d, true)?,
    };
    Ok(Em3d {
        shape,
        procs: (csm.nodes() * csm.threads()) as usize,
        e,
        h,
        reference: OnceLock::new(),
        window: ComputeWindow::default(),
    })
}

impl Em3d {
    /// Update this processor's nodes of `side` from the other side's values.
    fn half_step(
        &self,
        csm: &Dsm,
        mine: Range<usize>,
        side: &Side,
        from: SharedArray<f64>,
    ) -> Result<(), DsmError> {
        let d = self.shape.degree;
        // A loop back edge (seed 000 s.2.1's polling) every 32 nodes.
        let mut i = mine.start;
        while i < mine.end {
            let end = (i + 32).min(mine.end);
            // SAFETY: in this half step nobody writes the other side's
            // values (`from`) or any edge, and this processor's nodes of
            // `side` are touched by it alone; the slices end before the
            // poll and the barrier.
            let (val, nbr, w, from) = unsafe {
                (
                    side.val.as_mut_slice(i..end),
                    side.nbr.as_slice(i * d..end * d),
                    side.w.as_slice(i * d..end * d),
                    from.as_slice(0..from.len()),
                )
            };
            relax(val, nbr, w, from, d);
            csm.poll()?;
            i = end;
        }
        Ok(())
    }
}

impl Workload for Em3d {
    fn run(&self, csm: &Dsm, tid: usize) -> Result<u64, AppError> {
        let s = &self.shape;
        let d = s.degree;
        let my_e = range(tid, self.procs, s.e_nodes());
        let my_h = range(tid, self.procs, s.h_nodes());
        // First touch: each processor builds its own nodes and edges.
        for (side, mine, sh) in [(0u64, &my_e, &self.e), (1, &my_h, &self.h)] {
            for i in mine.clone() {
                sh.val.set(i, initial(side, i));
                for k in 0..d {
                    let (j, w) = edge(s, self.procs, side, tid, i, k);
                    sh.nbr.set(i * d + k, j);
                    sh.w.set(i * d + k, w);
                }
            }
        }
        csm.barrier()?;
        csm.mark_start();
        for _ in 0..s.iters {
            self.half_step(csm, my_e.clone(), &self.e, self.h.val)?;
            csm.barrier()?;
            self.half_step(csm, my_h.clone(), &self.h, self.e.val)?;
            csm.barrier()?;
        }
        self.window.end(csm, tid)?;
        let (want_e, want_h) = self.reference.get_or_init(|| sequential(s, self.procs));
        for i in my_e.clone() {
            verify::exact("em3d", "e", i, self.e.val.get(i), want_e[i])?;
        }
        for i in my_h.clone() {
            verify::exact("em3d", "h", i, self.h.val.get(i), want_h[i])?;
        }
        Ok((my_e.len() + my_h.len()) as u64)
    }

    fn window(&self) -> &ComputeWindow {
        &self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_edges_go_to_adjacent_processors_only() {
        let s = Em3dShape {
            nodes: 4000,
            degree: 10,
            remote_pct: 20,
            iters: 1,
        };
        let procs = 8;
        let (nbr, _) = edges(&s, procs, 0);
        let h = s.h_nodes();
        let owner = |j: usize| {
            (0..procs)
                .find(|&q| range(q, procs, h).contains(&j))
                .unwrap()
        };
        let mut remote = 0;
        for p in 0..procs {
            for i in range(p, procs, s.e_nodes()) {
                for k in 0..s.degree {
                    let q = owner(nbr[i * s.degree + k] as usize);
                    assert!(q == p || q == (p + 1) % procs || q == (p + procs - 1) % procs);
                    remote += usize::from(q != p);
                }
            }
        }
        let pct = remote * 100 / (s.e_nodes() * s.degree);
        assert!((17..=23).contains(&pct), "{pct}% remote");
    }
}
