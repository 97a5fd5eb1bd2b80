//! Red-black successive over-relaxation (seed 000 s.3.2's SOR, from the
//! TreadMarks distribution), laid out as the original is: the red points and
//! the black points in two separate arrays, so each colour's update writes
//! one array contiguously (a band's diff is one run per page) and reads only
//! the other. Rows are split into bands, one per thread, with a barrier after
//! each colour. A band starts on a page boundary where whole rows tile pages
//! (the paper's rows of 4096 floats are two pages each), so no page holds
//! two threads' rows: a neighbour then only reads the boundary row's page,
//! and nobody writes a page another node is home of (no twins or diffs). The grid may be rectangular; `Grid::PAPER` is the paper's
//! 3072 x 4096 (Table III).
//!
//! The result is compared element by element with a sequential run of the
//! same arithmetic: red-black order makes it bit-for-bit the same.

use std::sync::OnceLock;

use dsm_core::{Dsm, DsmError, SharedArray};

use super::error::AppError;

/// A grid of `rows` interior rows (plus a fixed boundary row above and
/// below) by `cols` columns (the first and last fixed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    pub rows: usize,
    pub cols: usize,
}

impl Grid {
    /// The paper's SOR (seed 000, Table III: 3072 x 4096; single precision
    /// there, 50 MB; double here, 96 MiB).
    pub const PAPER: Grid = Grid {
        rows: 3072,
        cols: 4096,
    };

    /// Points per row of each colour's array.
    pub fn half(&self) -> usize {
        self.cols.div_ceil(2)
    }

    /// Elements of each colour's array, boundary rows included.
    pub fn colour_len(&self) -> usize {
        (self.rows + 2) * self.half()
    }

    /// Bytes of both colours' arrays: the shared data.
    pub fn bytes(&self) -> usize {
        2 * self.colour_len() * std::mem::size_of::<f64>()
    }
}

/// The shared grid of one run, and its sequential result (computed once per
/// node, when the first thread checks).
pub struct SorData {
    /// `colour[c]`: the points (i, j) with (i + j) % 2 == c, row by row, j / 2
    /// within a row.
    colour: [SharedArray<f64>; 2],
    grid: Grid,
    iters: u32,
    want: OnceLock<[Vec<f64>; 2]>,
    pub window: super::workload::ComputeWindow,
}

pub fn setup(csm: &Dsm, grid: Grid, iters: u32) -> Result<SorData, DsmError> {
    Ok(SorData {
        colour: [
            csm.alloc(grid.colour_len(), true)?,
            csm.alloc(grid.colour_len(), true)?,
        ],
        grid,
        iters,
        want: OnceLock::new(),
        window: Default::default(),
    })
}

fn init(i: usize, j: usize, rows: usize) -> f64 {
    if i == 0 {
        1.0
    } else if i == rows + 1 {
        0.0
    } else {
        ((i * 31 + j * 17) % 97) as f64 / 97.0
    }
}

/// Thread `tid`'s rows of `p` threads' bands. A band's first row is moved
/// down to the next row that starts a page (row `i` starts at byte
/// `i * row_bytes` of its colour array, which starts a page) when such rows
/// come at most every `rows / (2p)` rows; otherwise the bands are even.
fn band(
    tid: usize,
    p: usize,
    rows: usize,
    row_bytes: usize,
    page: usize,
) -> std::ops::Range<usize> {
    let even = |t: usize| 1 + t * rows / p;
    // Rows from one page-aligned row to the next.
    let unit = page / gcd(page, row_bytes);
    let start = |t: usize| {
        if t == 0 || t == p || unit > rows / (2 * p).max(1) {
            even(t)
        } else {
            even(t).next_multiple_of(unit).min(rows + 1)
        }
    };
    start(tid)..start(tid + 1)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Where point (i, j) is: its colour and its index in that colour's array.
fn at(g: Grid, i: usize, j: usize) -> (usize, usize) {
    ((i + j) % 2, i * g.half() + j / 2)
}

/// Relax the interior points of row `i` of colour `c` (`out`, that row of
/// its colour's array) from their four neighbours, all of the other colour:
/// rows i - 1, i and i + 1 of its array (`up`, `same`, `down`). Point (i, j)
/// is element j / 2 of its row, and its left and right neighbours are
/// elements (j - 1) / 2 and (j + 1) / 2 of `same`, so the t-th point of the
/// row reads `same[t]` and `same[t + 1]` whichever colour starts the row.
/// The same operations in the same order in every SOR version here, so
/// results agree bit for bit; slices, so the compiler can vectorise it.
fn relax_row(g: Grid, i: usize, c: usize, rows: [&[f64]; 3], out: &mut [f64]) {
    let [up, same, down] = rows;
    let first = if (i + 1) % 2 == c { 1 } else { 2 };
    let end = g.cols.saturating_sub(1);
    let n = if end > first {
        (end - first).div_ceil(2)
    } else {
        0
    };
    let k = first / 2..first / 2 + n;
    for (((o, u), d), w) in out[k.clone()]
        .iter_mut()
        .zip(&up[k.clone()])
        .zip(&down[k])
        .zip(same[..n + 1].windows(2))
    {
        *o = (*u + *d + w[0] + w[1]) * 0.25;
    }
}

/// Relax rows `rows` of colour `c`: `mine` holds those rows of its colour's
/// array, `other` the other colour's rows from `rows.start - 1` to
/// `rows.end` inclusive (each row's neighbours above and below).
/// `each_row` runs after each row (the parallel run polls there, a loop
/// back edge of seed 000 s.2.1). The kernel of both the sequential and the
/// parallel run, so they do the same work per row.
fn relax_rows<E>(
    g: Grid,
    c: usize,
    rows: std::ops::Range<usize>,
    other: &[f64],
    mine: &mut [f64],
    mut each_row: impl FnMut() -> Result<(), E>,
) -> Result<(), E> {
    let h = g.half();
    for ((i, out), near) in rows
        .zip(mine.chunks_exact_mut(h))
        .zip(other.windows(3 * h).step_by(h))
    {
        relax_row(g, i, c, [&near[..h], &near[h..2 * h], &near[2 * h..]], out);
        each_row()?;
    }
    Ok(())
}

/// The sequential SOR on plain vectors, same layout: the reference result
/// and the `--sequential` timing.
pub fn sequential(g: Grid, iters: u32) -> [Vec<f64>; 2] {
    let mut colour = [vec![0.0; g.colour_len()], vec![0.0; g.colour_len()]];
    for i in 0..g.rows + 2 {
        for j in 0..g.cols {
            let (c, k) = at(g, i, j);
            colour[c][k] = init(i, j, g.rows);
        }
    }
    super::seq_timing::compute_begins();
    for _ in 0..iters {
        for c in 0..2 {
            let [red, black] = &mut colour;
            let (mine, other) = if c == 0 {
                (red, &*black)
            } else {
                (black, &*red)
            };
            let h = g.half();
            let Ok(()) = relax_rows(
                g,
                c,
                1..g.rows + 1,
                other,
                &mut mine[h..(g.rows + 1) * h],
                || Ok::<(), std::convert::Infallible>(()),
            );
        }
    }
    colour
}

/// Returns the number of elements checked.
pub fn run(csm: &Dsm, d: &SorData, tid: usize) -> Result<u64, AppError> {
    let p = (csm.nodes() * csm.threads()) as usize;
    let g = d.grid;
    let row_bytes = g.half() * std::mem::size_of::<f64>();
    let mine = band(tid, p, g.rows, row_bytes, csm.page_size() as usize);
    // First touch: each thread initialises its band, so it is the band's home.
    let mut init_rows: Vec<usize> = mine.clone().collect();
    if tid == 0 {
        init_rows.push(0);
    }
    if tid == p - 1 {
        init_rows.push(g.rows + 1);
    }
    for &i in &init_rows {
        for j in 0..g.cols {
            let (c, k) = at(g, i, j);
            d.colour[c].set(k, init(i, j, g.rows));
        }
    }
    csm.barrier()?;
    csm.mark_start();
    for _ in 0..d.iters {
        for c in 0..2 {
            let (dst, src) = (d.colour[c], d.colour[1 - c]);
            let h = g.half();
            if !mine.is_empty() {
                // SAFETY: red-black order: during colour c's phase nobody
                // writes the other colour's array (its rows are read), and
                // the rows of colour c in this thread's band are touched by
                // nobody else in this phase; the slices end before the
                // barrier. They live across the polls: a poll answers
                // other nodes' requests and is no synchronisation, so what
                // the rows hold does not change there.
                let (other, out) = unsafe {
                    (
                        src.as_slice((mine.start - 1) * h..(mine.end + 1) * h),
                        dst.as_mut_slice(mine.start * h..mine.end * h),
                    )
                };
                relax_rows(g, c, mine.clone(), other, out, || csm.poll())?;
            }
            csm.barrier()?;
        }
    }
    // The node's counters are kept before verification reads every row.
    d.window.end(csm, tid)?;
    let want = d.want.get_or_init(|| sequential(g, d.iters));
    let mut checked = 0u64;
    for i in 0..g.rows + 2 {
        for j in 0..g.cols {
            let (c, k) = at(g, i, j);
            let (v, w) = (d.colour[c].get(k), want[c][k]);
            if v.to_bits() != w.to_bits() {
                return Err(AppError::Sor {
                    row: i,
                    col: j,
                    got: v,
                    want: w,
                });
            }
            checked += 1;
        }
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The red-black layout computes exactly what the textbook one-array
    /// red-black SOR does.
    #[test]
    fn two_colour_arrays_give_the_one_array_result() {
        let g = Grid { rows: 7, cols: 10 };
        let iters = 5;
        let mut one: Vec<f64> = (0..(g.rows + 2) * g.cols)
            .map(|k| init(k / g.cols, k % g.cols, g.rows))
            .collect();
        for _ in 0..iters {
            for c in 0..2 {
                for i in 1..g.rows + 1 {
                    for j in 1..g.cols - 1 {
                        if (i + j) % 2 == c {
                            let v = |a: usize, b: usize| one[a * g.cols + b];
                            one[i * g.cols + j] =
                                (v(i - 1, j) + v(i + 1, j) + v(i, j - 1) + v(i, j + 1)) * 0.25;
                        }
                    }
                }
            }
        }
        let two = sequential(g, iters);
        for i in 0..g.rows + 2 {
            for j in 0..g.cols {
                let (c, k) = at(g, i, j);
                assert_eq!(
                    two[c][k].to_bits(),
                    one[i * g.cols + j].to_bits(),
                    "({i}, {j})"
                );
            }
        }
    }

    /// Bands cover every interior row once, in order, and start on a page
    /// where rows tile pages.
    #[test]
    fn bands_tile_the_rows_and_start_on_pages_where_they_can() {
        for (rows, cols, p) in [
            (512, 512, 2),
            (512, 512, 4),
            (2048, 2048, 4),
            (37, 100, 3),
            (10, 512, 8),
            (3072, 4096, 32),
            (100, 3000, 2),
        ] {
            let g = Grid { rows, cols };
            let rb = g.half() * 8;
            let mut next = 1;
            for t in 0..p {
                let b = band(t, p, rows, rb, 8192);
                assert_eq!(b.start, next, "{rows}x{cols} on {p}: band {t}");
                assert!(b.start <= b.end);
                if t > 0 && rb * 4 == 8192 && rows >= 16 * p {
                    assert_eq!(
                        b.start * rb % 8192,
                        0,
                        "{rows}x{cols} on {p}: band {t} at row {}",
                        b.start
                    );
                }
                next = b.end;
            }
            assert_eq!(next, rows + 1);
        }
    }

    #[test]
    fn the_paper_grid_is_96_mib_of_doubles() {
        assert_eq!(Grid::PAPER.bytes(), 2 * 3074 * 2048 * 8);
        assert_eq!(Grid::PAPER.half(), 2048);
    }
}
