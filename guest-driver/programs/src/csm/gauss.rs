//! Gaussian elimination with back-substitution (seed 000 s.3.2's Gauss):
//! rows dealt out cyclically; the owner of row k sets flag k once row k is
//! final, and every thread waits for it before eliminating its rows with it.
//! Thread 0 back-substitutes; every thread compares the solution with a
//! sequential run, bit for bit (the same operations in the same order).
//! Each row starts on a page of its own, so a row's page has one writer.

use dsm_core::{Dsm, DsmError, SharedArray};

use super::error::AppError;
use super::workload::ComputeWindow;

pub struct GaussData {
    a: SharedArray<f64>,
    x: SharedArray<f64>,
    n: usize,
    /// Elements from one row to the next: n + 1 rounded up to whole pages.
    stride: usize,
    /// The node's counters at the end of the computation.
    pub window: ComputeWindow,
}

/// Elements from one row to the next: n + 1 rounded up to whole pages.
fn stride(n: usize, ps: usize) -> usize {
    ((n + 1) * 8).div_ceil(ps) * ps / 8
}

/// Heap bytes the matrix and the solution take.
pub fn heap_bytes(n: usize, ps: usize) -> usize {
    n * stride(n, ps) * 8 + (n * 8).div_ceil(ps) * ps
}

pub fn setup(csm: &Dsm, n: usize) -> Result<GaussData, DsmError> {
    let ps = csm.page_size() as usize;
    let stride = stride(n, ps);
    Ok(GaussData {
        a: csm.alloc(n * stride, true)?,
        x: csm.alloc(n, true)?,
        n,
        stride,
        window: ComputeWindow::default(),
    })
}

fn init(i: usize, j: usize, n: usize) -> f64 {
    let r = ((i * 7919 + j * 104_729) % 1009) as f64 / 1009.0;
    if i == j {
        r + n as f64
    } else {
        r
    }
}

/// Eliminate column `k` from `row` with the pivot row (both whole rows of
/// n + 1 elements): the same operations in the same order in both versions,
/// on slices the compiler can vectorise.
fn eliminate(row: &mut [f64], pivot: &[f64], k: usize) {
    let f = row[k] / pivot[k];
    for (x, p) in row[k..].iter_mut().zip(&pivot[k..]) {
        *x -= f * p;
    }
}

pub fn sequential(n: usize) -> Vec<f64> {
    let w = n + 1;
    let mut a: Vec<f64> = (0..n * w).map(|k| init(k / w, k % w, n)).collect();
    super::seq_timing::compute_begins();
    for k in 0..n {
        for i in k + 1..n {
            let (above, from_i) = a.split_at_mut(i * w);
            eliminate(&mut from_i[..w], &above[k * w..(k + 1) * w], k);
        }
    }
    back_substitute(n, |i, j| a[i * w + j])
}

fn back_substitute(n: usize, a: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let mut s = a(i, n);
        for (j, xj) in x.iter().enumerate().skip(i + 1) {
            s -= a(i, j) * xj;
        }
        x[i] = s / a(i, i);
    }
    x
}

pub fn run(csm: &Dsm, d: &GaussData, tid: usize) -> Result<u64, AppError> {
    let p = (csm.nodes() * csm.threads()) as usize;
    let (n, a) = (d.n, d.a);
    let (w, r) = (n + 1, d.stride);
    let mine = |i: usize| i % p == tid;
    // Each row's owner initialises it and is its home. Seed 000 Table IV's
    // 4.5K migrations suggest the paper's master initialised the matrix,
    // but its 3.6K CSM-DMS diffs do not: here a master-initialised matrix
    // costs a diff per row per pivot (543K at 32 processors) and CSM-ADB's
    // migrations then fetch more than CSM-DMS (docs/applications.md, "Data
    // placement").
    for i in (0..n).filter(|&i| mine(i)) {
        for j in 0..w {
            a.set(i * r + j, init(i, j, n));
        }
    }
    csm.barrier()?;
    csm.mark_start();
    for k in 0..n {
        if mine(k) {
            csm.flag_set(u32::try_from(k).expect("a row number fits u32"), 1)?;
        } else {
            csm.flag_wait(u32::try_from(k).expect("a row number fits u32"))?;
        }
        for i in (k + 1..n).filter(|&i| mine(i)) {
            // SAFETY: row k is final (its owner set flag k after its last
            // write) and only read from now on; row i is this thread's, and
            // nobody else reads it before this thread sets flag i. The
            // slices end before the poll and the next flag wait.
            let (row, pivot) = unsafe {
                (
                    a.as_mut_slice(i * r..i * r + w),
                    a.as_slice(k * r..k * r + w),
                )
            };
            eliminate(row, pivot, k);
            // A loop back edge: answer a request for a finished row now.
            csm.poll()?;
        }
    }
    csm.barrier()?;
    if tid == 0 {
        let x = back_substitute(n, |i, j| a.get(i * r + j));
        for (i, v) in x.iter().enumerate() {
            d.x.set(i, *v);
        }
    }
    // End of the computation; the node's counters are kept before checking.
    d.window.end(csm, tid)?;
    let want = sequential(n);
    for (i, wv) in want.iter().enumerate() {
        let v = d.x.get(i);
        if v.to_bits() != wv.to_bits() {
            return Err(AppError::Gauss {
                index: i,
                got: v,
                want: *wv,
            });
        }
    }
    Ok(n as u64)
}
