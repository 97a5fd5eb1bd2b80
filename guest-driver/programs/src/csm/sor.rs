//! Red-black successive over-relaxation (seed 000 s.3.2's SOR): rows split
//! into bands, one per thread, a barrier after each colour. The result is
//! compared element by element with a sequential run: red-black order makes
//! it bit-for-bit the same.

use cashmere::{Csm, CsmError, SharedArray};

use super::AppError;

pub struct SorData {
    g: SharedArray<f64>,
    rows: usize,
    cols: usize,
}

pub fn setup(csm: &Csm, rows: usize, cols: usize) -> Result<SorData, CsmError> {
    Ok(SorData {
        g: csm.alloc((rows + 2) * cols, true)?,
        rows,
        cols,
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

fn band(tid: usize, p: usize, rows: usize) -> std::ops::Range<usize> {
    1 + tid * rows / p..1 + (tid + 1) * rows / p
}

/// One colour's update of element (i, j), reading through `get`.
fn update(get: impl Fn(usize, usize) -> f64, i: usize, j: usize) -> f64 {
    (get(i - 1, j) + get(i + 1, j) + get(i, j - 1) + get(i, j + 1)) * 0.25
}

pub fn sequential(rows: usize, cols: usize, iters: u32) -> Vec<f64> {
    let mut g: Vec<f64> = (0..(rows + 2) * cols)
        .map(|k| init(k / cols, k % cols, rows))
        .collect();
    for _ in 0..iters {
        for colour in 0..2 {
            for i in 1..rows + 1 {
                for j in 1..cols - 1 {
                    if (i + j) % 2 == colour {
                        g[i * cols + j] = update(|a, b| g[a * cols + b], i, j);
                    }
                }
            }
        }
    }
    g
}

/// Returns the number of elements checked.
pub fn run(csm: &Csm, d: &SorData, tid: usize, iters: u32) -> Result<u64, AppError> {
    let p = (csm.nodes() * csm.threads()) as usize;
    let (rows, cols, g) = (d.rows, d.cols, d.g);
    let mine = band(tid, p, rows);
    // First touch: each thread initialises its band, so it is the band's home.
    let mut init_rows: Vec<usize> = mine.clone().collect();
    if tid == 0 {
        init_rows.push(0);
    }
    if tid == p - 1 {
        init_rows.push(rows + 1);
    }
    for &i in &init_rows {
        for j in 0..cols {
            g.set(i * cols + j, init(i, j, rows));
        }
    }
    csm.barrier()?;
    csm.mark_start();
    for _ in 0..iters {
        for colour in 0..2 {
            for i in mine.clone() {
                for j in 1..cols - 1 {
                    if (i + j) % 2 == colour {
                        g.set(i * cols + j, update(|a, b| g.get(a * cols + b), i, j));
                    }
                }
            }
            csm.barrier()?;
        }
    }
    csm.mark_end();
    let want = sequential(rows, cols, iters);
    for (k, w) in want.iter().enumerate() {
        let v = g.get(k);
        if v.to_bits() != w.to_bits() {
            return Err(AppError::Sor {
                row: k / cols,
                col: k % cols,
                got: v,
                want: *w,
            });
        }
    }
    Ok(want.len() as u64)
}
