//! Water-Spatial (SPLASH-2; seed 000 s.3.2): the same simulation as
//! Water-Nsquared with the box divided into a 3-D grid of cells at least a
//! cutoff wide, each cell a linked list of the molecules in it; cells are
//! the unit of partitioning (each processor owns a contiguous range of
//! cells). Each step a processor predicts the molecules of its cells, then
//! (after a barrier) computes the force on each of them from the molecules
//! of the neighbouring cells, writing only its own molecules (so a pair is
//! computed by both owners, and no force needs a lock); after a barrier it
//! corrects them, takes the molecules that left its cells off their lists,
//! and (after a barrier) links them into their new cells under the cell's
//! lock.
//!
//! Sharing (seed 000 s.3.3): "Simulated molecules are grouped into
//! physically proximate cells, so data sharing happens only when processors
//! must access molecules in neighboring cells. Molecules can move among
//! cells, however, creating a loss of locality and an increase in false
//! sharing over time."
//!
//! The order of a cell's list depends on which processor linked a molecule
//! in first, so force sums differ from the sequential run's in the last
//! bits: records and energies are compared within
//! `water_nsquared::TOLERANCE`.

use std::sync::OnceLock;

use dsm_core::{Dsm, SharedArray};

use super::error::AppError;
use super::problem::HeapPlan;
use super::water::{self, Pairs, WaterBox, WaterResult, MOL};
use super::water_nsquared::MolArray;
use super::workload::{ComputeWindow, Workload};

pub const CELL_LOCK_BASE: u32 = 2;
pub const CELL_LOCKS: u32 = 256;
const NIL: i32 = -1;

pub fn footprint(n: usize, steps: u32, page_size: u32) -> usize {
    let cells = WaterBox::new(n).cells.pow(3);
    HeapPlan::new(page_size)
        .array::<f64>(n * MOL, true)
        .array::<f64>(2 * steps as usize, true)
        .array::<i32>(cells, true)
        .array::<i32>(n, true)
        .bytes()
}

pub struct WaterSpatial {
    wb: WaterBox,
    steps: u32,
    procs: usize,
    shared: MolArray,
    /// First molecule of each cell's list, and each molecule's successor.
    head: SharedArray<i32>,
    next: SharedArray<i32>,
    reference: OnceLock<WaterResult>,
    window: ComputeWindow,
}

pub fn setup(csm: &Dsm, n: usize, steps: u32) -> Result<WaterSpatial, AppError> {
    let wb = WaterBox::new(n);
    let shared = MolArray::alloc(csm, n, steps)?;
    Ok(WaterSpatial {
        head: csm.alloc(wb.cells.pow(3), true)?,
        next: csm.alloc(n, true)?,
        wb,
        steps,
        procs: (csm.nodes() * csm.threads()) as usize,
        shared,
        reference: OnceLock::new(),
        window: ComputeWindow::default(),
    })
}

impl WaterSpatial {
    fn members(&self, cell: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut m = self.head.get(cell);
        while m != NIL {
            let i = usize::try_from(m).expect("a linked molecule is not NIL");
            out.push(i);
            m = self.next.get(i);
        }
        out
    }

    fn link(&self, cell: usize, m: usize) {
        self.next.set(m, self.head.get(cell));
        self.head
            .set(cell, i32::try_from(m).expect("a molecule number fits i32"));
    }
}

impl Workload for WaterSpatial {
    fn run(&self, csm: &Dsm, tid: usize) -> Result<u64, AppError> {
        let n = self.wb.molecules;
        let sh = &self.shared;
        let cells = self.wb.cells.pow(3);
        let my_cells = tid * cells / self.procs..(tid + 1) * cells / self.procs;
        // First touch: each processor places the molecules that start in its
        // cells, and builds its cells' lists.
        for c in my_cells.clone() {
            self.head.set(c, NIL);
        }
        for i in 0..n {
            let m = water::initial(i, &self.wb);
            let c = self.wb.cell_of(water::oxygen(&m));
            if my_cells.contains(&c) {
                sh.store(i, &m);
                self.link(c, i);
            }
        }
        if tid == 0 {
            for k in 0..2 * self.steps as usize {
                sh.energy.set(k, 0.0);
            }
        }
        csm.barrier()?;
        csm.mark_start();
        for step in 0..self.steps as usize {
            let mine: Vec<(usize, usize)> = my_cells
                .clone()
                .flat_map(|c| self.members(c).into_iter().map(move |i| (c, i)))
                .collect();
            let mut pot = 0.0;
            for &(_, i) in &mine {
                // SAFETY: this processor's molecules are touched by it
                // alone until the barrier; the reference ends before it.
                let m = unsafe { sh.record_mut(i) };
                water::predict(m);
                pot += water::intra(m);
            }
            csm.barrier()?;
            let mut lists: Vec<Option<Vec<usize>>> = vec![None; cells];
            for &(c, i) in &mine {
                csm.poll()?;
                let mut fi = [0.0; 9];
                // SAFETY: nobody writes a position between this barrier
                // and the next (the force phase writes forces only, which
                // a position's slice does not cover); each reference ends
                // within this molecule's pairs, before the force is added.
                // (A poll is no synchronisation: it answers other nodes'
                // requests and leaves what the positions hold as it was.)
                let pos = |k| unsafe { sh.sites(k) };
                let a = pos(i);
                for nc in self.wb.neighbours(c) {
                    let list = lists[nc].get_or_insert_with(|| self.members(nc));
                    for &j in list.iter() {
                        if j == i {
                            continue;
                        }
                        let mut sink = [0.0; 9];
                        if let Some(e) = water::pair(&self.wb, a, pos(j), &mut fi, &mut sink) {
                            pot += 0.5 * e;
                        }
                    }
                }
                sh.add_force(i, &fi);
            }
            csm.barrier()?;
            let mut kin = 0.0;
            let mut movers = Vec::new();
            for &(c, i) in &mine {
                // SAFETY: as in the prediction, until the energy lock.
                let m = unsafe { sh.record_mut(i) };
                water::correct(m);
                water::wrap(&self.wb, m);
                kin += water::kinetic(m);
                let to = self.wb.cell_of(water::oxygen(m));
                if to != c {
                    movers.push((c, i, to));
                }
            }
            sh.add_energy(csm, step, pot, kin)?;
            // Take the leavers off this processor's lists (nobody else
            // writes them in this phase) ...
            for &(c, i, _) in &movers {
                let mut prev = NIL;
                let mut m = self.head.get(c);
                let index = |m: i32| usize::try_from(m).expect("a linked molecule is not NIL");
                while m != NIL && index(m) != i {
                    prev = m;
                    m = self.next.get(index(m));
                }
                let after = self.next.get(i);
                if prev == NIL {
                    self.head.set(c, after);
                } else {
                    self.next.set(index(prev), after);
                }
            }
            csm.barrier()?;
            // ... and link them into their new cells, whoever owns those.
            for &(_, i, to) in &movers {
                let lock = CELL_LOCK_BASE
                    + u32::try_from(to % CELL_LOCKS as usize).expect("below CELL_LOCKS");
                csm.lock_acquire(lock)?;
                self.link(to, i);
                csm.lock_release(lock)?;
            }
            csm.barrier()?;
        }
        self.window.end(csm, tid)?;
        let want = self
            .reference
            .get_or_init(|| water::sequential(n, self.steps, Pairs::Boxes));
        let mut checked = 0;
        for c in my_cells {
            for i in self.members(c) {
                checked += sh.check("water-spatial", i, &want.mols[i])?;
            }
        }
        if tid == 0 {
            checked += sh.check_energy("water-spatial", want)?;
        }
        Ok(checked)
    }

    fn window(&self) -> &ComputeWindow {
        &self.window
    }
}
