//! Globals written after CREATE, brought back to node 0 when the processes
//! end. Under pthreads every process writes the one copy of a global;
//! here each node has its own copy from CREATE on, so a result a process
//! on another node leaves in a global (SPLASH-2's Water-Nsquared keeps its
//! final energy so: `if (ProcID == 0) XTT = LocalXTT;`) would never reach
//! the `main` that prints it. So, as TreadMarks' diffs do for shared pages
//! (seed 002 s.4.2), each node compares its globals with the copy node 0
//! shipped, byte by byte, when its last process ends, and leaves the
//! changed bytes in its return region in the shared heap before the end
//! barrier; after the barrier node 0 applies them to its own globals
//! (`WAIT_FOR_END`). A byte changed differently on node 0 and on another
//! node is a conflict: the other node's value is kept and node 0 says so.
//! During the run nothing moves: a global written by a process on one node
//! is not seen by processes on others (docs/c-programs.md, "Limits").
//!
//! A node's region: the count of changed bytes (u64), a bitmap of them,
//! then their values at their offsets. Nothing else is written, so a node
//! that changed nothing costs node 0 one word.

use crate::globals::Globals;

/// Globals larger than this have no return regions (every node would need
/// one as large in the shared heap); changes to them are only reported.
pub const MAX_GLOBALS: usize = 16 << 20;

/// The nodes' return regions in the shared heap.
pub struct Returns {
    base: *mut u8,
    stride: usize,
    len: usize,
}

/// What node 0 took from one node.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Merged {
    pub bytes: usize,
    pub conflicts: usize,
    pub first_conflict: Option<usize>,
}

fn bitmap_len(len: usize) -> usize {
    len.div_ceil(8)
}

impl Returns {
    /// Heap bytes for `nodes` nodes' regions (node 0 needs none).
    pub fn bytes_needed(len: usize, nodes: u32, page: usize) -> usize {
        if len == 0 || len > MAX_GLOBALS {
            return 0;
        }
        Self::stride(len, page) * nodes.saturating_sub(1) as usize
    }

    fn stride(len: usize, page: usize) -> usize {
        (8 + bitmap_len(len) + len).div_ceil(page) * page
    }

    /// The regions at `base` (allocated with [`Returns::bytes_needed`]).
    pub fn new(base: *mut u8, len: usize, page: usize) -> Option<Returns> {
        (len > 0 && len <= MAX_GLOBALS && !base.is_null()).then(|| Returns {
            base,
            stride: Self::stride(len, page),
            len,
        })
    }

    fn region(&self, node: u32) -> *mut u8 {
        // SAFETY: regions for nodes 1.. are allocated; callers pass those.
        unsafe { self.base.add((node as usize - 1) * self.stride) }
    }

    /// Node `node` (not 0): leave the bytes of `now` that differ from
    /// `shipped` in its region. Returns how many.
    ///
    /// # Safety
    /// The regions must be allocated for this node; `shipped` and `now`
    /// are `len` bytes.
    pub unsafe fn publish(&self, node: u32, shipped: &[u8], now: &[u8]) -> usize {
        let r = self.region(node);
        let mut bitmap = vec![0u8; bitmap_len(self.len)];
        let mut changed = 0;
        for (i, (a, b)) in shipped.iter().zip(now).enumerate() {
            if a != b {
                bitmap[i / 8] |= 1 << (i % 8);
                // SAFETY: `8 + bitmap + i` is inside the region.
                unsafe { std::ptr::write_volatile(r.add(8 + bitmap.len() + i), *b) };
                changed += 1;
            }
        }
        for (i, &m) in bitmap.iter().enumerate() {
            if m != 0 {
                // SAFETY: inside the region's bitmap.
                unsafe { std::ptr::write_volatile(r.add(8 + i), m) };
            }
        }
        // SAFETY: the region starts page-aligned, so the count is aligned.
        unsafe { std::ptr::write_volatile(r as *mut u64, changed as u64) };
        changed
    }

    /// Node 0: apply node `node`'s changes to `mine` (its globals, with
    /// `shipped` what it shipped), and to the globals themselves.
    ///
    /// # Safety
    /// As [`Returns::publish`]; no process of node 0 runs any more.
    pub unsafe fn merge(
        &self,
        node: u32,
        globals: &Globals,
        shipped: &[u8],
        mine: &mut [u8],
    ) -> Merged {
        let r = self.region(node);
        let mut m = Merged::default();
        // SAFETY: as in `publish`.
        if unsafe { std::ptr::read_volatile(r as *const u64) } == 0 {
            return m;
        }
        let bl = bitmap_len(self.len);
        for byte in 0..bl {
            // SAFETY: inside the region's bitmap.
            let bits = unsafe { std::ptr::read_volatile(r.add(8 + byte)) };
            if bits == 0 {
                continue;
            }
            for bit in 0..8 {
                let i = byte * 8 + bit;
                if bits & (1 << bit) == 0 || i >= self.len {
                    continue;
                }
                // SAFETY: inside the region's values.
                let v = unsafe { std::ptr::read_volatile(r.add(8 + bl + i)) };
                if mine[i] != shipped[i] && mine[i] != v {
                    m.conflicts += 1;
                    m.first_conflict.get_or_insert(i);
                }
                if mine[i] != v {
                    mine[i] = v;
                    globals.write_at(i, &[v]);
                }
                m.bytes += 1;
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::globals::Range;

    #[test]
    fn changed_bytes_come_back_and_conflicts_are_counted() {
        let mut region = vec![0u8; 3 * 4096];
        let len = 100;
        let r = Returns::new(region.as_mut_ptr(), len, 4096).expect("regions");
        let shipped = vec![1u8; len];
        let mut theirs = shipped.clone();
        theirs[3] = 9;
        theirs[70] = 7;
        // SAFETY: the region vector holds two nodes' regions.
        assert_eq!(unsafe { r.publish(2, &shipped, &theirs) }, 2);
        // Node 1 changed nothing.
        // SAFETY: as above.
        assert_eq!(unsafe { r.publish(1, &shipped, &shipped) }, 0);
        let mut globals_mem = shipped.clone();
        globals_mem[70] = 5; // node 0 wrote it too: a conflict
        let g = Globals {
            ranges: [
                Range::new(globals_mem.as_ptr(), globals_mem.as_ptr().wrapping_add(len)),
                Range::new(std::ptr::null(), std::ptr::null()),
            ],
        };
        let mut mine = globals_mem.clone();
        // SAFETY: as above; nothing else uses the memory.
        let m1 = unsafe { r.merge(1, &g, &shipped, &mut mine) };
        assert_eq!(m1, Merged::default());
        // SAFETY: as above.
        let m2 = unsafe { r.merge(2, &g, &shipped, &mut mine) };
        assert_eq!(m2.bytes, 2);
        assert_eq!((m2.conflicts, m2.first_conflict), (1, Some(70)));
        assert_eq!((globals_mem[3], globals_mem[70], globals_mem[4]), (9, 7, 1));
        assert_eq!(mine, globals_mem);
    }
}
