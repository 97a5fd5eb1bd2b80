//! Barnes: the Barnes-Hut N-body simulation of SPLASH (seed 000 s.3.2),
//! bodies in a Plummer model. Each time step: the bounding box (a per-
//! processor minimum and maximum, combined by everyone); the octree, built
//! by every processor inserting its own bodies, locking the cell it changes
//! (cells come from per-processor pools, as in SPLASH-2's `maketree`); the
//! cells' centres of mass, level by level from the deepest, each processor
//! doing the cells it created; cost zones (the tree's bodies in order, cut
//! into zones of equal work by last step's interaction counts); forces for
//! the bodies of one's zone by a tree walk with opening angle `THETA`; the
//! leapfrog update. Barriers separate the phases.
//!
//! Sharing (seed 000 s.3.4.1): "Barnes exhibits a high degree of sharing",
//! with "a large amount of false sharing": bodies and cells of different
//! processors share pages, zones move from step to step, and every
//! processor reads most of the tree.
//!
//! A leaf holds one body, so the tree's shape depends only on the positions,
//! not on the order of insertion; centres of mass and forces are summed in
//! child order. The parallel run therefore computes every position and
//! velocity with the same operations as the sequential run: compared bit
//! for bit.

use std::sync::OnceLock;

use dsm_core::{Dsm, SharedArray};

use super::error::AppError;
use super::problem::HeapPlan;
use super::verify::{self, SuiteError};
use super::workload::{ComputeWindow, Workload};

const DT: f64 = 0.025;
const EPS2: f64 = 0.05 * 0.05;
const THETA: f64 = 1.0;
/// Deepest cell before two bodies are declared to coincide.
const MAX_LEVEL: i32 = 48;

/// Body record: position, velocity, acceleration, mass, cost.
const BODY: usize = 12;
const POS: usize = 0;
const VEL: usize = 3;
const ACC: usize = 6;
const MASS: usize = 9;
const COST: usize = 10;

/// Cell records: 8 children and the level (i32), geometry and centre of
/// mass (f64).
const CELL_I: usize = 10;
const LEVEL: usize = 8;
const CELL_F: usize = 8;
const CENTER: usize = 0;
const HALF: usize = 3;
const CMASS: usize = 4;
const COM: usize = 5;

const EMPTY: i32 = -1;
/// First cluster lock of the cell locks, and how many there are.
pub const CELL_LOCK_BASE: u32 = 2;
pub const CELL_LOCKS: u32 = 256;

fn body_ref(b: usize) -> i32 {
    -i32::try_from(b).expect("a body number fits i32") - 2
}

/// A child slot: empty, a body or a cell.
enum Slot {
    Empty,
    Body(usize),
    Cell(usize),
}

fn slot(v: i32) -> Slot {
    match v {
        EMPTY => Slot::Empty,
        v if v < EMPTY => Slot::Body(usize::try_from(-v - 2).expect("below EMPTY: a body")),
        v => Slot::Cell(usize::try_from(v).expect("above EMPTY: a cell")),
    }
}

/// SplitMix64 of a position in the input.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn unit(key: u64) -> f64 {
    (mix(key) >> 11) as f64 / (1u64 << 53) as f64
}

/// A point on the unit sphere times `r`, from two random numbers.
fn on_sphere(r: f64, key: u64) -> [f64; 3] {
    let z = 2.0 * unit(key) - 1.0;
    let phi = 2.0 * std::f64::consts::PI * unit(key ^ 0xabcd);
    let s = (1.0 - z * z).sqrt();
    [r * s * phi.cos(), r * s * phi.sin(), r * z]
}

/// Body `b` of `n` in a Plummer model (SPLASH's `testdata`): position,
/// velocity, mass.
pub fn plummer(b: usize, n: usize) -> ([f64; 3], [f64; 3], f64) {
    let key = (b as u64) << 8;
    let mut k = 0;
    let r = loop {
        let u = unit(key ^ k).max(1e-12);
        let r = 1.0 / (u.powf(-2.0 / 3.0) - 1.0).sqrt();
        k += 1;
        if r < 9.0 {
            break r;
        }
    };
    let pos = on_sphere(r, key ^ 0x100);
    // von Neumann rejection for the speed, as a fraction of escape speed.
    let mut k = 0x200;
    let q = loop {
        let x = unit(key ^ k);
        let y = 0.1 * unit(key ^ (k + 1));
        k += 2;
        if y < x * x * (1.0 - x * x).powf(3.5) {
            break x;
        }
    };
    let v = q * std::f64::consts::SQRT_2 * (1.0 + r * r).powf(-0.25);
    (pos, on_sphere(v, key ^ 0x300), 1.0 / n as f64)
}

/// Octant of `p` in a cell centred at `c`.
fn octant(c: &[f64; 3], p: &[f64; 3]) -> usize {
    usize::from(p[0] >= c[0]) | usize::from(p[1] >= c[1]) << 1 | usize::from(p[2] >= c[2]) << 2
}

fn child_center(c: &[f64; 3], half: f64, k: usize) -> [f64; 3] {
    let q = half / 2.0;
    let s = |bit: usize| if k & bit != 0 { q } else { -q };
    [c[0] + s(1), c[1] + s(2), c[2] + s(4)]
}

/// The root's centre and half side from the bodies' bounding box.
fn root_box(lo: [f64; 3], hi: [f64; 3]) -> ([f64; 3], f64) {
    let c = [
        (lo[0] + hi[0]) / 2.0,
        (lo[1] + hi[1]) / 2.0,
        (lo[2] + hi[2]) / 2.0,
    ];
    let side = (0..3).map(|d| hi[d] - lo[d]).fold(0.0, f64::max);
    (c, side * 0.5 * 1.000_01 + 1e-9)
}

/// What a tree walk and the updates need, from shared memory or from
/// vectors: the two implementations are the parallel and the sequential
/// run.
trait Space {
    fn pos(&self, b: usize) -> [f64; 3];
    fn mass(&self, b: usize) -> f64;
    fn child(&self, c: usize, k: usize) -> i32;
    fn center(&self, c: usize) -> [f64; 3];
    fn half(&self, c: usize) -> f64;
    fn cmass(&self, c: usize) -> f64;
    fn com(&self, c: usize) -> [f64; 3];
}

/// Centre of mass of cell `c` from its children, in child order.
fn center_of_mass(s: &dyn Space, c: usize) -> (f64, [f64; 3]) {
    let mut m = 0.0;
    let mut mx = [0.0; 3];
    for k in 0..8 {
        let (cm, p) = match slot(s.child(c, k)) {
            Slot::Empty => continue,
            Slot::Body(b) => (s.mass(b), s.pos(b)),
            Slot::Cell(n) => (s.cmass(n), s.com(n)),
        };
        m += cm;
        for d in 0..3 {
            mx[d] += cm * p[d];
        }
    }
    if m > 0.0 {
        (m, [mx[0] / m, mx[1] / m, mx[2] / m])
    } else {
        (0.0, s.center(c))
    }
}

fn pull(acc: &mut [f64; 3], p: &[f64; 3], q: &[f64; 3], m: f64) {
    let d = [q[0] - p[0], q[1] - p[1], q[2] - p[2]];
    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + EPS2;
    let f = m / (r2 * r2.sqrt());
    for k in 0..3 {
        acc[k] += f * d[k];
    }
}

/// Acceleration of body `b` by a walk from cell `c` (root 0), and the
/// number of interactions.
fn walk(s: &dyn Space, b: usize, p: &[f64; 3], c: usize, acc: &mut [f64; 3]) -> u64 {
    let mut n = 0;
    for k in 0..8 {
        match slot(s.child(c, k)) {
            Slot::Empty => {}
            Slot::Body(o) => {
                if o != b {
                    pull(acc, p, &s.pos(o), s.mass(o));
                    n += 1;
                }
            }
            Slot::Cell(cell) => {
                let q = s.com(cell);
                let d2: f64 = (0..3).map(|i| (q[i] - p[i]) * (q[i] - p[i])).sum();
                let size = 2.0 * s.half(cell);
                if size * size < THETA * THETA * d2 {
                    pull(acc, p, &q, s.cmass(cell));
                    n += 1;
                } else {
                    n += walk(s, b, p, cell, acc);
                }
            }
        }
    }
    n
}

/// The sequential run's state: vectors in the same record layouts.
struct Plain {
    bodies: Vec<f64>,
    ci: Vec<i32>,
    cf: Vec<f64>,
}

impl Space for Plain {
    fn pos(&self, b: usize) -> [f64; 3] {
        let o = b * BODY + POS;
        [self.bodies[o], self.bodies[o + 1], self.bodies[o + 2]]
    }
    fn mass(&self, b: usize) -> f64 {
        self.bodies[b * BODY + MASS]
    }
    fn child(&self, c: usize, k: usize) -> i32 {
        self.ci[c * CELL_I + k]
    }
    fn center(&self, c: usize) -> [f64; 3] {
        let o = c * CELL_F + CENTER;
        [self.cf[o], self.cf[o + 1], self.cf[o + 2]]
    }
    fn half(&self, c: usize) -> f64 {
        self.cf[c * CELL_F + HALF]
    }
    fn cmass(&self, c: usize) -> f64 {
        self.cf[c * CELL_F + CMASS]
    }
    fn com(&self, c: usize) -> [f64; 3] {
        let o = c * CELL_F + COM;
        [self.cf[o], self.cf[o + 1], self.cf[o + 2]]
    }
}

impl Plain {
    fn new_cell(&mut self, center: [f64; 3], half: f64, level: i32) -> usize {
        let c = self.ci.len() / CELL_I;
        self.ci.extend_from_slice(&[EMPTY; 8]);
        self.ci.extend_from_slice(&[level, 0]);
        self.cf
            .extend_from_slice(&[center[0], center[1], center[2], half, 0.0, 0.0, 0.0, 0.0]);
        c
    }
    fn insert(&mut self, b: usize) {
        let p = self.pos(b);
        let mut cur = 0;
        loop {
            let k = octant(&self.center(cur), &p);
            match slot(self.child(cur, k)) {
                Slot::Empty => {
                    self.ci[cur * CELL_I + k] = body_ref(b);
                    return;
                }
                Slot::Cell(n) => cur = n,
                Slot::Body(o) => {
                    let level = self.ci[cur * CELL_I + LEVEL] + 1;
                    let cc = child_center(&self.center(cur), self.half(cur), k);
                    let n = self.new_cell(cc, self.half(cur) / 2.0, level);
                    let ko = octant(&cc, &self.pos(o));
                    self.ci[n * CELL_I + ko] = body_ref(o);
                    self.ci[cur * CELL_I + k] = i32::try_from(n).expect("a cell number fits i32");
                    cur = n;
                }
            }
        }
    }
    fn hack_com(&mut self, c: usize) {
        for k in 0..8 {
            if let Slot::Cell(n) = slot(self.child(c, k)) {
                self.hack_com(n);
            }
        }
        let (m, x) = center_of_mass(self, c);
        let o = c * CELL_F;
        self.cf[o + CMASS] = m;
        self.cf[o + COM..o + COM + 3].copy_from_slice(&x);
    }
}

/// Bounding box of bodies `bs`.
fn bounds(s: &dyn Space, bs: impl Iterator<Item = usize>) -> ([f64; 3], [f64; 3]) {
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for b in bs {
        let p = s.pos(b);
        for d in 0..3 {
            lo[d] = lo[d].min(p[d]);
            hi[d] = hi[d].max(p[d]);
        }
    }
    (lo, hi)
}

/// The sequential run: bodies' records after `steps` steps, and the cells
/// the last tree had.
pub fn sequential(n: usize, steps: u32) -> (Vec<f64>, usize) {
    let mut s = Plain {
        bodies: vec![0.0; n * BODY],
        ci: Vec::new(),
        cf: Vec::new(),
    };
    for b in 0..n {
        let (p, v, m) = plummer(b, n);
        let o = b * BODY;
        s.bodies[o + POS..o + POS + 3].copy_from_slice(&p);
        s.bodies[o + VEL..o + VEL + 3].copy_from_slice(&v);
        s.bodies[o + MASS] = m;
        s.bodies[o + COST] = 1.0;
    }
    let mut cells = 0;
    super::seq_timing::compute_begins();
    for _ in 0..steps {
        let (lo, hi) = bounds(&s, 0..n);
        let (c, half) = root_box(lo, hi);
        s.ci.clear();
        s.cf.clear();
        s.new_cell(c, half, 0);
        for b in 0..n {
            s.insert(b);
        }
        s.hack_com(0);
        cells = s.ci.len() / CELL_I;
        for b in 0..n {
            let mut acc = [0.0; 3];
            let p = s.pos(b);
            let cost = walk(&s, b, &p, 0, &mut acc);
            let o = b * BODY;
            s.bodies[o + ACC..o + ACC + 3].copy_from_slice(&acc);
            s.bodies[o + COST] = cost as f64;
        }
        for b in 0..n {
            advance(&mut s.bodies[b * BODY..(b + 1) * BODY]);
        }
    }
    (s.bodies, cells)
}

/// Leapfrog: velocity by the acceleration, position by the velocity.
fn advance(r: &mut [f64]) {
    for d in 0..3 {
        r[VEL + d] += r[ACC + d] * DT;
        r[POS + d] += r[VEL + d] * DT;
    }
}

/// Cells each processor's pool holds: the trees of these models need about
/// 0.6 cells per body in all; pools are sized for twice that per
/// processor's share, plus slack for uneven zones.
fn pool(n: usize, procs: usize) -> usize {
    (2 * n).div_ceil(procs) + 256
}

pub fn footprint(n: usize, page_size: u32, procs: usize) -> usize {
    let cells = 1 + procs * pool(n, procs);
    HeapPlan::new(page_size)
        .array::<f64>(n * BODY, true)
        .array::<i32>(cells * CELL_I, true)
        .array::<f64>(cells * CELL_F, true)
        .array::<f64>(procs * 8, true)
        .bytes()
}

/// Shared state of a Barnes run.
pub struct Barnes {
    n: usize,
    steps: u32,
    procs: usize,
    pool: usize,
    bodies: SharedArray<f64>,
    ci: SharedArray<i32>,
    cf: SharedArray<f64>,
    /// Per processor: bounding box (6) and deepest level (1).
    bounds: SharedArray<f64>,
    reference: OnceLock<(Vec<f64>, usize)>,
    window: ComputeWindow,
}

pub fn setup(csm: &Dsm, n: usize, steps: u32) -> Result<Barnes, AppError> {
    let procs = (csm.nodes() * csm.threads()) as usize;
    let pool = pool(n, procs);
    let cells = 1 + procs * pool;
    Ok(Barnes {
        n,
        steps,
        procs,
        pool,
        bodies: csm.alloc(n * BODY, true)?,
        ci: csm.alloc(cells * CELL_I, true)?,
        cf: csm.alloc(cells * CELL_F, true)?,
        bounds: csm.alloc(procs * 8, true)?,
        reference: OnceLock::new(),
        window: ComputeWindow::default(),
    })
}

impl Space for Barnes {
    fn pos(&self, b: usize) -> [f64; 3] {
        let o = b * BODY + POS;
        [
            self.bodies.get(o),
            self.bodies.get(o + 1),
            self.bodies.get(o + 2),
        ]
    }
    fn mass(&self, b: usize) -> f64 {
        self.bodies.get(b * BODY + MASS)
    }
    fn child(&self, c: usize, k: usize) -> i32 {
        self.ci.get(c * CELL_I + k)
    }
    fn center(&self, c: usize) -> [f64; 3] {
        let o = c * CELL_F + CENTER;
        [self.cf.get(o), self.cf.get(o + 1), self.cf.get(o + 2)]
    }
    fn half(&self, c: usize) -> f64 {
        self.cf.get(c * CELL_F + HALF)
    }
    fn cmass(&self, c: usize) -> f64 {
        self.cf.get(c * CELL_F + CMASS)
    }
    fn com(&self, c: usize) -> [f64; 3] {
        let o = c * CELL_F + COM;
        [self.cf.get(o), self.cf.get(o + 1), self.cf.get(o + 2)]
    }
}

/// The tree and the bodies' positions and masses while nobody writes them
/// (the force phase, between two barriers), read with ordinary loads as
/// the sequential run's `Plain` reads its vectors: the cells as slices,
/// each body's position and mass as a slice of its record (the other
/// fields of a record, its acceleration and cost, are written meanwhile by
/// the body's owner).
struct Settled<'a> {
    bodies: &'a SharedArray<f64>,
    ci: &'a [i32],
    cf: &'a [f64],
}

impl Settled<'_> {
    /// # Safety
    ///
    /// As [`SharedArray::as_slice`] for every cell and every body's
    /// position and mass: nobody writes them while the view lives, and the
    /// caller makes no synchronisation call meanwhile.
    unsafe fn new(b: &Barnes) -> Settled<'_> {
        // SAFETY: the caller's promise for the cells.
        let (ci, cf) = unsafe { (b.ci.as_slice(0..b.ci.len()), b.cf.as_slice(0..b.cf.len())) };
        Settled {
            bodies: &b.bodies,
            ci,
            cf,
        }
    }
}

impl Space for Settled<'_> {
    fn pos(&self, b: usize) -> [f64; 3] {
        let o = b * BODY + POS;
        // SAFETY: the promise `Settled::new` was given (a position).
        *unsafe { self.bodies.as_array::<3>(o) }
    }
    fn mass(&self, b: usize) -> f64 {
        let o = b * BODY + MASS;
        // SAFETY: as for `pos` (a mass).
        let [m] = *unsafe { self.bodies.as_array::<1>(o) };
        m
    }
    fn child(&self, c: usize, k: usize) -> i32 {
        self.ci[c * CELL_I + k]
    }
    fn center(&self, c: usize) -> [f64; 3] {
        let o = c * CELL_F + CENTER;
        [self.cf[o], self.cf[o + 1], self.cf[o + 2]]
    }
    fn half(&self, c: usize) -> f64 {
        self.cf[c * CELL_F + HALF]
    }
    fn cmass(&self, c: usize) -> f64 {
        self.cf[c * CELL_F + CMASS]
    }
    fn com(&self, c: usize) -> [f64; 3] {
        let o = c * CELL_F + COM;
        [self.cf[o], self.cf[o + 1], self.cf[o + 2]]
    }
}

/// A processor's cells this step: (level, cell).
type MyCells = Vec<(i32, usize)>;

impl Barnes {
    fn lock(c: usize) -> u32 {
        CELL_LOCK_BASE + u32::try_from(c % CELL_LOCKS as usize).expect("below CELL_LOCKS")
    }

    fn write_cell(&self, c: usize, center: [f64; 3], half: f64, level: i32) {
        for k in 0..8 {
            self.ci.set(c * CELL_I + k, EMPTY);
        }
        self.ci.set(c * CELL_I + LEVEL, level);
        let o = c * CELL_F;
        for (d, x) in center.iter().enumerate() {
            self.cf.set(o + CENTER + d, *x);
        }
        self.cf.set(o + HALF, half);
    }

    /// Insert body `b`, locking a cell while deciding what to do in it.
    ///
    /// `links[cell * 8 + k]` holds the child cell this processor has seen
    /// in slot `k` of `cell` this step (0: none seen; the root is nobody's
    /// child), indexed rather than hashed so that a known link costs what
    /// the sequential run's read of the slot does: once a slot holds a cell it keeps it
    /// until the tree is rebuilt, and the child's geometry (all a descent
    /// reads of it) was written before the link was, under the parent's
    /// lock, which this processor has held since. So a known link is
    /// followed without the lock, as SPLASH-2's loadtree descends through
    /// cells without locking them; a slot not known to hold a cell is read
    /// and changed under its cell's lock, as before.
    fn insert(
        &self,
        csm: &Dsm,
        tid: usize,
        b: usize,
        mine: &mut MyCells,
        links: &mut [u32],
    ) -> Result<(), AppError> {
        let p = self.pos(b);
        let mut cur = 0;
        loop {
            let k = octant(&self.center(cur), &p);
            let known = links[cur * 8 + k];
            if known != 0 {
                cur = usize::try_from(known).expect("a cell number fits usize");
                continue;
            }
            csm.lock_acquire(Self::lock(cur))?;
            let next = match slot(self.child(cur, k)) {
                Slot::Empty => {
                    self.ci.set(cur * CELL_I + k, body_ref(b));
                    None
                }
                Slot::Cell(n) => Some(n),
                Slot::Body(o) => {
                    let level = self.ci.get(cur * CELL_I + LEVEL) + 1;
                    if mine.len() >= self.pool || level > MAX_LEVEL {
                        csm.lock_release(Self::lock(cur))?;
                        return Err(SuiteError::Capacity {
                            app: "barnes",
                            what: "cell pool (or tree depth)",
                            limit: self.pool,
                        }
                        .into());
                    }
                    let n = 1 + tid * self.pool + mine.len();
                    let cc = child_center(&self.center(cur), self.half(cur), k);
                    self.write_cell(n, cc, self.half(cur) / 2.0, level);
                    self.ci
                        .set(n * CELL_I + octant(&cc, &self.pos(o)), body_ref(o));
                    // Linked only once complete: whoever follows the link sees it whole.
                    self.ci.set(
                        cur * CELL_I + k,
                        i32::try_from(n).expect("a cell number fits i32"),
                    );
                    mine.push((level, n));
                    Some(n)
                }
            };
            csm.lock_release(Self::lock(cur))?;
            match next {
                Some(n) => {
                    links[cur * 8 + k] = u32::try_from(n).expect("a cell number fits u32");
                    cur = n;
                }
                None => return Ok(()),
            }
        }
    }

    /// Cost zones: the tree's bodies in walk order, cut at equal shares of
    /// the total cost; returns processor `tid`'s bodies.
    fn zone(&self, tid: usize) -> Vec<usize> {
        let mut order = Vec::with_capacity(self.n);
        let mut stack = vec![0usize];
        while let Some(c) = stack.pop() {
            for k in (0..8).rev() {
                match slot(self.child(c, k)) {
                    Slot::Empty => {}
                    Slot::Body(b) => order.push(b),
                    Slot::Cell(n) => stack.push(n),
                }
            }
        }
        let costs: Vec<u64> = order
            .iter()
            .map(|&b| {
                #[allow(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a body's cost: a small non-negative count of interactions"
                )]
                let cost = self.bodies.get(b * BODY + COST) as u64;
                cost
            })
            .collect();
        let total: u64 = costs.iter().sum::<u64>().max(1);
        let p = self.procs as u64;
        let mut before = 0u64;
        let mut out = Vec::new();
        for (b, c) in order.into_iter().zip(costs) {
            if usize::try_from(before * p / total)
                .map_or(usize::MAX, |q| q)
                .min(self.procs - 1)
                == tid
            {
                out.push(b);
            }
            before += c;
        }
        out
    }
}

impl Workload for Barnes {
    fn run(&self, csm: &Dsm, tid: usize) -> Result<u64, AppError> {
        let n = self.n;
        let mut zone: Vec<usize> = (tid * n / self.procs..(tid + 1) * n / self.procs).collect();
        // As SPLASH-2's BARNES, whose main process generates every body
        // (testdata) before the others start: first touch makes processor
        // 0's node home of the bodies (the cells come from per-processor
        // pools, touched by their owners), and migration moves homes to
        // the bodies' writers (seed 000 Table IV: 15.6K migrations).
        let all = if tid == 0 { 0..n } else { 0..0 };
        for b in all {
            let (p, v, m) = plummer(b, n);
            let o = b * BODY;
            for d in 0..3 {
                self.bodies.set(o + POS + d, p[d]);
                self.bodies.set(o + VEL + d, v[d]);
                self.bodies.set(o + ACC + d, 0.0);
            }
            self.bodies.set(o + MASS, m);
            self.bodies.set(o + COST, 1.0);
        }
        csm.barrier()?;
        csm.mark_start();
        for _ in 0..self.steps {
            let (lo, hi) = bounds(self, zone.iter().copied());
            for d in 0..3 {
                self.bounds.set(tid * 8 + d, lo[d]);
                self.bounds.set(tid * 8 + 3 + d, hi[d]);
            }
            csm.barrier()?;
            let mut lo = [f64::INFINITY; 3];
            let mut hi = [f64::NEG_INFINITY; 3];
            for q in 0..self.procs {
                for d in 0..3 {
                    lo[d] = lo[d].min(self.bounds.get(q * 8 + d));
                    hi[d] = hi[d].max(self.bounds.get(q * 8 + 3 + d));
                }
            }
            if tid == 0 {
                let (c, half) = root_box(lo, hi);
                self.write_cell(0, c, half, 0);
            }
            csm.barrier()?;
            let mut mine: MyCells = Vec::new();
            // Zeroed pages from the allocator, as large as the cells.
            let mut links = vec![0u32; self.ci.len() / CELL_I * 8];
            for &b in &zone {
                self.insert(csm, tid, b, &mut mine, &mut links)?;
                // A loop back edge (seed 000 s.2.1's polling).
                csm.poll()?;
            }
            let deepest = mine.iter().map(|c| c.0).max().unwrap_or(0);
            self.bounds.set(tid * 8 + 6, f64::from(deepest));
            csm.barrier()?;
            let deepest = (0..self.procs)
                .map(|q| {
                    #[allow(
                        clippy::cast_possible_truncation,
                        reason = "a tree depth, stored from an i32 as f64"
                    )]
                    let d = self.bounds.get(q * 8 + 6) as i32;
                    d
                })
                .max()
                .unwrap_or(0);
            if tid == 0 {
                mine.push((0, 0));
            }
            mine.sort_unstable();
            for level in (0..=deepest).rev() {
                // `mine` is sorted by level: this level's cells are a run.
                let at = mine.partition_point(|x| x.0 < level);
                let end = mine.partition_point(|x| x.0 <= level);
                for &(_, c) in &mine[at..end] {
                    let (m, x) = center_of_mass(self, c);
                    self.cf.set(c * CELL_F + CMASS, m);
                    for (d, v) in x.iter().enumerate() {
                        self.cf.set(c * CELL_F + COM + d, *v);
                    }
                }
                csm.barrier()?;
            }
            zone = self.zone(tid);
            csm.barrier()?;
            for &b in &zone {
                let mut acc = [0.0; 3];
                {
                    // SAFETY: between the barrier above and the next one
                    // nobody writes a cell, a position or a mass; the view
                    // ends before the poll.
                    let t = unsafe { Settled::new(self) };
                    let p = t.pos(b);
                    let cost = walk(&t, b, &p, 0, &mut acc);
                    // SAFETY: body b's acceleration and cost are written by
                    // its owner alone, and read by nobody, in this phase.
                    // (Not its mass, between the two, which others read.)
                    let (a, c) = unsafe {
                        (
                            self.bodies.as_mut_slice(b * BODY + ACC..b * BODY + ACC + 3),
                            self.bodies
                                .as_mut_slice(b * BODY + COST..b * BODY + COST + 1),
                        )
                    };
                    a.copy_from_slice(&acc);
                    c[0] = cost as f64;
                }
                // A loop back edge (seed 000 s.2.1's polling).
                csm.poll()?;
            }
            csm.barrier()?;
            for &b in &zone {
                // SAFETY: in this phase a processor touches its own bodies
                // only (the next step's bounding box reads them after it).
                advance(unsafe { self.bodies.as_mut_slice(b * BODY..(b + 1) * BODY) });
            }
        }
        self.window.end(csm, tid)?;
        let (want, _) = self.reference.get_or_init(|| sequential(n, self.steps));
        for &b in &zone {
            for k in [POS, POS + 1, POS + 2, VEL, VEL + 1, VEL + 2] {
                let i = b * BODY + k;
                verify::exact("barnes", "body record", i, self.bodies.get(i), want[i])?;
            }
        }
        Ok(zone.len() as u64 * 6)
    }

    fn window(&self) -> &ComputeWindow {
        &self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_uses_fewer_cells_than_the_pools_hold_and_energy_holds() {
        let n = 2048;
        let (b0, _) = sequential(n, 0);
        let (b, cells) = sequential(n, 3);
        assert!(cells < 2 * n, "{cells} cells for {n} bodies");
        assert!(cells > n / 8, "{cells} cells for {n} bodies");
        // Momentum stays near zero-sum drift; positions moved.
        let moved = (0..n).filter(|&i| b[i * BODY] != b0[i * BODY]).count();
        assert_eq!(moved, n);
        assert!(b.iter().all(|x| x.is_finite()));
    }

    #[test]
    fn plummer_bodies_are_bound_and_centred() {
        let n = 4096;
        let mut r = 0.0;
        for b in 0..n {
            let (p, v, m) = plummer(b, n);
            r += (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
            let esc =
                std::f64::consts::SQRT_2 * (1.0 + p.iter().map(|x| x * x).sum::<f64>()).powf(-0.25);
            assert!((v.iter().map(|x| x * x).sum::<f64>()).sqrt() <= esc + 1e-12);
            assert_eq!(m, 1.0 / n as f64);
        }
        let mean = r / n as f64;
        assert!((0.8..2.5).contains(&mean), "mean radius {mean}");
    }
}
