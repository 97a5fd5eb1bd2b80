//! The program's own globals, shipped from node 0 to every node at CREATE,
//! as TreadMarks' `Tmk_distribute` shipped shared variables (seed 002's
//! Cashmere ran fork-style SPLASH programs, whose children got a copy of
//! the parent's memory; here the processes of other nodes are threads of
//! other guests, so the copy is made explicitly).
//!
//! Which bytes are "the program's globals": `mc-cc` renames the `.data` and
//! `.bss` sections of the program's own object files to `csm_data` and
//! `csm_bss`, so the linker gathers them apart from libc's and libcsm's and
//! defines `__start_csm_data` ... `__stop_csm_bss` around them; the macro
//! file passes those bounds to `MAIN_INITENV`. Copying libc's or the Rust
//! runtime's state from another process would break this one, so nothing
//! else is copied. The executable is linked without PIE and re-executed
//! without address randomisation (`early.rs`), so the addresses those
//! globals hold (functions, string literals, other globals, the shared
//! heap at its fixed base) mean the same on every node.

/// One contiguous range of the program's globals.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    pub start: usize,
    pub len: usize,
}

impl Range {
    /// From the section bounds the macro file passes (null when the
    /// program has no such section).
    pub fn new(start: *const u8, stop: *const u8) -> Range {
        let (s, e) = (start as usize, stop as usize);
        if s == 0 || e <= s {
            Range { start: 0, len: 0 }
        } else {
            Range {
                start: s,
                len: e - s,
            }
        }
    }
}

/// The globals: `.data` then `.bss` of the program's own objects.
#[derive(Clone, Copy, Debug)]
pub struct Globals {
    pub ranges: [Range; 2],
}

/// The chunk whose zero-ness is recorded: a zero chunk is not shipped.
pub const CHUNK: usize = 4096;

impl Globals {
    pub fn len(&self) -> usize {
        self.ranges.iter().map(|r| r.len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn chunks(&self) -> usize {
        self.len().div_ceil(CHUNK)
    }

    /// Copy the globals into `dst` (the snapshot in the shared heap,
    /// [`Globals::len`] bytes), chunk by chunk, leaving chunks that are all
    /// zero unwritten (the heap starts zeroed, and an untouched page is
    /// never fetched) and marking the others in `written`.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `self.len()` bytes, and `written`
    /// for `self.chunks()` bytes; the ranges must be this process's globals.
    pub unsafe fn snapshot(&self, dst: *mut u8, written: *mut u8) {
        let mut at = 0;
        let mut chunk = vec![0u8; CHUNK];
        for i in 0..self.chunks() {
            let n = CHUNK.min(self.len() - at);
            self.read(at, &mut chunk[..n]);
            let nonzero = chunk[..n].iter().any(|&b| b != 0);
            // SAFETY: `at + n <= len`, `i < chunks`, per the contract.
            unsafe {
                if nonzero {
                    std::ptr::copy_nonoverlapping(chunk.as_ptr(), dst.add(at), n);
                }
                std::ptr::write_volatile(written.add(i), nonzero as u8);
            }
            at += n;
        }
    }

    /// Replace this process's globals by the snapshot at `src`.
    ///
    /// # Safety
    /// As [`Globals::snapshot`], for reads; nothing else may use the
    /// globals meanwhile (no process of this node runs yet).
    pub unsafe fn restore(&self, src: *const u8, written: *const u8) {
        let mut at = 0;
        let mut chunk = vec![0u8; CHUNK];
        for i in 0..self.chunks() {
            let n = CHUNK.min(self.len() - at);
            // SAFETY: per the contract.
            let nonzero = unsafe { std::ptr::read_volatile(written.add(i)) } != 0;
            if nonzero {
                // SAFETY: per the contract.
                unsafe { std::ptr::copy_nonoverlapping(src.add(at), chunk.as_mut_ptr(), n) };
            } else {
                chunk[..n].fill(0);
            }
            self.write(at, &chunk[..n]);
            at += n;
        }
    }

    /// A private copy of the globals as they are now.
    pub fn copy(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len()];
        self.read(0, &mut v);
        v
    }

    /// Write `bytes` at offset `at` of the globals.
    pub fn write_at(&self, at: usize, bytes: &[u8]) {
        self.write(at, bytes);
    }

    /// Bytes `[at, at + buf.len())` of the concatenated ranges.
    fn read(&self, at: usize, buf: &mut [u8]) {
        self.each(at, buf.len(), |addr, off, n| {
            // SAFETY: the ranges are this process's own data sections.
            unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, buf[off..].as_mut_ptr(), n) }
        });
    }

    fn write(&self, at: usize, buf: &[u8]) {
        self.each(at, buf.len(), |addr, off, n| {
            // SAFETY: as `read`; the sections are writable.
            unsafe { std::ptr::copy_nonoverlapping(buf[off..].as_ptr(), addr as *mut u8, n) }
        });
    }

    /// Call `f(address, offset in the buffer, length)` for each piece of
    /// `[at, at + len)` that falls in one range.
    fn each(&self, mut at: usize, len: usize, mut f: impl FnMut(usize, usize, usize)) {
        let mut done = 0;
        let mut base = 0;
        for r in &self.ranges {
            while done < len && at >= base && at < base + r.len {
                let n = (base + r.len - at).min(len - done);
                f(r.start + (at - base), done, n);
                done += n;
                at += n;
            }
            base += r.len;
        }
    }
}

/// The executable's load bias (0 without PIE): function addresses are
/// shipped relative to it.
pub fn load_bias() -> usize {
    extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        out: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid entry, and `out` is the
        // `usize` below.
        unsafe { *(out as *mut usize) = (*info).dlpi_addr as usize };
        1 // the first object is the executable
    }
    let mut bias = 0usize;
    // SAFETY: `first` writes only through `out`, a live local.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut bias as *mut usize as *mut libc::c_void) };
    bias
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_and_restore_span_both_ranges_and_skip_zero_chunks() {
        let mut data = vec![0u8; 5000];
        let mut bss = vec![0u8; 9000];
        data[10] = 1;
        data[4999] = 2;
        bss[8999] = 3;
        let g = Globals {
            ranges: [
                Range::new(data.as_ptr(), data.as_ptr().wrapping_add(data.len())),
                Range::new(bss.as_ptr(), bss.as_ptr().wrapping_add(bss.len())),
            ],
        };
        assert_eq!(g.len(), 14000);
        let mut snap = vec![0u8; g.len()];
        let mut written = vec![9u8; g.chunks()];
        // SAFETY: buffers sized as the contract asks.
        unsafe { g.snapshot(snap.as_mut_ptr(), written.as_mut_ptr()) };
        assert_eq!(written, vec![1, 1, 0, 1]);
        assert_eq!((snap[10], snap[4999], snap[13999]), (1, 2, 3));
        data.fill(7);
        bss.fill(7);
        // SAFETY: as above; nothing else uses the vectors.
        unsafe { g.restore(snap.as_ptr(), written.as_ptr()) };
        assert_eq!(data[10], 1);
        assert_eq!(data[11], 0);
        assert_eq!(data[4999], 2);
        assert!(bss[..8999].iter().all(|&b| b == 0));
        assert_eq!(bss[8999], 3);
    }
}
