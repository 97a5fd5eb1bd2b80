//! Ilink: genetic linkage analysis on a pedigree (FASTLINK's ILINK; seed
//! 000 s.3.2). The paper's CLP pedigree is not available, so the input is a
//! synthetic pedigree of a stated size: a chain of nuclear families (the
//! father of each family is the first child of the one before; mothers
//! marry in), two loci (a dominant disease locus with 2 alleles and a
//! marker with `alleles` alleles, so 2 x alleles haplotypes and
//! H(H+1)/2 phase-known genotypes), phenotypes simulated from genotypes
//! dropped through the pedigree at recombination fraction 0.1.
//!
//! The likelihood of the pedigree is computed by peeling, once per
//! recombination fraction theta (the `thetas` likelihood evaluations of the
//! optimiser). Parallelism is FASTLINK's master-slave pattern (seed 000
//! s.3.3: "all-to-one in one phase, and one-to-all in the other"): for each
//! nuclear family every processor computes a slice of the father's
//! genotype array and writes it to a shared array homed at the master
//! (all-to-one); after a barrier the master alone rescales it into the
//! array every processor reads for the next family (one-to-all). Every
//! number is computed by one processor, in the sequential order: the
//! log-likelihoods are compared bit for bit.

use std::ops::Range;
use std::sync::OnceLock;

use dsm_core::{Dsm, SharedArray};

use super::error::AppError;
use super::problem::HeapPlan;
use super::verify;
use super::workload::{ComputeWindow, Workload};

/// The pedigree and the analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IlinkShape {
    pub families: usize,
    pub children: usize,
    pub alleles: usize,
    pub thetas: u32,
}

/// Penetrance of the disease genotype with 0, 1, 2 copies of the disease
/// allele (dominant, incomplete), and its frequency.
const PENETRANCE: [f64; 3] = [0.02, 0.9, 0.9];
const DISEASE_FREQ: f64 = 0.05;
/// Recombination fraction the synthetic data is simulated at.
const TRUE_THETA: f64 = 0.1;

/// Haplotypes and genotypes of the two loci.
struct Genetics {
    /// Marker alleles.
    m: usize,
    /// Haplotypes: disease allele * m + marker allele.
    h: usize,
    /// Genotype g as its (h1 <= h2) pair.
    pairs: Vec<(usize, usize)>,
    /// Genotype of an unordered pair, `index[h1 * h + h2]`.
    index: Vec<usize>,
}

impl Genetics {
    fn new(alleles: usize) -> Genetics {
        let h = 2 * alleles;
        let mut pairs = Vec::new();
        let mut index = vec![0; h * h];
        for a in 0..h {
            for b in a..h {
                index[a * h + b] = pairs.len();
                index[b * h + a] = pairs.len();
                pairs.push((a, b));
            }
        }
        Genetics {
            m: alleles,
            h,
            pairs,
            index,
        }
    }
    fn g(&self) -> usize {
        self.pairs.len()
    }
    fn disease_copies(&self, g: usize) -> usize {
        let (a, b) = self.pairs[g];
        usize::from(a / self.m == 0) + usize::from(b / self.m == 0)
    }
    fn haplotype_freq(&self, hap: usize) -> f64 {
        let d = if hap / self.m == 0 {
            DISEASE_FREQ
        } else {
            1.0 - DISEASE_FREQ
        };
        d / self.m as f64
    }
    /// Founder genotype probabilities (linkage equilibrium).
    fn prior(&self) -> Vec<f64> {
        self.pairs
            .iter()
            .map(|&(a, b)| {
                let p = self.haplotype_freq(a) * self.haplotype_freq(b);
                if a == b {
                    p
                } else {
                    2.0 * p
                }
            })
            .collect()
    }
    /// Gametes of every genotype at recombination fraction `theta`: up to
    /// four (haplotype, probability) pairs each.
    fn gametes(&self, theta: f64) -> Vec<Vec<(usize, f64)>> {
        let m = self.m;
        self.pairs
            .iter()
            .map(|&(a, b)| {
                let (da, ma, db, mb) = (a / m, a % m, b / m, b % m);
                let mut out: Vec<(usize, f64)> = Vec::with_capacity(4);
                for (hap, p) in [
                    (a, (1.0 - theta) / 2.0),
                    (b, (1.0 - theta) / 2.0),
                    (da * m + mb, theta / 2.0),
                    (db * m + ma, theta / 2.0),
                ] {
                    match out.iter_mut().find(|(x, _)| *x == hap) {
                        Some(e) => e.1 += p,
                        None => out.push((hap, p)),
                    }
                }
                out
            })
            .collect()
    }
}

/// SplitMix64 as a stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn pick(&mut self, weights: &[(usize, f64)]) -> usize {
        let total: f64 = weights.iter().map(|w| w.1).sum();
        let mut x = self.unit() * total;
        for &(v, w) in weights {
            if x < w {
                return v;
            }
            x -= w;
        }
        weights.last().map_or(0, |w| w.0)
    }
}

/// Persons: 0 is the first father; family k has its mother at
/// `1 + k * (1 + children)` and its children after her. The father of
/// family k > 0 is the first child of family k - 1.
fn mother(s: &IlinkShape, k: usize) -> usize {
    1 + k * (1 + s.children)
}
fn child(s: &IlinkShape, k: usize, c: usize) -> usize {
    mother(s, k) + 1 + c
}
fn father(s: &IlinkShape, k: usize) -> usize {
    if k == 0 {
        0
    } else {
        child(s, k - 1, 0)
    }
}
fn persons(s: &IlinkShape) -> usize {
    1 + s.families * (1 + s.children)
}

/// Every person's phenotype likelihood over genotypes (persons x G):
/// simulated genotypes, then affection by penetrance and the marker typed
/// with probability 0.9.
fn phenotypes(s: &IlinkShape, gen: &Genetics) -> Vec<f64> {
    let g = gen.g();
    let mut rng = Rng(0x111e_c0de ^ s.families as u64);
    let founder: Vec<(usize, f64)> = (0..gen.h).map(|x| (x, gen.haplotype_freq(x))).collect();
    let gam = gen.gametes(TRUE_THETA);
    let n = persons(s);
    let mut truth = vec![0usize; n];
    let draw_founder = |rng: &mut Rng| gen.index[rng.pick(&founder) * gen.h + rng.pick(&founder)];
    truth[0] = draw_founder(&mut rng);
    for k in 0..s.families {
        truth[mother(s, k)] = draw_founder(&mut rng);
        for c in 0..s.children {
            let a = rng.pick(&gam[truth[father(s, k)]]);
            let b = rng.pick(&gam[truth[mother(s, k)]]);
            truth[child(s, k, c)] = gen.index[a * gen.h + b];
        }
    }
    let mut out = vec![0.0; n * g];
    for (p, &t) in truth.iter().enumerate() {
        let affected = rng.unit() < PENETRANCE[gen.disease_copies(t)];
        let typed = rng.unit() < 0.9;
        let (ta, tb) = gen.pairs[t];
        let marker = |x: usize, y: usize| {
            let (u, v) = (x % gen.m, y % gen.m);
            let (w, z) = (ta % gen.m, tb % gen.m);
            (u == w && v == z) || (u == z && v == w)
        };
        for (gi, &(a, b)) in gen.pairs.iter().enumerate() {
            let pen = PENETRANCE[gen.disease_copies(gi)];
            let l = if affected { pen } else { 1.0 - pen };
            let seen = !typed || marker(a, b);
            out[p * g + gi] = if seen { l } else { 0.0 };
        }
    }
    out
}

/// The recombination fraction of evaluation `t`.
pub fn theta(s: &IlinkShape, t: u32) -> f64 {
    0.5 * f64::from(t + 1) / f64::from(s.thetas + 1)
}

/// The father's array of family `k` for genotypes `range`, given the
/// children's arrays `kids` (each G long) and the mother's prior x
/// phenotype `mom`.
fn peel_slice(
    gen: &Genetics,
    gam: &[Vec<(usize, f64)>],
    dad_pheno: &dyn Fn(usize) -> f64,
    mom: &[f64],
    kids: &[Vec<f64>],
    range: Range<usize>,
    out: &mut dyn FnMut(usize, f64),
) {
    let h = gen.h;
    let mut v = vec![vec![0.0; h]; kids.len()];
    for gf in range {
        // v_c[b] = sum over the father's gametes a of T(gf -> a) L_c({a, b}).
        for (vc, kid) in v.iter_mut().zip(kids) {
            for (b, x) in vc.iter_mut().enumerate() {
                let mut s = 0.0;
                for &(a, p) in &gam[gf] {
                    s += p * kid[gen.index[a * h + b]];
                }
                *x = s;
            }
        }
        let mut sum = 0.0;
        for (gm, &pm) in mom.iter().enumerate() {
            if pm == 0.0 {
                continue;
            }
            let mut prod = pm;
            for vc in &v {
                let mut s = 0.0;
                for &(b, p) in &gam[gm] {
                    s += p * vc[b];
                }
                prod *= s;
            }
            sum += prod;
        }
        out(gf, dad_pheno(gf) * sum);
    }
}

/// Scale `v` so its largest entry is 1; returns ln(scale) (0 if all zero).
fn rescale(v: &mut [f64]) -> f64 {
    let max = v.iter().copied().fold(0.0, f64::max);
    if max > 0.0 {
        for x in v.iter_mut() {
            *x /= max;
        }
        max.ln()
    } else {
        0.0
    }
}

/// The sequential run: the log-likelihood at each theta.
pub fn sequential(s: &IlinkShape) -> Vec<f64> {
    let gen = Genetics::new(s.alleles);
    let g = gen.g();
    let pheno = phenotypes(s, &gen);
    let prior = gen.prior();
    super::seq_timing::compute_begins();
    let person = |p: usize| &pheno[p * g..(p + 1) * g];
    (0..s.thetas)
        .map(|t| {
            let gam = gen.gametes(theta(s, t));
            let mut conn: Option<Vec<f64>> = None;
            let mut log_scale = 0.0;
            for k in (0..s.families).rev() {
                let mom: Vec<f64> = (0..g).map(|x| prior[x] * person(mother(s, k))[x]).collect();
                let kids: Vec<Vec<f64>> = (0..s.children)
                    .map(|c| {
                        let ph = person(child(s, k, c));
                        match (&conn, c) {
                            (Some(down), 0) => (0..g).map(|x| ph[x] * down[x]).collect(),
                            _ => ph.to_vec(),
                        }
                    })
                    .collect();
                let dad = person(father(s, k));
                let mut r = vec![0.0; g];
                peel_slice(&gen, &gam, &|x| dad[x], &mom, &kids, 0..g, &mut |x, v| {
                    r[x] = v
                });
                log_scale += rescale(&mut r);
                conn = Some(r);
            }
            let r = conn.unwrap_or_else(|| person(0).to_vec());
            let total: f64 = (0..g).map(|x| prior[x] * r[x]).sum();
            log_scale + total.ln()
        })
        .collect()
}

pub fn footprint(s: &IlinkShape, page_size: u32) -> usize {
    let g = Genetics::new(s.alleles).g();
    HeapPlan::new(page_size)
        .array::<f64>(persons(s) * g, true)
        .array::<f64>(g, true)
        .array::<f64>(g, true)
        .array::<f64>(s.thetas as usize, true)
        .bytes()
}

pub struct Ilink {
    shape: IlinkShape,
    gen: Genetics,
    procs: usize,
    /// Phenotype arrays, persons x G, written by the master.
    pheno: SharedArray<f64>,
    /// The slaves' slices of the family's result (all-to-one).
    part: SharedArray<f64>,
    /// The rescaled result every processor reads next (one-to-all).
    conn: SharedArray<f64>,
    loglik: SharedArray<f64>,
    reference: OnceLock<Vec<f64>>,
    window: ComputeWindow,
}

pub fn setup(csm: &Dsm, shape: IlinkShape) -> Result<Ilink, AppError> {
    let gen = Genetics::new(shape.alleles);
    let g = gen.g();
    Ok(Ilink {
        pheno: csm.alloc(persons(&shape) * g, true)?,
        part: csm.alloc(g, true)?,
        conn: csm.alloc(g, true)?,
        loglik: csm.alloc(shape.thetas as usize, true)?,
        shape,
        gen,
        procs: (csm.nodes() * csm.threads()) as usize,
        reference: OnceLock::new(),
        window: ComputeWindow::default(),
    })
}

impl Workload for Ilink {
    fn run(&self, csm: &Dsm, tid: usize) -> Result<u64, AppError> {
        let s = &self.shape;
        let gen = &self.gen;
        let g = gen.g();
        let master = tid == 0;
        if master {
            // The master reads the pedigree: every array is homed with it.
            for (i, v) in phenotypes(s, gen).into_iter().enumerate() {
                self.pheno.set(i, v);
            }
            for x in 0..g {
                self.part.set(x, 0.0);
                self.conn.set(x, 0.0);
            }
            for t in 0..s.thetas as usize {
                self.loglik.set(t, 0.0);
            }
        }
        csm.barrier()?;
        csm.mark_start();
        let prior = gen.prior();
        let mine = tid * g / self.procs..(tid + 1) * g / self.procs;
        // SAFETY: the phenotypes are written before the barrier above and
        // only read after it; each slice lives within one statement.
        let person = |p: usize| unsafe { self.pheno.as_slice(p * g..(p + 1) * g) };
        for t in 0..s.thetas {
            let gam = gen.gametes(theta(s, t));
            let mut log_scale = 0.0;
            for k in (0..s.families).rev() {
                // A loop back edge (seed 000 s.2.1's polling).
                csm.poll()?;
                let mom_ph = person(mother(s, k));
                let mom: Vec<f64> = (0..g).map(|x| prior[x] * mom_ph[x]).collect();
                // SAFETY: the master writes the connecting array between the
                // two barriers after the peeling; here everybody reads it.
                let conn = unsafe { self.conn.as_slice(0..g) };
                let kids: Vec<Vec<f64>> = (0..s.children)
                    .map(|c| {
                        let ph = person(child(s, k, c));
                        if c == 0 && k + 1 < s.families {
                            // One-to-all: the master's array from the family below.
                            (0..g).map(|x| ph[x] * conn[x]).collect()
                        } else {
                            ph.to_vec()
                        }
                    })
                    .collect();
                let dad = person(father(s, k));
                // SAFETY: this processor's slice of the father's array is
                // written by it alone until the barrier, which the master
                // reads it after; the slice ends before the barrier.
                let part = unsafe { self.part.as_mut_slice(mine.clone()) };
                // All-to-one: each processor's slice of the father's array.
                peel_slice(
                    gen,
                    &gam,
                    &|x| dad[x],
                    &mom,
                    &kids,
                    mine.clone(),
                    &mut |x, v| part[x - mine.start] = v,
                );
                csm.barrier()?;
                if master {
                    // SAFETY: between the two barriers the master alone
                    // touches the father's array and the connecting array.
                    let (part, conn) =
                        unsafe { (self.part.as_slice(0..g), self.conn.as_mut_slice(0..g)) };
                    let mut r = part.to_vec();
                    log_scale += rescale(&mut r);
                    conn.copy_from_slice(&r);
                    if k == 0 {
                        let total: f64 = (0..g).map(|x| prior[x] * r[x]).sum();
                        self.loglik.set(t as usize, log_scale + total.ln());
                    }
                }
                csm.barrier()?;
            }
        }
        self.window.end(csm, tid)?;
        let want = self.reference.get_or_init(|| sequential(s));
        for (t, w) in want.iter().enumerate() {
            verify::exact("ilink", "log-likelihood", t, self.loglik.get(t), *w)?;
        }
        Ok(want.len() as u64)
    }

    fn window(&self) -> &ComputeWindow {
        &self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn genotypes_and_gametes_are_probabilities() {
        let gen = Genetics::new(3);
        assert_eq!(gen.g(), 21);
        let prior: f64 = gen.prior().iter().sum();
        assert!((prior - 1.0).abs() < 1e-12, "{prior}");
        for gam in gen.gametes(0.2) {
            let s: f64 = gam.iter().map(|x| x.1).sum();
            assert!((s - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn likelihood_peaks_near_the_simulated_recombination_fraction() {
        let s = IlinkShape {
            families: 60,
            children: 4,
            alleles: 4,
            thetas: 9,
        };
        let ll = sequential(&s);
        assert!(ll.iter().all(|x| x.is_finite()), "{ll:?}");
        // theta 0.05 .. 0.45: the data were simulated at 0.1, so the
        // likelihood is higher there than at free recombination's end.
        let best = (0..ll.len())
            .max_by(|&a, &b| ll[a].total_cmp(&ll[b]))
            .unwrap();
        assert!(
            theta(&s, u32::try_from(best).expect("a theta index fits u32")) < 0.3,
            "best theta {} {ll:?}",
            theta(&s, u32::try_from(best).expect("a theta index fits u32"))
        );
        assert!(ll[0] > ll[8], "{ll:?}");
    }
}
