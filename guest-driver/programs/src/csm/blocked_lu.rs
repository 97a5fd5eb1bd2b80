//! Blocked LU factorisation without pivoting, as SPLASH-2's LU kernels do
//! it (seed 000 s.3.2: CLU and LU): the matrix is cut into B x B tiles,
//! tiles are owned by processors in a 2-D grid, and step k factors the
//! diagonal tile (its owner), then the perimeter tiles of row k and column
//! k (their owners), then every interior tile (its owner), with a barrier
//! between the phases. CLU (`clu.rs`) and LU (`lu.rs`) differ only in where
//! a tile's elements live: CLU stores each tile contiguously and each
//! processor's tiles together, LU stores the matrix column by column, so a
//! page holds pieces of many processors' tiles.
//!
//! The parallel program applies the same kernels in the same order to each
//! tile as the sequential one, so the factors are compared bit for bit.

use std::ops::Range;
use std::sync::OnceLock;

use cashmere::{Csm, SharedArray};

use super::error::AppError;
use super::verify;
use super::workload::{ComputeWindow, Workload};

/// Where element (i, j) of the matrix lives in the array.
pub trait TileLayout: Send + Sync {
    fn index(&self, i: usize, j: usize) -> usize;
    /// Elements the array needs.
    fn elements(&self) -> usize;
}

/// Matrix side, tile side, tiles per side.
#[derive(Clone, Copy, Debug)]
pub struct Tiles {
    pub n: usize,
    pub b: usize,
    pub nb: usize,
}

impl Tiles {
    pub fn new(n: usize, b: usize) -> Tiles {
        Tiles {
            n,
            b,
            nb: n.div_ceil(b),
        }
    }
    /// Rows (or columns) of tile `t`; the last may be short.
    pub fn range(&self, t: usize) -> Range<usize> {
        t * self.b..((t + 1) * self.b).min(self.n)
    }
}

/// Tile owners: processors in a `rows x cols` grid; tile column J goes to
/// the `rows` consecutive processors starting at `(J % cols) * rows`, and
/// tile (I, J) to the `I % rows`-th of them (seed 000 s.3.2 footnote 2:
/// "assign each column of tiles to a contiguous set of processors").
#[derive(Clone, Copy, Debug)]
pub struct Owners {
    pub rows: usize,
    pub cols: usize,
}

impl Owners {
    /// SPLASH-2's default grid: rows the largest divisor of `p` not above
    /// its square root.
    pub fn square(p: usize) -> Owners {
        let rows = (1..=p)
            .filter(|r| p % r == 0 && r * r <= p)
            .max()
            .unwrap_or(1);
        Owners {
            rows,
            cols: p / rows,
        }
    }
    /// `rows` processors per tile column (LU: the threads of one node).
    pub fn with_rows(p: usize, rows: usize) -> Owners {
        let rows = if rows > 0 && p % rows == 0 { rows } else { 1 };
        Owners {
            rows,
            cols: p / rows,
        }
    }
    pub fn owner(&self, ti: usize, tj: usize) -> usize {
        (tj % self.cols) * self.rows + ti % self.rows
    }
}

/// The matrix: diagonally dominant, so no pivoting is needed.
pub fn init(i: usize, j: usize, n: usize) -> f64 {
    let r = ((i * 7919 + j * 104_729) % 1009) as f64 / 1009.0;
    if i == j {
        r + n as f64
    } else {
        r
    }
}

/// Element access the kernels need: the shared array or a plain vector.
trait Matrix {
    fn at(&self, i: usize, j: usize) -> f64;
    fn put(&mut self, i: usize, j: usize, v: f64);
}

struct Shared<'a> {
    a: SharedArray<f64>,
    layout: &'a dyn TileLayout,
}

impl Matrix for Shared<'_> {
    fn at(&self, i: usize, j: usize) -> f64 {
        self.a.get(self.layout.index(i, j))
    }
    fn put(&mut self, i: usize, j: usize, v: f64) {
        self.a.set(self.layout.index(i, j), v)
    }
}

/// Column-major `Vec`, for the sequential run.
struct Local {
    a: Vec<f64>,
    n: usize,
}

impl Matrix for Local {
    fn at(&self, i: usize, j: usize) -> f64 {
        self.a[j * self.n + i]
    }
    fn put(&mut self, i: usize, j: usize, v: f64) {
        self.a[j * self.n + i] = v
    }
}

/// Factor diagonal tile k in place (L unit lower, U upper).
fn factor_diagonal(m: &mut impl Matrix, t: &Tiles, k: usize) {
    let r = t.range(k);
    for j in r.clone() {
        let pivot = m.at(j, j);
        for i in j + 1..r.end {
            let l = m.at(i, j) / pivot;
            m.put(i, j, l);
            for c in j + 1..r.end {
                m.put(i, c, m.at(i, c) - l * m.at(j, c));
            }
        }
    }
}

/// Tile (k, tj) := L_kk^-1 * tile (k, tj).
fn solve_row(m: &mut impl Matrix, t: &Tiles, k: usize, tj: usize) {
    let rk = t.range(k);
    for c in t.range(tj) {
        for j in rk.clone() {
            let v = m.at(j, c);
            for i in j + 1..rk.end {
                m.put(i, c, m.at(i, c) - m.at(i, j) * v);
            }
        }
    }
}

/// Tile (ti, k) := tile (ti, k) * U_kk^-1.
fn solve_column(m: &mut impl Matrix, t: &Tiles, ti: usize, k: usize) {
    let rk = t.range(k);
    for r in t.range(ti) {
        for j in rk.clone() {
            let v = m.at(r, j) / m.at(j, j);
            m.put(r, j, v);
            for c in j + 1..rk.end {
                m.put(r, c, m.at(r, c) - v * m.at(j, c));
            }
        }
    }
}

/// Tile (ti, tj) -= tile (ti, k) * tile (k, tj).
fn update(m: &mut impl Matrix, t: &Tiles, ti: usize, tj: usize, k: usize) {
    let rk = t.range(k);
    for i in t.range(ti) {
        for j in t.range(tj) {
            let mut s = m.at(i, j);
            for l in rk.clone() {
                s -= m.at(i, l) * m.at(l, j);
            }
            m.put(i, j, s);
        }
    }
}

/// The sequential factorisation: the same kernels, step by step. Returns the
/// factors column-major (L below the diagonal, U on and above).
pub fn sequential(n: usize, b: usize) -> Vec<f64> {
    let t = Tiles::new(n, b);
    let mut m = Local {
        a: (0..n * n).map(|k| init(k % n, k / n, n)).collect(),
        n,
    };
    super::seq_timing::compute_begins();
    for k in 0..t.nb {
        factor_diagonal(&mut m, &t, k);
        for tj in k + 1..t.nb {
            solve_row(&mut m, &t, k, tj);
        }
        for ti in k + 1..t.nb {
            solve_column(&mut m, &t, ti, k);
        }
        for ti in k + 1..t.nb {
            for tj in k + 1..t.nb {
                update(&mut m, &t, ti, tj, k);
            }
        }
    }
    m.a
}

/// A blocked LU run on Cashmere with a given layout and owner grid.
pub struct BlockedLu<L: TileLayout> {
    pub app: &'static str,
    pub tiles: Tiles,
    pub owners: Owners,
    pub layout: L,
    pub a: SharedArray<f64>,
    reference: OnceLock<Vec<f64>>,
    window: ComputeWindow,
}

impl<L: TileLayout> BlockedLu<L> {
    pub fn new(
        app: &'static str,
        tiles: Tiles,
        owners: Owners,
        layout: L,
        a: SharedArray<f64>,
    ) -> Self {
        BlockedLu {
            app,
            tiles,
            owners,
            layout,
            a,
            reference: OnceLock::new(),
            window: ComputeWindow::default(),
        }
    }

    fn mine(&self, tid: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let nb = self.tiles.nb;
        (0..nb)
            .flat_map(move |tj| (0..nb).map(move |ti| (ti, tj)))
            .filter(move |&(ti, tj)| self.owners.owner(ti, tj) == tid)
    }
}

impl<L: TileLayout> Workload for BlockedLu<L> {
    fn run(&self, csm: &Csm, tid: usize) -> Result<u64, AppError> {
        let t = self.tiles;
        let n = t.n;
        let mut m = Shared {
            a: self.a,
            layout: &self.layout,
        };
        // As SPLASH-2's LU and contiguous-block LU, whose main process
        // initialises the whole matrix (InitA) before the others start:
        // first touch makes processor 0's node the home of every page, the
        // writers of other nodes diff into it, and migration (the -Mg
        // variants) moves homes to them (seed 000 Table IV: 5.5K and 3.5K
        // migrations at 32 processors, LU's diffs from 285.6K to 1.1K).
        if tid == 0 {
            for j in 0..n {
                for i in 0..n {
                    m.put(i, j, init(i, j, n));
                }
            }
        }
        csm.barrier()?;
        csm.mark_start();
        let own = |ti, tj| self.owners.owner(ti, tj) == tid;
        for k in 0..t.nb {
            if own(k, k) {
                factor_diagonal(&mut m, &t, k);
            }
            csm.barrier()?;
            for tj in k + 1..t.nb {
                if own(k, tj) {
                    solve_row(&mut m, &t, k, tj);
                }
            }
            for ti in k + 1..t.nb {
                if own(ti, k) {
                    solve_column(&mut m, &t, ti, k);
                }
            }
            csm.barrier()?;
            for tj in k + 1..t.nb {
                for ti in k + 1..t.nb {
                    if own(ti, tj) {
                        update(&mut m, &t, ti, tj, k);
                        // A loop back edge (seed 000 s.2.1's polling).
                        csm.poll()?;
                    }
                }
            }
        }
        self.window.end(csm, tid)?;
        // Each processor checks its own tiles: every element once.
        let want = self.reference.get_or_init(|| sequential(n, t.b));
        let mut checked = 0;
        for (ti, tj) in self.mine(tid) {
            for j in t.range(tj) {
                for i in t.range(ti) {
                    verify::exact(self.app, "factor", j * n + i, m.at(i, j), want[j * n + i])?;
                    checked += 1;
                }
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

    #[test]
    fn factors_multiply_back_to_the_matrix() {
        for (n, b) in [(20, 4), (23, 5), (16, 16)] {
            let f = sequential(n, b);
            for i in 0..n {
                for j in 0..n {
                    let mut s = 0.0;
                    for k in 0..=i.min(j) {
                        let l = if k == i { 1.0 } else { f[k * n + i] };
                        s += l * f[j * n + k];
                    }
                    assert!((s - init(i, j, n)).abs() < 1e-9, "({i},{j}) n {n} b {b}");
                }
            }
        }
    }

    #[test]
    fn owner_grids() {
        let o = Owners::square(8);
        assert_eq!((o.rows, o.cols), (2, 4));
        // A tile column goes to consecutive processors.
        assert_eq!(o.owner(0, 1), 2);
        assert_eq!(o.owner(1, 1), 3);
        assert_eq!(o.owner(2, 5), 2);
        let o = Owners::with_rows(4, 2);
        assert_eq!((o.rows, o.cols), (2, 2));
        let o = Owners::with_rows(3, 2);
        assert_eq!((o.rows, o.cols), (1, 3));
    }
}
