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

use dsm_core::{Dsm, SharedArray};

use super::error::AppError;
use super::verify;
use super::workload::{ComputeWindow, Workload};

/// Where element (i, j) of the matrix lives in the array, and its tiles as
/// plain slices for the kernels.
pub trait TileLayout: Send + Sync {
    /// A tile the kernels read.
    type Ref<'a>: Tile
    where
        Self: 'a;
    /// A tile the kernels write.
    type Mut<'a>: TileMut
    where
        Self: 'a;
    fn index(&self, i: usize, j: usize) -> usize;
    /// Elements the array needs.
    fn elements(&self) -> usize;
    /// The sequential program on this layout's tiles (the factors
    /// column-major, the same for every layout).
    fn sequential(t: Tiles) -> Vec<f64>
    where
        Self: Sized;
    /// Tile (ti, tj) of `a` for reading.
    ///
    /// # Safety
    ///
    /// As [`SharedArray::as_slice`] for every element of the tile: nobody
    /// writes the tile while the view lives, and the caller makes no
    /// synchronisation call meanwhile.
    unsafe fn tile<'a>(&'a self, a: &'a SharedArray<f64>, ti: usize, tj: usize) -> Self::Ref<'a>;
    /// Tile (ti, tj) of `a` for writing.
    ///
    /// # Safety
    ///
    /// As [`SharedArray::as_mut_slice`] for every element of the tile: the
    /// calling thread alone touches the tile while the view lives, and makes
    /// no synchronisation call meanwhile.
    unsafe fn tile_mut<'a>(
        &'a self,
        a: &'a SharedArray<f64>,
        ti: usize,
        tj: usize,
    ) -> Self::Mut<'a>;
}

/// A tile's elements, (i, j) counted from its top left corner.
pub trait Tile {
    fn at(&self, i: usize, j: usize) -> f64;
}

/// A tile the kernel writes.
pub trait TileMut: Tile {
    fn put(&mut self, i: usize, j: usize, v: f64);
}

/// A tile of a column-major matrix: column j of the tile is `self.0[j]`
/// (LU's layout, and the sequential program's).
pub struct Cols<S>(pub Vec<S>);

impl<S: AsRef<[f64]>> Tile for Cols<S> {
    #[inline]
    fn at(&self, i: usize, j: usize) -> f64 {
        self.0[j].as_ref()[i]
    }
}

impl TileMut for Cols<&mut [f64]> {
    #[inline]
    fn put(&mut self, i: usize, j: usize, v: f64) {
        self.0[j][i] = v
    }
}

/// A contiguous row-major tile of `b` columns (CLU's layout).
pub struct Block<S> {
    pub d: S,
    pub b: usize,
}

impl<S: AsRef<[f64]>> Tile for Block<S> {
    #[inline]
    fn at(&self, i: usize, j: usize) -> f64 {
        self.d.as_ref()[i * self.b + j]
    }
}

impl TileMut for Block<&mut [f64]> {
    #[inline]
    fn put(&mut self, i: usize, j: usize, v: f64) {
        self.d[i * self.b + j] = v
    }
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

/// Factor a diagonal tile of side `nk` in place (L unit lower, U upper).
fn factor_diagonal(d: &mut impl TileMut, nk: usize) {
    for j in 0..nk {
        let pivot = d.at(j, j);
        for i in j + 1..nk {
            let l = d.at(i, j) / pivot;
            d.put(i, j, l);
            for c in j + 1..nk {
                d.put(i, c, d.at(i, c) - l * d.at(j, c));
            }
        }
    }
}

/// Tile (k, tj) `a`, `cols` wide := L_kk^-1 * a, with `d` the factored
/// diagonal tile of side `nk`.
fn solve_row(a: &mut impl TileMut, d: &impl Tile, nk: usize, cols: usize) {
    for c in 0..cols {
        for j in 0..nk {
            let v = a.at(j, c);
            for i in j + 1..nk {
                a.put(i, c, a.at(i, c) - d.at(i, j) * v);
            }
        }
    }
}

/// Tile (ti, k) `a`, `rows` high := a * U_kk^-1.
fn solve_column(a: &mut impl TileMut, d: &impl Tile, nk: usize, rows: usize) {
    for r in 0..rows {
        for j in 0..nk {
            let v = a.at(r, j) / d.at(j, j);
            a.put(r, j, v);
            for c in j + 1..nk {
                a.put(r, c, a.at(r, c) - v * d.at(j, c));
            }
        }
    }
}

/// Tile (ti, tj) `c`, `rows` x `cols` -= tile (ti, k) `a` * tile (k, tj)
/// `b`, `nk` the side of tile k.
fn update(c: &mut impl TileMut, a: &impl Tile, b: &impl Tile, rows: usize, cols: usize, nk: usize) {
    for i in 0..rows {
        for j in 0..cols {
            let mut s = c.at(i, j);
            for l in 0..nk {
                s -= a.at(i, l) * b.at(l, j);
            }
            c.put(i, j, s);
        }
    }
}

/// Rows `rows` of columns `cols` of the column-major `n`-row matrix `m`.
fn cols_of(m: &[f64], n: usize, cols: Range<usize>, rows: Range<usize>) -> Cols<&[f64]> {
    Cols(
        m[cols.start * n..cols.end * n]
            .chunks(n)
            .map(|c| &c[rows.clone()])
            .collect(),
    )
}

/// Rows `upper` (to read) and `lower` (to write) of columns `cols` of the
/// column-major `n`-row matrix `m`; `upper` ends at or before `lower`
/// starts.
fn split_cols(
    m: &mut [f64],
    n: usize,
    cols: Range<usize>,
    upper: Range<usize>,
    lower: Range<usize>,
) -> (Cols<&[f64]>, Cols<&mut [f64]>) {
    let (mut up, mut low) = (Vec::new(), Vec::new());
    for c in m[cols.start * n..cols.end * n].chunks_mut(n) {
        let (top, bottom) = c.split_at_mut(lower.start);
        up.push(&top[upper.clone()]);
        low.push(&mut bottom[..lower.len()]);
    }
    (Cols(up), Cols(low))
}

/// The sequential factorisation: the same kernels, step by step, on tiles
/// of a column-major `Vec` (LU's layout). Returns the factors column-major
/// (L below the diagonal, U on and above).
pub fn sequential(n: usize, b: usize) -> Vec<f64> {
    let t = Tiles::new(n, b);
    let mut m: Vec<f64> = (0..n * n).map(|k| init(k % n, k / n, n)).collect();
    super::seq_timing::compute_begins();
    for k in 0..t.nb {
        let rk = t.range(k);
        let nk = rk.len();
        {
            let (_, mut d) = split_cols(&mut m, n, rk.clone(), 0..0, rk.clone());
            factor_diagonal(&mut d, nk);
        }
        for tj in k + 1..t.nb {
            let rj = t.range(tj);
            let (left, right) = m.split_at_mut(rj.start * n);
            let d = cols_of(left, n, rk.clone(), rk.clone());
            let (_, mut a) = split_cols(right, n, 0..rj.len(), 0..0, rk.clone());
            solve_row(&mut a, &d, nk, rj.len());
        }
        for ti in k + 1..t.nb {
            let ri = t.range(ti);
            let (d, mut a) = split_cols(&mut m, n, rk.clone(), rk.clone(), ri.clone());
            solve_column(&mut a, &d, nk, ri.len());
        }
        for ti in k + 1..t.nb {
            let ri = t.range(ti);
            for tj in k + 1..t.nb {
                let rj = t.range(tj);
                let (left, right) = m.split_at_mut(rj.start * n);
                let a = cols_of(left, n, rk.clone(), ri.clone());
                let (b, mut c) = split_cols(right, n, 0..rj.len(), rk.clone(), ri.clone());
                update(&mut c, &a, &b, ri.len(), rj.len(), nk);
            }
        }
    }
    m
}

/// The sequential factorisation on contiguous row-major tiles (CLU's
/// layout), each a `Vec` of `b * b`: the same kernels in the same order as
/// [`sequential`], so the same factors bit for bit, returned column-major.
pub fn sequential_blocks(n: usize, b: usize) -> Vec<f64> {
    let t = Tiles::new(n, b);
    let nb = t.nb;
    let mut tiles: Vec<Vec<f64>> = (0..nb * nb)
        .map(|x| {
            let (ti, tj) = (x / nb, x % nb);
            (0..b * b)
                .map(|e| {
                    let (i, j) = (ti * b + e / b, tj * b + e % b);
                    if i < n && j < n {
                        init(i, j, n)
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect();
    let at = |ti: usize, tj: usize| ti * nb + tj;
    super::seq_timing::compute_begins();
    for k in 0..nb {
        let nk = t.range(k).len();
        factor_diagonal(
            &mut Block {
                d: &mut tiles[at(k, k)][..],
                b,
            },
            nk,
        );
        // The tile written is taken out of the store while the kernel runs
        // (a tile never reads itself through the store).
        for tj in k + 1..nb {
            let mut p = std::mem::take(&mut tiles[at(k, tj)]);
            let d = Block {
                d: &tiles[at(k, k)][..],
                b,
            };
            solve_row(&mut Block { d: &mut p[..], b }, &d, nk, t.range(tj).len());
            tiles[at(k, tj)] = p;
        }
        for ti in k + 1..nb {
            let mut p = std::mem::take(&mut tiles[at(ti, k)]);
            let d = Block {
                d: &tiles[at(k, k)][..],
                b,
            };
            solve_column(&mut Block { d: &mut p[..], b }, &d, nk, t.range(ti).len());
            tiles[at(ti, k)] = p;
        }
        for ti in k + 1..nb {
            for tj in k + 1..nb {
                let mut c = std::mem::take(&mut tiles[at(ti, tj)]);
                let pa = Block {
                    d: &tiles[at(ti, k)][..],
                    b,
                };
                let pb = Block {
                    d: &tiles[at(k, tj)][..],
                    b,
                };
                let (rows, cols) = (t.range(ti).len(), t.range(tj).len());
                update(&mut Block { d: &mut c[..], b }, &pa, &pb, rows, cols, nk);
                tiles[at(ti, tj)] = c;
            }
        }
    }
    let mut m = vec![0.0; n * n];
    for (j, col) in m.chunks_mut(n.max(1)).enumerate() {
        for (i, v) in col.iter_mut().enumerate() {
            *v = tiles[at(i / b, j / b)][(i % b) * b + j % b];
        }
    }
    m
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
    fn run(&self, csm: &Dsm, tid: usize) -> Result<u64, AppError> {
        let t = self.tiles;
        let n = t.n;
        let (a, l) = (&self.a, &self.layout);
        // As SPLASH-2's LU and contiguous-block LU, whose main process
        // initialises the whole matrix (InitA) before the others start:
        // first touch makes processor 0's node the home of every page, the
        // writers of other nodes diff into it, and migration (the -Mg
        // variants) moves homes to them (seed 000 Table IV: 5.5K and 3.5K
        // migrations at 32 processors, LU's diffs from 285.6K to 1.1K).
        if tid == 0 {
            for j in 0..n {
                for i in 0..n {
                    a.set(l.index(i, j), init(i, j, n));
                }
            }
        }
        csm.barrier()?;
        csm.mark_start();
        // The kernels run on plain slices of the tiles, as the sequential
        // program's do on its `Vec`. Each view lives for one kernel call,
        // between two synchronisations: a tile is written only by its
        // owner in the phase that writes it, and read by others only in
        // later phases, after a barrier.
        let own = |ti, tj| self.owners.owner(ti, tj) == tid;
        for k in 0..t.nb {
            let nk = t.range(k).len();
            if own(k, k) {
                // SAFETY: the diagonal tile is written by its owner alone
                // in this phase and read by nobody until the barrier.
                let mut d = unsafe { l.tile_mut(a, k, k) };
                factor_diagonal(&mut d, nk);
            }
            csm.barrier()?;
            for tj in k + 1..t.nb {
                if own(k, tj) {
                    // SAFETY: tile (k, tj) is this processor's and nobody
                    // else touches it in this phase; the diagonal tile is
                    // only read until the barrier after the next phase.
                    let (mut p, d) = unsafe { (l.tile_mut(a, k, tj), l.tile(a, k, k)) };
                    solve_row(&mut p, &d, nk, t.range(tj).len());
                }
            }
            for ti in k + 1..t.nb {
                if own(ti, k) {
                    // SAFETY: as for the row perimeter.
                    let (mut p, d) = unsafe { (l.tile_mut(a, ti, k), l.tile(a, k, k)) };
                    solve_column(&mut p, &d, nk, t.range(ti).len());
                }
            }
            csm.barrier()?;
            for tj in k + 1..t.nb {
                for ti in k + 1..t.nb {
                    if own(ti, tj) {
                        // SAFETY: tile (ti, tj) is this processor's, and
                        // nobody else touches it in this phase; the
                        // perimeter tiles are only read until the next
                        // step's barriers. The views end before the poll.
                        let (mut c, pa, pb) =
                            unsafe { (l.tile_mut(a, ti, tj), l.tile(a, ti, k), l.tile(a, k, tj)) };
                        update(&mut c, &pa, &pb, t.range(ti).len(), t.range(tj).len(), nk);
                        // A loop back edge (seed 000 s.2.1's polling).
                        csm.poll()?;
                    }
                }
            }
        }
        self.window.end(csm, tid)?;
        // Each processor checks its own tiles: every element once.
        let want = self.reference.get_or_init(|| L::sequential(t));
        let mut checked = 0;
        for (ti, tj) in self.mine(tid) {
            for j in t.range(tj) {
                for i in t.range(ti) {
                    verify::exact(
                        self.app,
                        "factor",
                        j * n + i,
                        a.get(l.index(i, j)),
                        want[j * n + i],
                    )?;
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
    fn both_layouts_factor_bit_for_bit_alike() {
        for (n, b) in [(20, 4), (23, 5), (16, 16), (7, 3)] {
            let (cols, blocks) = (sequential(n, b), sequential_blocks(n, b));
            assert_eq!(cols.len(), blocks.len());
            for (k, (x, y)) in cols.iter().zip(&blocks).enumerate() {
                assert_eq!(x.to_bits(), y.to_bits(), "element {k}, n {n} b {b}");
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
