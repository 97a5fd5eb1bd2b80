//! CLU: SPLASH-2's LU with contiguous blocks (seed 000 s.3.2). Each tile is
//! stored contiguously and each processor's tiles together, starting on a
//! page of their own, so a page holds one processor's data: no false
//! sharing, and pages move only as whole perimeter tiles are read. The
//! algorithm is in `blocked_lu.rs`.

use dsm_core::{Dsm, SharedArray};

use super::blocked_lu::{Block, BlockedLu, Owners, TileLayout, Tiles};
use super::error::AppError;
use super::problem::HeapPlan;

/// Tile (I, J) at `base[I * nb + J]`, row-major inside; a processor's tiles
/// one after another (by tile column, then row), each processor's run
/// starting on a page boundary.
pub struct Contiguous {
    tiles: Tiles,
    base: Vec<usize>,
    len: usize,
}

impl Contiguous {
    pub fn new(tiles: Tiles, owners: Owners, procs: usize, page_size: u32) -> Contiguous {
        let nb = tiles.nb;
        let per_page = page_size as usize / 8;
        let mut base = vec![0; nb * nb];
        let mut next = 0usize;
        for p in 0..procs {
            next = next.div_ceil(per_page) * per_page;
            for tj in 0..nb {
                for ti in 0..nb {
                    if owners.owner(ti, tj) == p {
                        base[ti * nb + tj] = next;
                        next += tiles.b * tiles.b;
                    }
                }
            }
        }
        Contiguous {
            tiles,
            base,
            len: next.max(1),
        }
    }
}

impl Contiguous {
    /// Elements of tile (ti, tj): `b` rows of `b`, the last tiles' unused
    /// rows and columns included.
    fn span(&self, ti: usize, tj: usize) -> std::ops::Range<usize> {
        let (b, start) = (self.tiles.b, self.base[ti * self.tiles.nb + tj]);
        start..start + b * b
    }
}

impl TileLayout for Contiguous {
    type Ref<'a> = Block<&'a [f64]>;
    type Mut<'a> = Block<&'a mut [f64]>;
    unsafe fn tile<'a>(&'a self, a: &'a SharedArray<f64>, ti: usize, tj: usize) -> Self::Ref<'a> {
        Block {
            // SAFETY: the caller's promise for the tile.
            d: unsafe { a.as_slice(self.span(ti, tj)) },
            b: self.tiles.b,
        }
    }
    unsafe fn tile_mut<'a>(
        &'a self,
        a: &'a SharedArray<f64>,
        ti: usize,
        tj: usize,
    ) -> Self::Mut<'a> {
        Block {
            // SAFETY: the caller's promise for the tile.
            d: unsafe { a.as_mut_slice(self.span(ti, tj)) },
            b: self.tiles.b,
        }
    }
    fn index(&self, i: usize, j: usize) -> usize {
        let b = self.tiles.b;
        self.base[(i / b) * self.tiles.nb + j / b] + (i % b) * b + j % b
    }
    fn elements(&self) -> usize {
        self.len
    }
    fn sequential(t: Tiles) -> Vec<f64> {
        super::blocked_lu::sequential_blocks(t.n, t.b)
    }
}

fn layout(csm_procs: usize, n: usize, block: usize, page_size: u32) -> (Tiles, Owners, Contiguous) {
    let tiles = Tiles::new(n, block);
    let owners = Owners::square(csm_procs);
    let layout = Contiguous::new(tiles, owners, csm_procs, page_size);
    (tiles, owners, layout)
}

pub fn setup(csm: &Dsm, n: usize, block: usize) -> Result<BlockedLu<Contiguous>, AppError> {
    let procs = (csm.nodes() * csm.threads()) as usize;
    let (tiles, owners, layout) = layout(procs, n, block, csm.page_size());
    let a = csm.alloc(layout.elements(), true)?;
    Ok(BlockedLu::new("clu", tiles, owners, layout, a))
}

pub fn footprint(n: usize, block: usize, page_size: u32, procs: usize) -> usize {
    // Every element has a slot: past the largest heap that bound answers,
    // without building tile tables as large as the matrix.
    let lower = n.saturating_mul(n).saturating_mul(8);
    if lower > dsm_core::MAX_HEAP_BYTES {
        return lower;
    }
    let (_, _, layout) = layout(procs, n, block, page_size);
    HeapPlan::new(page_size)
        .array::<f64>(layout.elements(), true)
        .bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_has_its_own_slot_and_processors_start_on_pages() {
        let (tiles, owners, l) = layout(4, 40, 16, 8192);
        let mut seen = std::collections::HashSet::new();
        for i in 0..40 {
            for j in 0..40 {
                assert!(seen.insert(l.index(i, j)), "({i},{j})");
                assert!(l.index(i, j) < l.elements());
            }
        }
        for p in 0..4 {
            let first = (0..tiles.nb)
                .flat_map(|tj| (0..tiles.nb).map(move |ti| (ti, tj)))
                .find(|&(ti, tj)| owners.owner(ti, tj) == p)
                .map(|(ti, tj)| l.base[ti * tiles.nb + tj]);
            assert_eq!(first.map(|b| b % 1024), Some(0), "processor {p}");
        }
    }
}
