//! The program's own globals are shared memory, as under pthreads: they are
//! the top of Cashmere's heap.
//!
//! Fork gave SPLASH's processes a copy of the parent's memory; threads
//! share one. Here the processes are threads of several guests, so the
//! globals must be made shared explicitly. `mc-cc` renames the `.data`
//! and `.bss` sections of the program's own object files to `csm_data` and
//! `csm_bss`, and its linker script places them together at
//! [`GLOBALS_AT`], bracketed by `csm_globals_start` and `csm_globals_end`
//! (64 KiB aligned), apart from libc's and libcsm's own data. At start-up
//! (`runtime`) node 0 saves its globals, the range is unmapped, and
//! Cashmere maps its heap so that it ends exactly there: the globals'
//! pages become heap pages, node 0 writes the saved values back (becoming
//! their home), and every node sees them, and every later write to them,
//! under release consistency (seed 000 s.2.1), as a data-race-free program
//! sees its globals under pthreads. The `G_MALLOC` space and the
//! runtime's control block lie below them, in the same heap.
//!
//! The executable is linked without PIE and run without address
//! randomisation (`early.rs`), so the addresses globals hold (functions,
//! string literals, `G_MALLOC`'d memory, libc's objects, `argv`) mean the
//! same on every node.

/// Where `mc-cc`'s linker script puts the program's globals: in the low
/// 2 GiB the default (small) code model addresses, above the executable
/// and below the `brk` heap (which starts after the highest segment), with
/// room below for a heap of up to 1 GiB.
pub const GLOBALS_AT: usize = 0x7000_0000;

/// Where the program's globals are.
#[derive(Clone, Copy, Debug)]
pub struct Globals {
    pub start: usize,
    pub len: usize,
}

impl Globals {
    /// From the linker script's bounds (null when the program was not
    /// linked by `mc-cc`).
    pub fn new(start: *const u8, stop: *const u8) -> Globals {
        let (s, e) = (start as usize, stop as usize);
        if s == 0 || e <= s {
            Globals { start: 0, len: 0 }
        } else {
            Globals {
                start: s,
                len: e - s,
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A private copy of the globals as they are now.
    pub fn copy(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        if self.len > 0 {
            // SAFETY: the range is this process's own data segment, mapped
            // and readable until the runtime unmaps it.
            unsafe {
                std::ptr::copy_nonoverlapping(self.start as *const u8, v.as_mut_ptr(), self.len)
            };
        }
        v
    }
}

/// The executable's load bias (0 without PIE): function addresses are
/// shipped relative to it.
pub fn load_bias() -> usize {
    let mut out = (0usize, 0usize);
    phdrs(&mut out);
    out.0
}

/// The end of the executable's segments below [`GLOBALS_AT`]: the heap
/// must start above it.
pub fn image_end() -> usize {
    let mut out = (0usize, 0usize);
    phdrs(&mut out);
    out.1
}

fn phdrs(out: &mut (usize, usize)) {
    extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        out: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid entry with `dlpi_phnum`
        // program headers, and `out` is the tuple below.
        unsafe {
            let out = &mut *out.cast::<(usize, usize)>();
            let i = &*info;
            out.0 = usize::try_from(i.dlpi_addr).expect("an address fits usize");
            for k in 0..i.dlpi_phnum as usize {
                let ph = &*i.dlpi_phdr.add(k);
                let end = usize::try_from(i.dlpi_addr + ph.p_vaddr + ph.p_memsz)
                    .expect("an address fits usize");
                if ph.p_type == libc::PT_LOAD && end <= GLOBALS_AT {
                    out.1 = out.1.max(end);
                }
            }
        }
        1 // the first object is the executable
    }
    // SAFETY: `first` writes only through `out`, a live local.
    unsafe { libc::dl_iterate_phdr(Some(first), std::ptr::from_mut(out).cast::<libc::c_void>()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_copy() {
        let data = [1u8, 2, 3, 4];
        let g = Globals::new(data.as_ptr(), data.as_ptr().wrapping_add(4));
        assert_eq!(g.len, 4);
        assert_eq!(g.copy(), data);
        assert!(Globals::new(std::ptr::null(), std::ptr::null()).is_empty());
        // This test executable is PIE, loaded above the globals' address.
        assert!(load_bias() > GLOBALS_AT);
        assert_eq!(image_end(), 0);
    }
}
