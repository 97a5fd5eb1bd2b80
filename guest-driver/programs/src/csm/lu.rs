//! LU: SPLASH-2's LU without contiguous blocks (seed 000 s.3.2). The matrix
//! is one column-major array, so the B x B tiles that different processors
//! own share pages: "LU incurs a large amount of false sharing across
//! tiles" (footnote 2), write-write false sharing at tile boundaries. As in
//! the paper's modified LU, a column of tiles goes to the processors of one
//! node (the tile grid has as many rows as a node has threads). The
//! algorithm is in `blocked_lu.rs`.

use cashmere::Csm;

use super::blocked_lu::{BlockedLu, Owners, TileLayout, Tiles};
use super::error::AppError;
use super::problem::HeapPlan;

/// Element (i, j) at `j * n + i`.
pub struct ColumnMajor {
    n: usize,
}

impl TileLayout for ColumnMajor {
    fn index(&self, i: usize, j: usize) -> usize {
        j * self.n + i
    }
    fn elements(&self) -> usize {
        self.n * self.n
    }
}

pub fn setup(csm: &Csm, n: usize, block: usize) -> Result<BlockedLu<ColumnMajor>, AppError> {
    let procs = (csm.nodes() * csm.threads()) as usize;
    let owners = Owners::with_rows(procs, csm.threads() as usize);
    let a = csm.alloc(n * n, true)?;
    Ok(BlockedLu::new(
        "lu",
        Tiles::new(n, block),
        owners,
        ColumnMajor { n },
        a,
    ))
}

pub fn footprint(n: usize, page_size: u32) -> usize {
    HeapPlan::new(page_size).array::<f64>(n * n, true).bytes()
}
