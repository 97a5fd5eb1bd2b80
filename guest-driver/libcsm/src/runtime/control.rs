//! The runtime's control block at the start of the shared heap: node 0
//! writes it before the start flag (allocation pointer, lock-id counter,
//! the processes' functions, its layout), the other nodes read it after.

use super::Runtime;

/// Identifies node 0's start record.
pub(super) const MAGIC: u64 = 0x4353_4d43_0001; // "CSMC", layout 1

// Control block words (u64), then the functions, then the chunk map.
pub(super) const W_MAGIC: usize = 0;
pub(super) const W_NEXT_ALLOC: usize = 1;
pub(super) const W_NEXT_LOCK: usize = 2;
pub(super) const W_BIAS: usize = 3;
pub(super) const W_LAYOUT: usize = 4;
pub(super) const W_GLOBALS: usize = 5;
pub(super) const W_PROCS: usize = 6;
pub(super) const W_FUNCS: usize = 8;

impl Runtime {
    pub(super) fn word(&self, i: usize) -> *mut u64 {
        // SAFETY: the control block holds W_FUNCS + procs words.
        unsafe { self.control.add(i) }
    }
    pub(super) fn read(&self, i: usize) -> u64 {
        // SAFETY: in the control block (shared heap); faults are Cashmere's.
        unsafe { std::ptr::read_volatile(self.word(i)) }
    }
    pub(super) fn write(&self, i: usize, v: u64) {
        // SAFETY: as `read`.
        unsafe { std::ptr::write_volatile(self.word(i), v) }
    }
}
