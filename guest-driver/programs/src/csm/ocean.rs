//! Ocean, reduced to its solver: Poisson's equation on an (n+2) x (n+2)
//! grid by two-grid cycles of red-black SOR (SPLASH-2's Ocean, seed 001
//! Table 1, is a multigrid solver of the ocean's stream function; written
//! here from the published method, not from SPLASH's source, and this
//! project's C version integration/c/anl/ocean.C has the same cycles). A
//! cycle smooths the fine grid, forms the residual, restricts it to a grid
//! of half the points a side, smooths the correction there from zero,
//! brings it back, and smooths again. Rows are shared out in bands; a
//! barrier follows every colour and every step: nearest-neighbour sharing
//! at the bands' edges, as in SPLASH's Ocean. Not SPLASH's Ocean: no eddy
//! and boundary currents, two grid levels, not a full multigrid hierarchy
//! (docs/hlrc.md says so).
//!
//! Each grid that is swept is kept as two arrays, its red and its black
//! points (as sor.rs does): a colour's sweep writes one array and reads
//! only the other, so no slice a processor writes overlaps one another
//! reads. Every point is computed by one processor with the same
//! operations in the same order as the sequential run: compared bit for
//! bit.

use std::ops::Range;
use std::sync::OnceLock;

use dsm_core::{Dsm, DsmError, SharedArray};

use super::error::AppError;
use super::problem::HeapPlan;
use super::verify;
use super::workload::{ComputeWindow, Workload};

/// SOR's over-relaxation factor.
const OMEGA: f64 = 1.15;
/// Red-black sweeps on the fine grid before and after the coarse solve;
/// the coarse grid gets four times as many.
const SWEEPS: usize = 2;

/// The problem's shape: `n` interior points a side (even), `cycles`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OceanShape {
    pub n: usize,
    pub cycles: u32,
}

/// A square grid of `m` interior points a side plus its zero border, each
/// colour's points in an array of (m + 2) rows of `half` values.
#[derive(Clone, Copy, Debug)]
struct Layout {
    m: usize,
}

impl Layout {
    fn side(self) -> usize {
        self.m + 2
    }
    /// Values of one colour in a row (m is even, so every row has as many).
    fn half(self) -> usize {
        self.side() / 2
    }
    fn colour_len(self) -> usize {
        self.side() * self.half()
    }
    fn plain_len(self) -> usize {
        self.side() * self.side()
    }
    /// Point (i, j)'s colour and its index in that colour's array.
    fn at(self, i: usize, j: usize) -> (usize, usize) {
        ((i + j) % 2, i * self.half() + j / 2)
    }
    /// Row `i`'s values in a colour array.
    fn row(self, i: usize) -> Range<usize> {
        i * self.half()..(i + 1) * self.half()
    }
    /// Row `i` of a plain (one array) grid.
    fn plain_row(self, i: usize) -> Range<usize> {
        i * self.side()..(i + 1) * self.side()
    }
}

/// A point of a colour-split grid.
fn get(g: [&[f64]; 2], l: Layout, i: usize, j: usize) -> f64 {
    let (c, k) = l.at(i, j);
    g[c][k]
}

/// One colour's sweep of row `i`: `mine` is that colour's row, `other`
/// the other colour's whole array, `f` the plain right-hand side.
#[allow(
    clippy::too_many_arguments,
    reason = "one row's kernel: the grid, its row, and where"
)]
fn sweep_row(mine: &mut [f64], other: &[f64], f: &[f64], l: Layout, h: f64, i: usize, c: usize) {
    let side = l.side();
    let o = |i: usize, j: usize| other[l.at(i, j).1];
    for j in (1 + (i + c + 1) % 2..=l.m).step_by(2) {
        let nb = o(i - 1, j) + o(i + 1, j) + o(i, j - 1) + o(i, j + 1);
        let u = &mut mine[j / 2];
        *u = (1.0 - OMEGA) * *u + OMEGA * 0.25 * (h * h * f[i * side + j] + nb);
    }
}

/// Row `i` of the residual f - A u (plain).
fn residual_row(r: &mut [f64], u: [&[f64]; 2], f: &[f64], l: Layout, h: f64, i: usize) {
    let side = l.side();
    for j in 1..=l.m {
        let nb =
            get(u, l, i - 1, j) + get(u, l, i + 1, j) + get(u, l, i, j - 1) + get(u, l, i, j + 1);
        r[j] = f[i * side + j] - (4.0 * get(u, l, i, j) - nb) / (h * h);
    }
}

/// Coarse row `ci`: the mean of the 2 x 2 fine residuals (`r`, plain, of
/// the fine layout `l`) into `fc`, and the correction (`uc`, the row's two
/// colours) set to zero.
fn restrict_row(fc: &mut [f64], uc: [&mut [f64]; 2], r: &[f64], l: Layout, ci: usize) {
    let s = l.side();
    for (cj, v) in fc.iter_mut().enumerate().take(l.m / 2 + 1).skip(1) {
        let (i, j) = (2 * ci, 2 * cj);
        *v = 0.25 * (r[(i - 1) * s + j - 1] + r[(i - 1) * s + j] + r[i * s + j - 1] + r[i * s + j]);
    }
    for c in uc {
        // The border stays zero; the interior starts from zero.
        c.fill(0.0);
    }
}

/// Fine row `i` (its two colours, `u`): plus the coarse correction of the
/// cell it lies in.
fn prolong_row(u: [&mut [f64]; 2], uc: [&[f64]; 2], l: Layout, i: usize) {
    let cl = Layout { m: l.m / 2 };
    let [u0, u1] = u;
    for j in 1..=l.m {
        let (c, k) = l.at(i, j);
        let v = if c == 0 {
            &mut u0[k - i * l.half()]
        } else {
            &mut u1[k - i * l.half()]
        };
        *v += get(uc, cl, i.div_ceil(2), j.div_ceil(2));
    }
}

/// The steps of a cycle, a barrier after each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// One colour of a sweep of the fine (true) or coarse grid.
    Sweep {
        fine: bool,
        colour: usize,
    },
    Residual,
    Restrict,
    Prolong,
}

/// One cycle's steps, in order.
fn cycle() -> Vec<Step> {
    let sweeps = |fine: bool, n: usize| {
        (0..n).flat_map(move |_| (0..2).map(move |colour| Step::Sweep { fine, colour }))
    };
    sweeps(true, SWEEPS)
        .chain([Step::Residual, Step::Restrict])
        .chain(sweeps(false, 4 * SWEEPS))
        .chain([Step::Prolong])
        .chain(sweeps(true, SWEEPS))
        .collect()
}

/// Processor `p`'s band of the `m` interior rows (1-based), as the C
/// version shares them: ceil(m / procs) rows each, the last ones maybe none.
fn band(m: usize, p: usize, procs: usize) -> Range<usize> {
    let rows = m.div_ceil(procs);
    let lo = (1 + p * rows).min(m + 1);
    lo..(lo + rows).min(m + 1)
}

fn source(i: usize, j: usize) -> f64 {
    ((i * 7 + j * 13) % 17) as f64 - 8.0
}

/// The sequential run's grids.
struct Plain {
    u: [Vec<f64>; 2],
    uc: [Vec<f64>; 2],
    f: Vec<f64>,
    r: Vec<f64>,
    fc: Vec<f64>,
}

impl Plain {
    fn new(l: Layout) -> Plain {
        let cl = Layout { m: l.m / 2 };
        let mut f = vec![0.0; l.plain_len()];
        for i in 1..=l.m {
            for j in 1..=l.m {
                f[i * l.side() + j] = source(i, j);
            }
        }
        Plain {
            u: [vec![0.0; l.colour_len()], vec![0.0; l.colour_len()]],
            uc: [vec![0.0; cl.colour_len()], vec![0.0; cl.colour_len()]],
            f,
            r: vec![0.0; l.plain_len()],
            fc: vec![0.0; cl.plain_len()],
        }
    }
}

/// The sequential run: the fine grid's two colours after `cycles` cycles.
pub fn sequential(s: OceanShape) -> [Vec<f64>; 2] {
    let l = Layout { m: s.n };
    let cl = Layout { m: s.n / 2 };
    let h = 1.0 / (s.n + 1) as f64;
    let mut g = Plain::new(l);
    super::seq_timing::compute_begins();
    for _ in 0..s.cycles {
        for step in cycle() {
            match step {
                Step::Sweep { fine, colour } => {
                    let (grid, f, lay, hh) = if fine {
                        (&mut g.u, &g.f, l, h)
                    } else {
                        (&mut g.uc, &g.fc, cl, 2.0 * h)
                    };
                    let [c0, c1] = grid;
                    let (mine, other) = if colour == 0 { (c0, &*c1) } else { (c1, &*c0) };
                    for i in 1..=lay.m {
                        sweep_row(&mut mine[lay.row(i)], other, f, lay, hh, i, colour);
                    }
                }
                Step::Residual => {
                    for i in 1..=l.m {
                        residual_row(&mut g.r[l.plain_row(i)], [&g.u[0], &g.u[1]], &g.f, l, h, i);
                    }
                }
                Step::Restrict => {
                    let [c0, c1] = &mut g.uc;
                    for ci in 1..=cl.m {
                        let uc = [&mut c0[cl.row(ci)], &mut c1[cl.row(ci)]];
                        restrict_row(&mut g.fc[cl.plain_row(ci)], uc, &g.r, l, ci);
                    }
                }
                Step::Prolong => {
                    let [u0, u1] = &mut g.u;
                    for i in 1..=l.m {
                        prolong_row(
                            [&mut u0[l.row(i)], &mut u1[l.row(i)]],
                            [&g.uc[0], &g.uc[1]],
                            l,
                            i,
                        );
                    }
                }
            }
        }
    }
    g.u
}

pub fn footprint(s: OceanShape, page_size: u32) -> usize {
    let (l, cl) = (Layout { m: s.n }, Layout { m: s.n / 2 });
    HeapPlan::new(page_size)
        .array::<f64>(l.colour_len(), true)
        .array::<f64>(l.colour_len(), true)
        .array::<f64>(l.plain_len(), true)
        .array::<f64>(l.plain_len(), true)
        .array::<f64>(cl.colour_len(), true)
        .array::<f64>(cl.colour_len(), true)
        .array::<f64>(cl.plain_len(), true)
        .bytes()
}

pub struct Ocean {
    shape: OceanShape,
    procs: usize,
    /// The fine grid's red and black points, the right-hand side and the
    /// residual (plain).
    u: [SharedArray<f64>; 2],
    f: SharedArray<f64>,
    r: SharedArray<f64>,
    /// The coarse correction's two colours and its right-hand side.
    uc: [SharedArray<f64>; 2],
    fc: SharedArray<f64>,
    reference: OnceLock<[Vec<f64>; 2]>,
    window: ComputeWindow,
}

pub fn setup(csm: &Dsm, shape: OceanShape) -> Result<Ocean, AppError> {
    if shape.n < 4 || shape.n % 2 != 0 {
        return Err(verify::SuiteError::Shape {
            app: "ocean",
            why: format!(
                "a grid of {} interior points a side: an even number, at least 4",
                shape.n
            ),
        }
        .into());
    }
    let (l, cl) = (Layout { m: shape.n }, Layout { m: shape.n / 2 });
    // In footprint's order.
    let u = [
        csm.alloc(l.colour_len(), true)?,
        csm.alloc(l.colour_len(), true)?,
    ];
    let f = csm.alloc(l.plain_len(), true)?;
    let r = csm.alloc(l.plain_len(), true)?;
    let uc = [
        csm.alloc(cl.colour_len(), true)?,
        csm.alloc(cl.colour_len(), true)?,
    ];
    let fc = csm.alloc(cl.plain_len(), true)?;
    Ok(Ocean {
        shape,
        procs: (csm.nodes() * csm.threads()) as usize,
        u,
        f,
        r,
        uc,
        fc,
        reference: OnceLock::new(),
        window: ComputeWindow::default(),
    })
}

/// A whole shared array as a slice.
///
/// # Safety
///
/// As [`SharedArray::as_slice`].
unsafe fn whole(a: &SharedArray<f64>) -> &[f64] {
    // SAFETY: the caller's promise.
    unsafe { a.as_slice(0..a.len()) }
}

impl Ocean {
    /// One step over this processor's rows of its grid, polling after
    /// each row (the outer loop's back edge).
    fn step(&self, csm: &Dsm, step: Step, tid: usize) -> Result<(), DsmError> {
        let l = Layout { m: self.shape.n };
        let cl = Layout {
            m: self.shape.n / 2,
        };
        let h = 1.0 / (self.shape.n + 1) as f64;
        let fine = !matches!(step, Step::Restrict | Step::Sweep { fine: false, .. });
        let rows = if fine {
            band(l.m, tid, self.procs)
        } else {
            band(cl.m, tid, self.procs)
        };
        for i in rows {
            // SAFETY: between two barriers each processor writes only its
            // own rows of the arrays a step writes (a colour's sweep writes
            // one colour array and reads the other; the residual writes r
            // from u and f; restriction writes fc and uc from r;
            // prolongation writes u from uc), nobody writes what the step
            // reads, and no array is both read and written in one step.
            // Every slice ends before the poll.
            unsafe {
                match step {
                    Step::Sweep { fine, colour } => {
                        let (grid, lay, hh, f) = if fine {
                            (&self.u, l, h, &self.f)
                        } else {
                            (&self.uc, cl, 2.0 * h, &self.fc)
                        };
                        let mine = grid[colour].as_mut_slice(lay.row(i));
                        let other = whole(&grid[1 - colour]);
                        sweep_row(mine, other, whole(f), lay, hh, i, colour);
                    }
                    Step::Residual => {
                        let u = [whole(&self.u[0]), whole(&self.u[1])];
                        let r = self.r.as_mut_slice(l.plain_row(i));
                        residual_row(r, u, whole(&self.f), l, h, i);
                    }
                    Step::Restrict => {
                        let uc = [
                            self.uc[0].as_mut_slice(cl.row(i)),
                            self.uc[1].as_mut_slice(cl.row(i)),
                        ];
                        let fc = self.fc.as_mut_slice(cl.plain_row(i));
                        restrict_row(fc, uc, whole(&self.r), l, i);
                    }
                    Step::Prolong => {
                        let u = [
                            self.u[0].as_mut_slice(l.row(i)),
                            self.u[1].as_mut_slice(l.row(i)),
                        ];
                        prolong_row(u, [whole(&self.uc[0]), whole(&self.uc[1])], l, i);
                    }
                }
            }
            csm.poll()?;
        }
        Ok(())
    }
}

impl Workload for Ocean {
    fn run(&self, csm: &Dsm, tid: usize) -> Result<u64, AppError> {
        let l = Layout { m: self.shape.n };
        let mine = band(l.m, tid, self.procs);
        // First touch: each processor writes its own rows of f.
        for i in mine.clone() {
            for j in 1..=l.m {
                self.f.set(i * l.side() + j, source(i, j));
            }
        }
        csm.barrier()?;
        csm.mark_start();
        for _ in 0..self.shape.cycles {
            for step in cycle() {
                self.step(csm, step, tid)?;
                csm.barrier()?;
            }
        }
        self.window.end(csm, tid)?;
        let want = self.reference.get_or_init(|| sequential(self.shape));
        let mut checked = 0;
        for i in mine {
            for j in 1..=l.m {
                let (c, k) = l.at(i, j);
                verify::exact("ocean", "u", i * l.side() + j, self.u[c].get(k), want[c][k])?;
                checked += 1;
            }
        }
        Ok(checked)
    }

    fn window(&self) -> &ComputeWindow {
        &self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest |residual| of a colour-split fine grid.
    fn max_residual(u: [&[f64]; 2], s: OceanShape) -> f64 {
        let l = Layout { m: s.n };
        let h = 1.0 / (s.n + 1) as f64;
        let f = Plain::new(l).f;
        let mut r = vec![0.0; l.side()];
        (1..=l.m)
            .map(|i| {
                residual_row(&mut r, u, &f, l, h, i);
                r.iter().fold(0.0f64, |m, v| m.max(v.abs()))
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn cycles_reduce_the_residual() {
        let s = OceanShape { n: 30, cycles: 1 };
        let zero = Plain::new(Layout { m: s.n }).u;
        let r0 = max_residual([&zero[0], &zero[1]], s);
        let one = sequential(s);
        let r1 = max_residual([&one[0], &one[1]], s);
        let three = sequential(OceanShape { cycles: 3, ..s });
        let r3 = max_residual([&three[0], &three[1]], s);
        assert!(r1 < r0 && r3 < r1, "{r0} {r1} {r3}");
    }

    #[test]
    fn bands_cover_the_rows_once() {
        for (m, procs) in [(30, 8), (62, 4), (4, 8), (256, 3)] {
            let mut next = 1;
            for p in 0..procs {
                let b = band(m, p, procs);
                assert!(b.is_empty() || b.start == next, "{m} {procs} {p}");
                next = next.max(b.end);
            }
            assert_eq!(next, m + 1);
        }
    }

    #[test]
    fn colours_split_every_row_in_halves() {
        let l = Layout { m: 6 };
        let mut seen = [vec![false; l.colour_len()], vec![false; l.colour_len()]];
        for i in 0..l.side() {
            for j in 0..l.side() {
                let (c, k) = l.at(i, j);
                assert!(l.row(i).contains(&k) && !seen[c][k]);
                seen[c][k] = true;
            }
        }
        assert!(seen.iter().flatten().all(|&s| s));
    }
}
