//! The molecular dynamics Water-Nsquared and Water-Spatial share (SPLASH-2
//! WATER; seed 000 s.3.2): a box of flexible three-site water molecules
//! (oxygen and two hydrogens) with periodic boundaries; intramolecular
//! harmonic bonds, intermolecular Lennard-Jones between oxygens and Coulomb
//! between all sites, for molecule pairs whose oxygens are within the
//! cutoff (minimum image); integrated, as SPLASH-2 does, by a Gear
//! predictor-corrector of order 5 (positions and five scaled derivatives per
//! site, plus the force: SPLASH's 7 x 3 x 3 doubles per molecule, 504
//! bytes). Units: angstrom, picosecond, atomic mass unit, elementary
//! charge (energy in amu A^2 / ps^2 = 0.01 kJ/mol).
//!
//! The two programs differ in how they find pairs and who adds what
//! (`water_nsquared.rs`, `water_spatial.rs`); the sequential run of each is
//! here.

/// Doubles per molecule record: derivatives 0..=5 and the force, each
/// 3 dimensions x 3 sites, padded to 64 (512 bytes).
pub const MOL: usize = 64;
/// Derivative `k` (0: position) of dimension `d` of site `s`.
pub const fn at(k: usize, d: usize, s: usize) -> usize {
    k * 9 + d * 3 + s
}
/// Where the force starts (same layout as a derivative).
pub const FORCE: usize = 6;

pub type Mol = [f64; MOL];
/// A molecule's positions (derivative 0 of the 3 sites, `at(0, d, s)`):
/// all [`pair`] reads of it.
pub type Sites = [f64; 9];

/// Molecule `m`'s positions.
pub fn sites(m: &Mol) -> &Sites {
    m[..9].try_into().expect("9 positions")
}

const MASS: [f64; 3] = [15.9994, 1.008, 1.008];
const CHARGE: [f64; 3] = [-0.82, 0.41, 0.41];
/// Coulomb constant in these units.
const KE: f64 = 138_935.5;
const LJ_EPS: f64 = 65.0;
const LJ_SIGMA: f64 = 3.166;
const BOND: f64 = 1.0;
const BOND_K: f64 = 443_100.0;
const HH: f64 = 1.633;
const HH_K: f64 = 100_000.0;
/// Time step (ps): 0.2 fs, short against the O-H vibration's 9 fs.
pub const DT: f64 = 0.0002;
/// Volume per molecule (A^3) at liquid density.
const VOLUME: f64 = 29.9;
/// Thermal energy at 300 K.
const KT: f64 = 249.4;

/// Gear corrector coefficients for a second-order equation, order 5.
const GEAR: [f64; 6] = [
    3.0 / 20.0,
    251.0 / 360.0,
    1.0,
    11.0 / 18.0,
    1.0 / 6.0,
    1.0 / 60.0,
];

/// The simulated box.
#[derive(Clone, Copy, Debug)]
pub struct WaterBox {
    pub molecules: usize,
    pub side: f64,
    pub cutoff: f64,
    /// Water-Spatial's boxes per side (each at least the cutoff wide).
    pub cells: usize,
}

impl WaterBox {
    pub fn new(molecules: usize) -> WaterBox {
        let side = (molecules.max(1) as f64 * VOLUME).cbrt();
        let cutoff = (side / 2.0 * 0.999).min(8.0);
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "boxes a side: a small positive float, floored"
        )]
        let cells = ((side / cutoff).floor() as usize).max(1);
        WaterBox {
            molecules,
            side,
            cutoff,
            cells,
        }
    }

    /// Water-Spatial's box of a position.
    pub fn cell_of(&self, p: [f64; 3]) -> usize {
        let m = self.cells;
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a position's box, clamped to 0..m (a few boxes a side)"
        )]
        let c = |x: f64| {
            ((x / self.side) * m as f64)
                .floor()
                .clamp(0.0, (m - 1) as f64) as usize
        };
        (c(p[0]) * m + c(p[1])) * m + c(p[2])
    }

    /// The boxes next to `cell` and itself, each once (with fewer than 3
    /// boxes a side, periodic neighbours coincide).
    pub fn neighbours(&self, cell: usize) -> Vec<usize> {
        let m = isize::try_from(self.cells).expect("a few boxes a side");
        let cell = isize::try_from(cell).expect("a box number fits isize");
        let (x, y, z) = (cell / (m * m), cell / m % m, cell % m);
        let mut out = Vec::with_capacity(27);
        for dx in -1..=1 {
            for dy in -1..=1 {
                for dz in -1..=1 {
                    let w = |v: isize| (v + m) % m;
                    let c = usize::try_from((w(x + dx) * m + w(y + dy)) * m + w(z + dz))
                        .expect("wrapped into 0..m on each axis");
                    if !out.contains(&c) {
                        out.push(c);
                    }
                }
            }
        }
        out
    }
}

fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn unit(key: u64) -> f64 {
    (mix(key) >> 11) as f64 / (1u64 << 53) as f64
}

fn normalise(v: [f64; 3]) -> [f64; 3] {
    let l = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    [v[0] / l, v[1] / l, v[2] / l]
}

/// Molecule `i` at the start: on a cubic lattice with some jitter, randomly
/// oriented, with random thermal velocities (scaled derivative 1 = v dt).
pub fn initial(i: usize, wb: &WaterBox) -> Mol {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "the cube root of a molecule count: small and positive"
    )]
    let per_side = (wb.molecules as f64).cbrt().ceil() as usize;
    let spacing = wb.side / per_side as f64;
    let key = (i as u64) << 12;
    let lattice = [
        i % per_side,
        i / per_side % per_side,
        i / (per_side * per_side),
    ];
    let o: Vec<f64> = (0..3)
        .map(|d| (lattice[d] as f64 + 0.5 + 0.3 * (unit(key ^ d as u64) - 0.5)) * spacing)
        .collect();
    let a = normalise([
        unit(key ^ 10) - 0.5,
        unit(key ^ 11) - 0.5,
        unit(key ^ 12) - 0.5 + 1e-3,
    ]);
    let r = normalise([
        unit(key ^ 13) - 0.5,
        unit(key ^ 14) - 0.5,
        unit(key ^ 15) - 0.5,
    ]);
    // b: r without its component along a.
    let dot = a[0] * r[0] + a[1] * r[1] + a[2] * r[2];
    let b = normalise([r[0] - dot * a[0], r[1] - dot * a[1], r[2] - dot * a[2]]);
    let angle: f64 = 109.47_f64.to_radians();
    let h2 = [
        a[0] * angle.cos() + b[0] * angle.sin(),
        a[1] * angle.cos() + b[1] * angle.sin(),
        a[2] * angle.cos() + b[2] * angle.sin(),
    ];
    let mut m = [0.0; MOL];
    for d in 0..3 {
        m[at(0, d, 0)] = o[d];
        m[at(0, d, 1)] = o[d] + BOND * a[d];
        m[at(0, d, 2)] = o[d] + BOND * h2[d];
        for s in 0..3 {
            let v =
                (2.0 * unit(key ^ (100 + 3 * s + d) as u64) - 1.0) * (3.0 * KT / MASS[s]).sqrt();
            m[at(1, d, s)] = v * DT;
        }
    }
    m
}

/// C(j, k).
fn binomial(j: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (j - i) as f64 / (i + 1) as f64)
}

/// Predictor: the Taylor series of the scaled derivatives,
/// x_k <- sum over j >= k of C(j, k) x_j.
pub fn predict(m: &mut Mol) {
    for d in 0..3 {
        for s in 0..3 {
            let old: [f64; 6] = std::array::from_fn(|k| m[at(k, d, s)]);
            for k in 0..6 {
                let mut v = 0.0;
                for (j, x) in old.iter().enumerate().skip(k) {
                    v += binomial(j, k) * x;
                }
                m[at(k, d, s)] = v;
            }
        }
    }
}

/// Intramolecular forces (overwriting the force) and their energy.
pub fn intra(m: &mut Mol) -> f64 {
    for d in 0..3 {
        for s in 0..3 {
            m[at(FORCE, d, s)] = 0.0;
        }
    }
    let mut e = 0.0;
    for (a, b, r0, k) in [(0, 1, BOND, BOND_K), (0, 2, BOND, BOND_K), (1, 2, HH, HH_K)] {
        let v: Vec<f64> = (0..3).map(|d| m[at(0, d, b)] - m[at(0, d, a)]).collect();
        let r = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
        e += 0.5 * k * (r - r0) * (r - r0);
        let f = -k * (r - r0) / r;
        for d in 0..3 {
            m[at(FORCE, d, b)] += f * v[d];
            m[at(FORCE, d, a)] -= f * v[d];
        }
    }
    e
}

/// Forces between molecules `a` and `b` if their oxygens are within the
/// cutoff (minimum image): added to `fa` and `fb` (3 dims x 3 sites, as
/// [`at`]`(0, d, s)`), and the pair's energy returned.
pub fn pair(wb: &WaterBox, a: &Sites, b: &Sites, fa: &mut [f64], fb: &mut [f64]) -> Option<f64> {
    let mut shift = [0.0; 3];
    let mut r2 = 0.0;
    for d in 0..3 {
        let x = b[at(0, d, 0)] - a[at(0, d, 0)];
        shift[d] = -wb.side * (x / wb.side).round();
        r2 += (x + shift[d]) * (x + shift[d]);
    }
    if r2 >= wb.cutoff * wb.cutoff {
        return None;
    }
    let sr6 = (LJ_SIGMA * LJ_SIGMA / r2).powi(3);
    let mut e = 4.0 * LJ_EPS * (sr6 * sr6 - sr6);
    let flj = 24.0 * LJ_EPS * (2.0 * sr6 * sr6 - sr6) / r2;
    for d in 0..3 {
        let x = b[at(0, d, 0)] + shift[d] - a[at(0, d, 0)];
        fb[at(0, d, 0)] += flj * x;
        fa[at(0, d, 0)] -= flj * x;
    }
    for sa in 0..3 {
        for sb in 0..3 {
            let v: Vec<f64> = (0..3)
                .map(|d| b[at(0, d, sb)] + shift[d] - a[at(0, d, sa)])
                .collect();
            let r2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
            let r = r2.sqrt();
            let q = KE * CHARGE[sa] * CHARGE[sb];
            e += q / r;
            let f = q / (r2 * r);
            for d in 0..3 {
                fb[at(0, d, sb)] += f * v[d];
                fa[at(0, d, sa)] -= f * v[d];
            }
        }
    }
    Some(e)
}

/// Corrector: the difference between the acceleration the force gives and
/// the predicted one, spread over the derivatives.
pub fn correct(m: &mut Mol) {
    for d in 0..3 {
        for s in 0..3 {
            let acc = m[at(FORCE, d, s)] / MASS[s];
            let delta = acc * DT * DT / 2.0 - m[at(2, d, s)];
            for (k, c) in GEAR.iter().enumerate() {
                m[at(k, d, s)] += c * delta;
            }
        }
    }
}

/// Periodic boundary: move the molecule (all sites) back into the box by
/// its oxygen.
pub fn wrap(wb: &WaterBox, m: &mut Mol) {
    for d in 0..3 {
        let o = m[at(0, d, 0)];
        let shift = if o < 0.0 {
            wb.side
        } else if o >= wb.side {
            -wb.side
        } else {
            0.0
        };
        if shift != 0.0 {
            for s in 0..3 {
                m[at(0, d, s)] += shift;
            }
        }
    }
}

pub fn kinetic(m: &Mol) -> f64 {
    let mut e = 0.0;
    for d in 0..3 {
        for s in 0..3 {
            let v = m[at(1, d, s)] / DT;
            e += 0.5 * MASS[s] * v * v;
        }
    }
    e
}

/// The oxygen's position.
pub fn oxygen(m: &Mol) -> [f64; 3] {
    [m[at(0, 0, 0)], m[at(0, 1, 0)], m[at(0, 2, 0)]]
}

/// Water-Nsquared's pairs: molecule `i` with the next half of the others
/// (for an even count, the opposite molecule only from the first half).
pub fn half_shell(n: usize, i: usize) -> impl Iterator<Item = usize> {
    (1..=n / 2)
        .filter(move |&off| !(n % 2 == 0 && off == n / 2 && i >= n / 2))
        .map(move |off| (i + off) % n)
}

/// How the sequential run finds pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pairs {
    /// Every molecule with its half shell, force added to both.
    HalfShell,
    /// Every molecule with the molecules of its and the neighbouring boxes,
    /// force added to it only.
    Boxes,
}

/// What a run ends with: every molecule's record, and per step the
/// potential and the kinetic energy.
pub struct WaterResult {
    pub mols: Vec<Mol>,
    pub energy: Vec<[f64; 2]>,
}

/// The sequential run.
pub fn sequential(n: usize, steps: u32, pairs: Pairs) -> WaterResult {
    let wb = WaterBox::new(n);
    let mut mols: Vec<Mol> = (0..n).map(|i| initial(i, &wb)).collect();
    super::seq_timing::compute_begins();
    let mut energy = Vec::new();
    for _ in 0..steps {
        let mut pot = 0.0;
        for m in mols.iter_mut() {
            predict(m);
            pot += intra(m);
        }
        let mut f = vec![[0.0; 9]; n];
        match pairs {
            Pairs::HalfShell => {
                let none = || Ok::<(), std::convert::Infallible>(());
                let Ok(()) =
                    half_shell_forces(&wb, 0..n, |k| sites(&mols[k]), &mut f, &mut pot, none);
            }
            Pairs::Boxes => {
                let mut members = vec![Vec::new(); wb.cells.pow(3)];
                for (i, m) in mols.iter().enumerate() {
                    members[wb.cell_of(oxygen(m))].push(i);
                }
                for i in 0..n {
                    for c in wb.neighbours(wb.cell_of(oxygen(&mols[i]))) {
                        for &j in &members[c] {
                            if j != i {
                                let mut sink = [0.0; 9];
                                if let Some(e) = pair(
                                    &wb,
                                    sites(&mols[i]),
                                    sites(&mols[j]),
                                    &mut f[i],
                                    &mut sink,
                                ) {
                                    pot += 0.5 * e;
                                }
                            }
                        }
                    }
                }
            }
        }
        let mut kin = 0.0;
        for (m, fi) in mols.iter_mut().zip(&f) {
            for (k, v) in fi.iter().enumerate() {
                m[FORCE * 9 + k] += v;
            }
            correct(m);
            wrap(&wb, m);
            kin += kinetic(m);
        }
        energy.push([pot, kin]);
    }
    WaterResult { mols, energy }
}

/// Water-Nsquared's pair loop (SPLASH-2's INTERF), the kernel of both the
/// sequential and the parallel run: molecules `rows` each with the
/// following half of all molecules (positions from `pos`), their forces
/// added into `f` and the energies into `pot`; `each_row` runs before each
/// molecule of `rows` (the parallel run polls there, a loop back edge).
pub fn half_shell_forces<'a, E>(
    wb: &WaterBox,
    rows: std::ops::Range<usize>,
    pos: impl Fn(usize) -> &'a Sites,
    f: &mut [[f64; 9]],
    pot: &mut f64,
    mut each_row: impl FnMut() -> Result<(), E>,
) -> Result<(), E> {
    let n = wb.molecules;
    for i in rows {
        each_row()?;
        for j in half_shell(n, i) {
            let (mut fi, mut fj) = ([0.0; 9], [0.0; 9]);
            if let Some(e) = pair(wb, pos(i), pos(j), &mut fi, &mut fj) {
                *pot += e;
                add(&mut f[i], &fi);
                add(&mut f[j], &fj);
            }
        }
    }
    Ok(())
}

/// `acc += f` over the 9 force components (3 dimensions x 3 sites).
pub fn add(acc: &mut [f64; 9], f: &[f64; 9]) {
    for (a, b) in acc.iter_mut().zip(f) {
        *a += b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predictor_is_the_taylor_series() {
        let mut m = [0.0; MOL];
        for k in 0..6 {
            m[at(k, 0, 0)] = (k + 1) as f64;
        }
        predict(&mut m);
        // x0' = sum_j x_j, x1' = sum_j j x_j (j >= 1), ...
        assert_eq!(m[at(0, 0, 0)], 21.0);
        assert_eq!(
            m[at(1, 0, 0)],
            2.0 + 2.0 * 3.0 + 3.0 * 4.0 + 4.0 * 5.0 + 5.0 * 6.0
        );
        assert_eq!(m[at(5, 0, 0)], 6.0);
    }

    #[test]
    fn total_energy_is_conserved_and_both_pair_searches_agree() {
        let steps = 40;
        let a = sequential(64, steps, Pairs::HalfShell);
        let b = sequential(64, steps, Pairs::Boxes);
        let total = |r: &WaterResult, s: usize| r.energy[s][0] + r.energy[s][1];
        let (e0, e1) = (total(&a, 0), total(&a, steps as usize - 1));
        let kin = a.energy[0][1];
        assert!(
            (e1 - e0).abs() < 0.02 * kin,
            "energy drift {e0} -> {e1} (kinetic {kin})"
        );
        for s in 0..steps as usize {
            let (x, y) = (total(&a, s), total(&b, s));
            assert!(
                (x - y).abs() <= 1e-9 * (1.0 + x.abs()),
                "step {s}: {x} vs {y}"
            );
        }
        for (ma, mb) in a.mols.iter().zip(&b.mols) {
            for k in 0..MOL {
                assert!((ma[k] - mb[k]).abs() <= 1e-9 * (1.0 + ma[k].abs()));
            }
        }
    }

    #[test]
    fn neighbour_boxes_are_unique() {
        let wb = WaterBox::new(9261);
        assert!(wb.cells >= 3 && wb.side / wb.cells as f64 >= wb.cutoff);
        assert_eq!(wb.neighbours(0).len(), 27);
        let small = WaterBox::new(64);
        assert_eq!(small.cells, 2);
        assert_eq!(small.neighbours(5).len(), 8);
    }
}
