//! FFT: the six-step FFT (Bailey, "FFTs in external or hierarchical
//! memory", 1990; SPLASH-2's FFT kernel, seed 001 Table 1), written from the
//! published algorithm, not from SPLASH's source. N = 2^m complex points
//! (m even) as an n x n matrix, n = 2^(m/2), rows shared out among the
//! processors in contiguous bands: transpose, FFT every row, multiply by the
//! twiddle factors, transpose, FFT every row, transpose. A barrier follows
//! each transpose: a transpose is all-to-all communication, every
//! processor reading a column of every other's band (this project's C
//! version, integration/c/anl/fft.C, has the same steps).
//!
//! Every point is computed by one processor with the same operations in the
//! same order as the sequential run (the same kernels over the same
//! values): compared bit for bit. A few points are also checked against
//! the DFT's definition, within `DFT_TOLERANCE` of the input's magnitude
//! sum, because the O(N^2) definition sums in another order than the
//! O(N log N) butterflies, so only their rounding errors' size is bounded.

use std::f64::consts::PI;
use std::ops::Range;
use std::sync::OnceLock;

use dsm_core::{Dsm, DsmError, SharedArray};

use super::error::AppError;
use super::problem::HeapPlan;
use super::verify;
use super::workload::{ComputeWindow, Workload};

/// `|X[k] - DFT(x)[k]| <= DFT_TOLERANCE x (1 + sum |x|)`: a double's
/// rounding error (2^-53) grows with log2 N butterfly levels and the
/// twiddles' own error; 1e-9 leaves room for N up to 2^28 and catches any
/// wrong point (an error of one term is about 1 / N of the sum, > 4e-9).
pub const DFT_TOLERANCE: f64 = 1e-9;

/// The transform's shape: 2^m points as an n x n matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FftShape {
    pub m: usize,
}

impl FftShape {
    /// The matrix side, 2^(m/2).
    pub fn side(&self) -> usize {
        1 << (self.m / 2)
    }
    /// Points, N = n^2.
    pub fn points(&self) -> usize {
        self.side() * self.side()
    }
}

/// Processor `p`'s band of `n` rows.
fn band(p: usize, procs: usize, n: usize) -> Range<usize> {
    p * n / procs..(p + 1) * n / procs
}

/// Point `i`'s input (re for `im` 0, im for 1): a pure function of the
/// position, in [-1, 1].
fn input(i: usize, im: usize) -> f64 {
    let v = ((2 * i + im) as u64)
        .wrapping_mul(2_862_933_555_777_941_757)
        .wrapping_add(3_037_000_493);
    ((v >> 11) % 2001) as f64 / 1000.0 - 1.0
}

/// The n / 2 roots exp(-2 pi i k / n), interleaved (re, im).
fn roots(n: usize) -> Vec<f64> {
    (0..n / 2)
        .flat_map(|k| {
            let t = -2.0 * PI * k as f64 / n as f64;
            [t.cos(), t.sin()]
        })
        .collect()
}

/// Row `i` of the transpose: `row[j] = src[j][i]` (complex, interleaved).
fn transpose_row(row: &mut [f64], src: &[f64], n: usize, i: usize) {
    for (j, d) in row.chunks_exact_mut(2).enumerate() {
        d[0] = src[2 * (j * n + i)];
        d[1] = src[2 * (j * n + i) + 1];
    }
}

/// In-place radix-2 FFT of one row of n complex points (bit reversal, then
/// butterflies); `w` from [`roots`].
fn fft_row(r: &mut [f64], w: &[f64]) {
    let n = r.len() / 2;
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j ^= bit;
        if i < j {
            r.swap(2 * i, 2 * j);
            r.swap(2 * i + 1, 2 * j + 1);
        }
    }
    let mut len = 2;
    while len <= n {
        let half = len / 2;
        let step = n / len;
        for i in (0..n).step_by(len) {
            for k in 0..half {
                let (wr, wi) = (w[2 * k * step], w[2 * k * step + 1]);
                let (a, b) = (2 * (i + k), 2 * (i + k + half));
                let (ur, ui) = (r[a], r[a + 1]);
                let vr = r[b] * wr - r[b + 1] * wi;
                let vi = r[b] * wi + r[b + 1] * wr;
                r[a] = ur + vr;
                r[a + 1] = ui + vi;
                r[b] = ur - vr;
                r[b + 1] = ui - vi;
            }
        }
        len <<= 1;
    }
}

/// Row `j1` times its twiddles: `a[j1][k2] *= exp(-2 pi i j1 k2 / N)`.
fn twiddle_row(row: &mut [f64], j1: usize) {
    let n = row.len() / 2;
    let big_n = n as f64 * n as f64;
    for (k2, p) in row.chunks_exact_mut(2).enumerate() {
        let t = -2.0 * PI * (j1 * k2) as f64 / big_n;
        let (s, c) = t.sin_cos();
        let (re, im) = (p[0], p[1]);
        p[0] = re * c - im * s;
        p[1] = re * s + im * c;
    }
}

/// The steps between synchronisations, each a kernel of one row.
#[derive(Clone, Copy)]
enum Step {
    /// Transpose into the row.
    Transpose,
    /// Transpose, FFT the row and twiddle it (the first half's work).
    TransposeFftTwiddle,
    /// FFT the row in place.
    Fft,
}

/// The six steps as (source is x, step): a barrier follows each.
const STEPS: [(bool, Step); 4] = [
    (true, Step::TransposeFftTwiddle),
    (false, Step::Transpose),
    (false, Step::Fft),
    (true, Step::Transpose),
];

/// One step on row `i`: `row` is the destination array's row `i`, `src`
/// the whole source array (unused by [`Step::Fft`], which works in place).
fn step_row(step: Step, row: &mut [f64], src: &[f64], n: usize, i: usize, w: &[f64]) {
    match step {
        Step::Transpose => transpose_row(row, src, n, i),
        Step::TransposeFftTwiddle => {
            transpose_row(row, src, n, i);
            fft_row(row, w);
            twiddle_row(row, i);
        }
        Step::Fft => fft_row(row, w),
    }
}

/// The sequential run: the transform (in `y`, as the parallel run leaves
/// it).
pub fn sequential(s: FftShape) -> Vec<f64> {
    let (n, pts) = (s.side(), s.points());
    let mut x: Vec<f64> = (0..2 * pts).map(|i| input(i / 2, i % 2)).collect();
    let mut y = vec![0.0; 2 * pts];
    let w = roots(n);
    super::seq_timing::compute_begins();
    for (from_x, step) in STEPS {
        // Step::Fft works on x in place; the others write the other array.
        let (dst, src): (&mut [f64], &[f64]) = match (from_x, step) {
            (_, Step::Fft) => (&mut x, &[]),
            (true, _) => (&mut y, &x),
            (false, _) => (&mut x, &y),
        };
        for (i, row) in dst.chunks_exact_mut(2 * n).enumerate() {
            step_row(step, row, src, n, i, &w);
        }
    }
    y
}

/// The transform at point k by its definition, and the input's magnitude
/// sum: what the result is checked against at a few points.
fn dft_point(pts: usize, k: usize) -> ((f64, f64), f64) {
    let (mut re, mut im, mut mag) = (0.0, 0.0, 0.0);
    for j in 0..pts {
        let t = -2.0 * PI * ((j * k) % pts) as f64 / pts as f64;
        let (s, c) = t.sin_cos();
        let (xr, xi) = (input(j, 0), input(j, 1));
        re += xr * c - xi * s;
        im += xr * s + xi * c;
        mag += xr.abs() + xi.abs();
    }
    ((re, im), mag)
}

pub fn footprint(s: FftShape, page_size: u32) -> usize {
    HeapPlan::new(page_size)
        .array::<f64>(2 * s.points(), true)
        .array::<f64>(2 * s.points(), true)
        .bytes()
}

pub struct Fft {
    shape: FftShape,
    procs: usize,
    x: SharedArray<f64>,
    y: SharedArray<f64>,
    reference: OnceLock<Vec<f64>>,
    window: ComputeWindow,
}

pub fn setup(csm: &Dsm, shape: FftShape) -> Result<Fft, AppError> {
    if shape.m < 2 || shape.m % 2 != 0 || shape.m > 28 {
        return Err(verify::SuiteError::Shape {
            app: "fft",
            why: format!("2^{} points: m must be even, 2 to 28", shape.m),
        }
        .into());
    }
    let pts = shape.points();
    Ok(Fft {
        shape,
        procs: (csm.nodes() * csm.threads()) as usize,
        x: csm.alloc(2 * pts, true)?,
        y: csm.alloc(2 * pts, true)?,
        reference: OnceLock::new(),
        window: ComputeWindow::default(),
    })
}

impl Fft {
    /// One step over this processor's rows, polling after each row (the
    /// outer loop's back edge).
    fn step(
        &self,
        csm: &Dsm,
        mine: Range<usize>,
        from_x: bool,
        step: Step,
        w: &[f64],
    ) -> Result<(), DsmError> {
        let n = self.shape.side();
        let (dst, src) = if from_x || matches!(step, Step::Fft) {
            (
                if matches!(step, Step::Fft) {
                    self.x
                } else {
                    self.y
                },
                self.x,
            )
        } else {
            (self.x, self.y)
        };
        for i in mine {
            // SAFETY: between two barriers this processor alone touches its
            // rows of the destination; nobody writes the source of a
            // transpose (the other array) in this step, and an in-place
            // FFT reads nothing but its own row. Both slices end before
            // the poll.
            let (row, src) = unsafe {
                let row = dst.as_mut_slice(2 * i * n..2 * (i + 1) * n);
                let src = match step {
                    Step::Fft => &[][..],
                    _ => src.as_slice(0..src.len()),
                };
                (row, src)
            };
            step_row(step, row, src, n, i, w);
            csm.poll()?;
        }
        Ok(())
    }
}

impl Workload for Fft {
    fn run(&self, csm: &Dsm, tid: usize) -> Result<u64, AppError> {
        let n = self.shape.side();
        let mine = band(tid, self.procs, n);
        let w = roots(n);
        // First touch: each processor writes its own rows of the input.
        for i in 2 * mine.start * n..2 * mine.end * n {
            self.x.set(i, input(i / 2, i % 2));
        }
        csm.barrier()?;
        csm.mark_start();
        for (from_x, step) in STEPS {
            self.step(csm, mine.clone(), from_x, step, &w)?;
            csm.barrier()?;
        }
        self.window.end(csm, tid)?;
        let want = self.reference.get_or_init(|| sequential(self.shape));
        let rows = 2 * mine.start * n..2 * mine.end * n;
        for (i, &w) in want.iter().enumerate().take(rows.end).skip(rows.start) {
            verify::exact("fft", "y", i, self.y.get(i), w)?;
        }
        // Processor 0 also checks a few points against the definition.
        let mut checked = 2 * mine.len() * n;
        if tid == 0 {
            let pts = self.shape.points();
            for k in (0..pts).step_by(pts / 8 + 3) {
                let ((re, im), mag) = dft_point(pts, k);
                let tol = DFT_TOLERANCE * (1.0 + mag);
                verify::close("fft", "y (re, DFT)", 2 * k, self.y.get(2 * k), re, tol)?;
                verify::close(
                    "fft",
                    "y (im, DFT)",
                    2 * k + 1,
                    self.y.get(2 * k + 1),
                    im,
                    tol,
                )?;
                checked += 2;
            }
        }
        Ok(checked as u64)
    }

    fn window(&self) -> &ComputeWindow {
        &self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_six_steps_give_the_dft() {
        let s = FftShape { m: 6 };
        let y = sequential(s);
        for k in 0..s.points() {
            let ((re, im), mag) = dft_point(s.points(), k);
            let tol = DFT_TOLERANCE * (1.0 + mag);
            verify::close("fft", "re", k, y[2 * k], re, tol).unwrap();
            verify::close("fft", "im", k, y[2 * k + 1], im, tol).unwrap();
        }
    }

    #[test]
    fn a_wrong_point_is_caught_by_the_dft_check() {
        let s = FftShape { m: 6 };
        let y = sequential(s);
        let ((re, _), mag) = dft_point(s.points(), 5);
        // One input term's worth off: the smallest error a wrong point has.
        let wrong = y[10] + 1.0 / s.points() as f64;
        assert!(verify::close("fft", "re", 5, wrong, re, DFT_TOLERANCE * (1.0 + mag)).is_err());
    }
}
