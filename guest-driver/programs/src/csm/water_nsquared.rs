//! Water-Nsquared (SPLASH-2; seed 000 s.3.2): molecules are the unit of
//! partitioning, each processor owning a contiguous range. Each step every
//! processor predicts its molecules and computes their intramolecular
//! forces; after a barrier it computes the intermolecular forces of each of
//! its molecules with the following half of all molecules (the O(n^2)
//! pair loop), adds them up privately, then adds them into the shared
//! forces of every molecule it touched under that molecule's lock; after a
//! barrier it corrects its molecules, and adds its energies under a lock.
//!
//! Sharing (seed 000 s.3.4.1): "Water-Nsquared uses per-molecule locks, and
//! so performs a very large number of lock operations"; every processor
//! reads half of all positions each step, and writes forces of molecules
//! homed elsewhere (multiple writers per page, diffs at every release).
//!
//! The order in which processors add into a molecule's force depends on
//! who gets its lock first, so sums differ from the sequential run's in the
//! last bits: every value of every molecule record and the energies are
//! compared within `TOLERANCE` (relative, see `verify::close`).

use std::ops::Range;
use std::sync::OnceLock;

use dsm_core::{Dsm, SharedArray};

use super::error::AppError;
use super::problem::HeapPlan;
use super::verify;
use super::water::{self, Mol, Pairs, Sites, WaterBox, WaterResult, FORCE, MOL};
use super::workload::{ComputeWindow, Workload};

/// Relative tolerance of the comparison with the sequential run.
pub const TOLERANCE: f64 = 1e-9;
const ENERGY_LOCK: u32 = 1;
pub const MOL_LOCK_BASE: u32 = 2;
pub const MOL_LOCKS: u32 = 256;

pub fn footprint(n: usize, steps: u32, page_size: u32) -> usize {
    HeapPlan::new(page_size)
        .array::<f64>(n * MOL, true)
        .array::<f64>(2 * steps as usize, true)
        .bytes()
}

/// Shared molecule records and per-step energies, with their accessors.
pub struct MolArray {
    pub mols: SharedArray<f64>,
    pub energy: SharedArray<f64>,
}

impl MolArray {
    pub fn alloc(csm: &Dsm, n: usize, steps: u32) -> Result<MolArray, AppError> {
        Ok(MolArray {
            mols: csm.alloc(n * MOL, true)?,
            energy: csm.alloc(2 * steps as usize, true)?,
        })
    }
    /// Molecule `i`'s record as a plain array.
    ///
    /// # Safety
    ///
    /// As [`SharedArray::as_mut_slice`] for the record: the calling thread
    /// alone touches it while the reference lives, and makes no
    /// synchronisation call meanwhile.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn record_mut(&self, i: usize) -> &mut Mol {
        // SAFETY: the caller's promise.
        unsafe { self.mols.as_mut_array(i * MOL) }
    }
    /// Molecule `i`'s positions as a plain array.
    ///
    /// # Safety
    ///
    /// As [`SharedArray::as_slice`] for the positions: nobody writes them
    /// while the reference lives, and the caller makes no synchronisation
    /// call meanwhile.
    pub unsafe fn sites(&self, i: usize) -> &Sites {
        // SAFETY: the caller's promise.
        unsafe { self.mols.as_array(i * MOL) }
    }
    pub fn store(&self, i: usize, m: &Mol) {
        for (k, v) in m.iter().enumerate().take(7 * 9) {
            self.mols.set(i * MOL + k, *v);
        }
    }
    /// Add `f` into molecule `i`'s shared force.
    pub fn add_force(&self, i: usize, f: &[f64; 9]) {
        for (k, v) in f.iter().enumerate() {
            let at = i * MOL + FORCE * 9 + k;
            self.mols.set(at, self.mols.get(at) + v);
        }
    }
    /// Add this processor's energies of `step` (under the energy lock).
    pub fn add_energy(&self, csm: &Dsm, step: usize, pot: f64, kin: f64) -> Result<(), AppError> {
        csm.lock_acquire(ENERGY_LOCK)?;
        self.energy.set(2 * step, self.energy.get(2 * step) + pot);
        self.energy
            .set(2 * step + 1, self.energy.get(2 * step + 1) + kin);
        csm.lock_release(ENERGY_LOCK)?;
        Ok(())
    }

    /// Compare molecule `i`'s record with the sequential run's.
    pub fn check(&self, app: &'static str, i: usize, want: &Mol) -> Result<u64, AppError> {
        for (k, w) in want.iter().enumerate().take(7 * 9) {
            let at = i * MOL + k;
            verify::close(app, "molecule record", at, self.mols.get(at), *w, TOLERANCE)?;
        }
        Ok(7 * 9)
    }

    /// Compare the energies of every step with the sequential run's.
    pub fn check_energy(&self, app: &'static str, want: &WaterResult) -> Result<u64, AppError> {
        for (s, e) in want.energy.iter().enumerate() {
            verify::close(
                app,
                "potential energy",
                s,
                self.energy.get(2 * s),
                e[0],
                TOLERANCE,
            )?;
            verify::close(
                app,
                "kinetic energy",
                s,
                self.energy.get(2 * s + 1),
                e[1],
                TOLERANCE,
            )?;
        }
        Ok(2 * want.energy.len() as u64)
    }
}

pub struct WaterNsquared {
    wb: WaterBox,
    steps: u32,
    procs: usize,
    shared: MolArray,
    reference: OnceLock<WaterResult>,
    window: ComputeWindow,
}

pub fn setup(csm: &Dsm, n: usize, steps: u32) -> Result<WaterNsquared, AppError> {
    Ok(WaterNsquared {
        wb: WaterBox::new(n),
        steps,
        procs: (csm.nodes() * csm.threads()) as usize,
        shared: MolArray::alloc(csm, n, steps)?,
        reference: OnceLock::new(),
        window: ComputeWindow::default(),
    })
}

fn range(p: usize, procs: usize, n: usize) -> Range<usize> {
    p * n / procs..(p + 1) * n / procs
}

impl Workload for WaterNsquared {
    fn run(&self, csm: &Dsm, tid: usize) -> Result<u64, AppError> {
        let n = self.wb.molecules;
        let sh = &self.shared;
        let mine = range(tid, self.procs, n);
        // As SPLASH-2's WATER-NSQUARED, whose main process sets up every
        // molecule (INITIA) before the others start: first touch makes
        // processor 0's node home of all of them, and migration moves
        // homes to the molecules' owners (seed 000 Table IV: 9.2K
        // migrations at 32 processors, diffs from 251K to 17K).
        if tid == 0 {
            for i in 0..n {
                sh.store(i, &water::initial(i, &self.wb));
            }
            for k in 0..2 * self.steps as usize {
                sh.energy.set(k, 0.0);
            }
        }
        csm.barrier()?;
        csm.mark_start();
        for step in 0..self.steps as usize {
            let mut pot = 0.0;
            for i in mine.clone() {
                // SAFETY: this processor's molecules are touched by it
                // alone until the barrier; the reference ends before it.
                let m = unsafe { sh.record_mut(i) };
                water::predict(m);
                pot += water::intra(m);
            }
            csm.barrier()?;
            let mut f = vec![[0.0; 9]; n];
            {
                // SAFETY: nobody writes a position between this barrier
                // and the next (the force phase writes forces only, which
                // a position's slice does not cover), and the references
                // end before the locks below. They live across the polls
                // (each row's, a loop back edge of seed 000 s.2.1): a poll
                // answers other nodes' requests and is no synchronisation,
                // so what the positions hold does not change there.
                let pos: Vec<&water::Sites> = (0..n).map(|k| unsafe { sh.sites(k) }).collect();
                water::half_shell_forces(
                    &self.wb,
                    mine.clone(),
                    |k| pos[k],
                    &mut f,
                    &mut pot,
                    || csm.poll(),
                )?;
            }
            // Each lock once, for every molecule it covers that this
            // processor has forces for (exactly zero in every component:
            // none, or nothing to add), as SPLASH-2 takes a molecule's lock
            // to add into it; one acquire per lock rather than per
            // molecule, as a lock guards every molecule `j` with
            // `j % MOL_LOCKS` its number.
            let touched = |j: usize| f[j].iter().any(|v| *v != 0.0);
            // Each processor starts at its own lock, so that 32 of them do
            // not queue on the same one.
            let locks = MOL_LOCKS as usize;
            for l in (0..locks).map(|k| (k + tid * locks / self.procs) % locks) {
                let mut group = (l..n).step_by(locks).filter(|&j| touched(j));
                let Some(first) = group.next() else {
                    continue;
                };
                let lock = MOL_LOCK_BASE + u32::try_from(l).expect("below MOL_LOCKS");
                csm.lock_acquire(lock)?;
                for j in std::iter::once(first).chain(group) {
                    sh.add_force(j, &f[j]);
                }
                csm.lock_release(lock)?;
            }
            csm.barrier()?;
            let mut kin = 0.0;
            for i in mine.clone() {
                // SAFETY: as in the prediction, until the energy lock.
                let m = unsafe { sh.record_mut(i) };
                water::correct(m);
                water::wrap(&self.wb, m);
                kin += water::kinetic(m);
            }
            sh.add_energy(csm, step, pot, kin)?;
        }
        self.window.end(csm, tid)?;
        let want = self
            .reference
            .get_or_init(|| water::sequential(n, self.steps, Pairs::HalfShell));
        let mut checked = 0;
        for i in mine {
            checked += sh.check("water-nsquared", i, &want.mols[i])?;
        }
        if tid == 0 {
            checked += sh.check_energy("water-nsquared", want)?;
        }
        Ok(checked)
    }

    fn window(&self) -> &ComputeWindow {
        &self.window
    }
}
