//! Travelling salesman by branch and bound (seed 000 s.3.2's TSP): partial
//! tours of three cities form a work queue taken under lock 0; the best tour
//! is kept under lock 1 and bounds the search. The optimum is compared with
//! a sequential branch and bound, and the tour found is checked.

use dsm_core::{Dsm, DsmError, SharedArray};

use super::error::AppError;
use super::workload::ComputeWindow;

pub struct TspData {
    dist: SharedArray<u32>,
    next: SharedArray<u32>,
    best: SharedArray<u32>,
    path: SharedArray<u32>,
    cities: usize,
    /// The node's counters at the end of the computation.
    pub window: ComputeWindow,
}

pub fn setup(csm: &Dsm, cities: usize) -> Result<TspData, DsmError> {
    Ok(TspData {
        dist: csm.alloc(cities * cities, true)?,
        next: csm.alloc(1, true)?,
        best: csm.alloc(1, false)?,
        path: csm.alloc(cities, false)?,
        cities,
        window: ComputeWindow::default(),
    })
}

pub fn distances(c: usize) -> Vec<u32> {
    let mut s = 12_345u64;
    let mut pts = Vec::new();
    for _ in 0..c {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let x = (s >> 33) % 1000;
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let y = (s >> 33) % 1000;
        pts.push((x as f64, y as f64));
    }
    let mut d = vec![0; c * c];
    for i in 0..c {
        for j in 0..c {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a distance between points of a small grid: non-negative and small"
            )]
            let dist = ((pts[i].0 - pts[j].0).hypot(pts[i].1 - pts[j].1)).round() as u32;
            d[i * c + j] = dist;
        }
    }
    d
}

/// Depth-first search below `path`; `bound` is the best length known and
/// `found` is called with every better complete tour (it returns the new
/// bound).
fn search(
    d: &dyn Fn(usize, usize) -> u32,
    c: usize,
    path: &mut Vec<usize>,
    len: u32,
    bound: &mut u32,
    found: &mut dyn FnMut(u32, &[usize]) -> u32,
) {
    if len >= *bound {
        return;
    }
    if path.len() == c {
        let total = len + d(path[c - 1], path[0]);
        if total < *bound {
            *bound = found(total, path);
        }
        return;
    }
    let last = *path.last().expect("tours start at city 0");
    for city in 1..c {
        if path.contains(&city) {
            continue;
        }
        path.push(city);
        search(d, c, path, len + d(last, city), bound, found);
        path.pop();
    }
}

fn tasks(c: usize) -> Vec<[usize; 3]> {
    let mut t = Vec::new();
    for a in 1..c {
        for b in 1..c {
            if a != b {
                t.push([0, a, b]);
            }
        }
    }
    t
}

pub fn sequential(c: usize) -> u32 {
    let dist = distances(c);
    let d = |i: usize, j: usize| dist[i * c + j];
    let mut bound = u32::MAX;
    super::seq_timing::compute_begins();
    for t in tasks(c) {
        let mut path = t.to_vec();
        let len = d(t[0], t[1]) + d(t[1], t[2]);
        search(&d, c, &mut path, len, &mut bound, &mut |l, _| l);
    }
    bound
}

pub fn run(csm: &Dsm, data: &TspData, tid: usize) -> Result<u64, AppError> {
    let c = data.cities;
    if tid == 0 && csm.node_id() == 0 {
        for (i, v) in distances(c).into_iter().enumerate() {
            data.dist.set(i, v);
        }
        data.next.set(0, 0);
        data.best.set(0, u32::MAX);
    }
    csm.barrier()?;
    csm.mark_start();
    let all = tasks(c);
    let d = |i: usize, j: usize| data.dist.get(i * c + j);
    let mut err = None;
    loop {
        // A loop back edge (seed 000 s.2.1's polling).
        csm.poll()?;
        csm.lock_acquire(0)?;
        let t = data.next.get(0) as usize;
        data.next
            .set(0, u32::try_from(t).expect("a tour count fits u32") + 1);
        csm.lock_release(0)?;
        if t >= all.len() {
            break;
        }
        csm.lock_acquire(1)?;
        let mut bound = data.best.get(0);
        csm.lock_release(1)?;
        let task = all[t];
        let mut path = task.to_vec();
        let len = d(task[0], task[1]) + d(task[1], task[2]);
        let mut found = |l: u32, p: &[usize]| -> u32 {
            let r = (|| {
                csm.lock_acquire(1)?;
                let b = data.best.get(0);
                if l < b {
                    data.best.set(0, l);
                    for (i, city) in p.iter().enumerate() {
                        data.path
                            .set(i, u32::try_from(*city).expect("a city number fits u32"));
                    }
                }
                let nb = data.best.get(0);
                csm.lock_release(1)?;
                Ok::<u32, DsmError>(nb)
            })();
            match r {
                Ok(b) => b,
                Err(e) => {
                    err = Some(e);
                    0
                }
            }
        };
        search(&d, c, &mut path, len, &mut bound, &mut found);
        if let Some(e) = err.take() {
            return Err(e.into());
        }
    }
    // End of the computation; the node's counters are kept before checking.
    data.window.end(csm, tid)?;
    let best = data.best.get(0);
    let want = sequential(c);
    if best != want {
        return Err(AppError::TspBest { best, want });
    }
    let path: Vec<usize> = (0..c).map(|i| data.path.get(i) as usize).collect();
    let mut seen = vec![false; c];
    for &p in &path {
        if p >= c || seen[p] {
            return Err(AppError::TspNotATour { path });
        }
        seen[p] = true;
    }
    let len: u32 = (0..c).map(|i| d(path[i], path[(i + 1) % c])).sum();
    if len != best {
        return Err(AppError::TspLength { path, len, best });
    }
    Ok(c as u64 + 1)
}
