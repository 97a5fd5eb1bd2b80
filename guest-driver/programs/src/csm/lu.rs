//! LU: SPLASH-2's LU without contiguous blocks (seed 000 s.3.2). The matrix
//! is one column-major array, so the B x B tiles that different processors
//! own share pages: "LU incurs a large amount of false sharing across
//! tiles" (footnote 2), write-write false sharing at tile boundaries. As in
//! the paper's modified LU, a column of tiles goes to the processors of one
//! node (the tile grid has as many rows as a node has threads). The
//! algorithm is in `blocked_lu.rs`.

use std::ops::Range;

use dsm_core::{Dsm, SharedArray};

use super::blocked_lu::{BlockedLu, Cols, Owners, TileLayout, Tiles};
use super::error::AppError;
use super::problem::HeapPlan;

/// Element (i, j) at `j * n + i`; a tile is a slice of each of its columns.
pub struct ColumnMajor {
    tiles: Tiles,
}

impl ColumnMajor {
    /// Rows of tile row `ti` in each column of tile column `tj`, as
    /// element ranges of the array.
    fn segments(&self, ti: usize, tj: usize) -> impl Iterator<Item = Range<usize>> {
        let (n, rows) = (self.tiles.n, self.tiles.range(ti));
        self.tiles
            .range(tj)
            .map(move |c| c * n + rows.start..c * n + rows.end)
    }
}

impl TileLayout for ColumnMajor {
    type Ref<'a> = Cols<&'a [f64]>;
    type Mut<'a> = Cols<&'a mut [f64]>;
    fn index(&self, i: usize, j: usize) -> usize {
        j * self.tiles.n + i
    }
    fn elements(&self) -> usize {
        self.tiles.n * self.tiles.n
    }
    fn sequential(t: Tiles) -> Vec<f64> {
        super::blocked_lu::sequential(t.n, t.b)
    }
    unsafe fn tile<'a>(&'a self, a: &'a SharedArray<f64>, ti: usize, tj: usize) -> Self::Ref<'a> {
        // SAFETY: the caller's promise, for each column's piece of the tile.
        Cols(
            self.segments(ti, tj)
                .map(|r| unsafe { a.as_slice(r) })
                .collect(),
        )
    }
    unsafe fn tile_mut<'a>(
        &'a self,
        a: &'a SharedArray<f64>,
        ti: usize,
        tj: usize,
    ) -> Self::Mut<'a> {
        // SAFETY: the caller's promise, for each column's piece of the
        // tile; the pieces are disjoint.
        Cols(
            self.segments(ti, tj)
                .map(|r| unsafe { a.as_mut_slice(r) })
                .collect(),
        )
    }
}

pub fn setup(csm: &Dsm, n: usize, block: usize) -> Result<BlockedLu<ColumnMajor>, AppError> {
    let procs = (csm.nodes() * csm.threads()) as usize;
    let owners = Owners::with_rows(procs, csm.threads() as usize);
    let a = csm.alloc(n * n, true)?;
    let tiles = Tiles::new(n, block);
    Ok(BlockedLu::new(
        "lu",
        tiles,
        owners,
        ColumnMajor { tiles },
        a,
    ))
}

pub fn footprint(n: usize, page_size: u32) -> usize {
    HeapPlan::new(page_size).array::<f64>(n * n, true).bytes()
}
