//! Radix: parallel radix sort with prefix sums (Blelloch et al. 1991;
//! SPLASH-2's RADIX kernel, seed 001 Table 1), written from the published
//! algorithm, not from SPLASH's source. Keys below 2^key_bits are sorted by
//! digits of `radix_bits` bits, least significant first, each pass stable:
//! every processor counts its own band's digits into its histogram; after
//! a barrier, prefix sums over (digit, processor) of all histograms tell it
//! where its keys of each digit go; it sorts its band by the digit locally
//! and writes each digit's run to its place in the other array. A barrier
//! ends the pass. The scatter is all-to-all: every processor writes runs
//! into every part of the destination (write-write false sharing at runs'
//! edges), which is why seed 001 finds Radix the hardest of its seven.
//!
//! Keys are integers and every pass is stable, so the parallel result is
//! the sequential one exactly: compared key by key.

use std::ops::Range;
use std::sync::OnceLock;

use dsm_core::{Dsm, DsmError, SharedArray};

use super::error::AppError;
use super::problem::HeapPlan;
use super::verify;
use super::workload::{ComputeWindow, Workload};

/// The sort's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RadixShape {
    pub keys: usize,
    /// Bits of a digit: the radix is 2^radix_bits.
    pub radix_bits: u32,
    /// Keys are below 2^key_bits.
    pub key_bits: u32,
}

impl RadixShape {
    fn radix(&self) -> usize {
        1 << self.radix_bits
    }
    /// The digits' shifts, least significant first.
    fn shifts(&self) -> impl Iterator<Item = u32> {
        (0..self.key_bits).step_by(self.radix_bits as usize)
    }
    /// An even number of passes leaves the keys where they began.
    fn ends_in_first(&self) -> bool {
        self.shifts().count() % 2 == 0
    }
}

/// Processor `p`'s band of `len` keys.
fn band(p: usize, procs: usize, len: usize) -> Range<usize> {
    p * len / procs..(p + 1) * len / procs
}

/// Key `i`: a pure function of the position, below 2^key_bits.
fn key_of(i: usize, key_bits: u32) -> u32 {
    let mut x = (i as u64)
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    x ^= x >> 29;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 32;
    let mask = if key_bits >= 32 {
        u64::from(u32::MAX)
    } else {
        (1u64 << key_bits) - 1
    };
    u32::try_from(x & mask).expect("masked to 32 bits")
}

fn digit(key: u32, shift: u32, radix: usize) -> usize {
    (key >> shift) as usize & (radix - 1)
}

/// The histogram of `keys`' digits at `shift`.
fn count(keys: &[u32], shift: u32, hist: &mut [u64]) {
    let radix = hist.len();
    hist.fill(0);
    for &k in keys {
        hist[digit(k, shift, radix)] += 1;
    }
}

/// Where processor `me`'s keys of each digit start: the prefix sum over
/// (digit, processor) of every processor's histogram (`hist[p * radix + d]`).
fn offsets(hist: &[u64], procs: usize, me: usize, radix: usize) -> Vec<u64> {
    let mut at = vec![0; radix];
    let mut sum = 0;
    for (d, a) in at.iter_mut().enumerate() {
        for q in 0..procs {
            if q == me {
                *a = sum;
            }
            sum += hist[q * radix + d];
        }
    }
    at
}

/// The stable scatter: each key of `src` to `dst[at[digit]]`, which moves on.
fn scatter(src: &[u32], shift: u32, at: &mut [u64], dst: &mut [u32]) {
    let radix = at.len();
    for &k in src {
        let a = &mut at[digit(k, shift, radix)];
        dst[usize::try_from(*a).expect("a key's place fits usize")] = k;
        *a += 1;
    }
}

/// The sequential sort: the sorted keys.
pub fn sequential(s: RadixShape) -> Vec<u32> {
    let mut src: Vec<u32> = (0..s.keys).map(|i| key_of(i, s.key_bits)).collect();
    let mut dst = vec![0; s.keys];
    let mut hist = vec![0; s.radix()];
    super::seq_timing::compute_begins();
    for shift in s.shifts() {
        count(&src, shift, &mut hist);
        let mut at = offsets(&hist, 1, 0, s.radix());
        scatter(&src, shift, &mut at, &mut dst);
        std::mem::swap(&mut src, &mut dst);
    }
    src
}

pub fn footprint(s: RadixShape, page_size: u32, procs: usize) -> usize {
    HeapPlan::new(page_size)
        .array::<u32>(s.keys, true)
        .array::<u32>(s.keys, true)
        .array::<u64>(procs * s.radix(), true)
        .bytes()
}

pub struct Radix {
    shape: RadixShape,
    procs: usize,
    a: SharedArray<u32>,
    b: SharedArray<u32>,
    /// Every processor's histogram of the pass: `hist[p * radix + d]`.
    hist: SharedArray<u64>,
    reference: OnceLock<Vec<u32>>,
    window: ComputeWindow,
}

/// The largest digit: 2^16 counters per processor.
pub const MAX_RADIX_BITS: u32 = 16;

pub fn setup(csm: &Dsm, shape: RadixShape) -> Result<Radix, AppError> {
    if !(1..=MAX_RADIX_BITS).contains(&shape.radix_bits) || !(1..=32).contains(&shape.key_bits) {
        return Err(verify::SuiteError::Shape {
            app: "radix",
            why: format!(
                "radix 2^{} and keys of {} bits: the radix is 2^1 to 2^{MAX_RADIX_BITS}, keys 1 to 32 bits",
                shape.radix_bits, shape.key_bits
            ),
        }
        .into());
    }
    let procs = (csm.nodes() * csm.threads()) as usize;
    Ok(Radix {
        shape,
        procs,
        a: csm.alloc(shape.keys, true)?,
        b: csm.alloc(shape.keys, true)?,
        hist: csm.alloc(procs * shape.radix(), true)?,
        reference: OnceLock::new(),
        window: ComputeWindow::default(),
    })
}

impl Radix {
    /// One pass from `src` to `dst` by the digit at `shift`.
    fn pass(
        &self,
        csm: &Dsm,
        tid: usize,
        mine: Range<usize>,
        shift: u32,
        (src, dst): (SharedArray<u32>, SharedArray<u32>),
    ) -> Result<(), DsmError> {
        let radix = self.shape.radix();
        let my_hist = tid * radix..(tid + 1) * radix;
        // SAFETY: nobody writes `src` in this pass, and this processor's
        // histogram is its own until the barrier; the slices end before it.
        let (keys, counts) = unsafe {
            let keys = src.as_slice(mine);
            let counts = self.hist.as_mut_slice(my_hist);
            count(keys, shift, counts);
            (keys.to_vec(), counts.to_vec())
        };
        csm.poll()?;
        csm.barrier()?;
        // SAFETY: histograms are only read until the pass's last barrier.
        let at = offsets(
            unsafe { self.hist.as_slice(0..self.hist.len()) },
            self.procs,
            tid,
            radix,
        );
        // The band sorted by the digit locally, by the same scatter (each
        // digit's run starting where the band's own prefix sums say), then
        // each run copied to its place.
        let local_start = offsets(&counts, 1, 0, radix);
        let mut local_at = local_start.clone();
        let mut sorted = vec![0; keys.len()];
        scatter(&keys, shift, &mut local_at, &mut sorted);
        let place = |v: u64| usize::try_from(v).expect("a key's place fits usize");
        for (d, &len) in counts.iter().enumerate() {
            if len == 0 {
                continue;
            }
            let from = place(local_start[d]);
            // SAFETY: the prefix sums give each (digit, processor) its own
            // run of `dst`, which this processor alone writes in this pass;
            // the slice ends before the poll.
            let run = unsafe { dst.as_mut_slice(place(at[d])..place(at[d] + len)) };
            run.copy_from_slice(&sorted[from..from + place(len)]);
            csm.poll()?;
        }
        csm.barrier()
    }
}

impl Workload for Radix {
    fn run(&self, csm: &Dsm, tid: usize) -> Result<u64, AppError> {
        let s = self.shape;
        let mine = band(tid, self.procs, s.keys);
        // First touch: each processor writes its own band of the keys.
        for i in mine.clone() {
            self.a.set(i, key_of(i, s.key_bits));
        }
        csm.barrier()?;
        csm.mark_start();
        let (mut src, mut dst) = (self.a, self.b);
        for shift in s.shifts() {
            self.pass(csm, tid, mine.clone(), shift, (src, dst))?;
            std::mem::swap(&mut src, &mut dst);
        }
        self.window.end(csm, tid)?;
        let out = if s.ends_in_first() { self.a } else { self.b };
        let want = self.reference.get_or_init(|| sequential(s));
        for i in mine.clone() {
            verify::count("radix", "key", i, u64::from(out.get(i)), u64::from(want[i]))?;
        }
        Ok(mine.len() as u64)
    }

    fn window(&self) -> &ComputeWindow {
        &self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequential_sort_sorts_a_permutation_of_the_keys() {
        for s in [
            RadixShape {
                keys: 5000,
                radix_bits: 8,
                key_bits: 32,
            },
            // A last digit narrower than the radix.
            RadixShape {
                keys: 3001,
                radix_bits: 10,
                key_bits: 19,
            },
        ] {
            let got = sequential(s);
            assert!(got.windows(2).all(|w| w[0] <= w[1]));
            let mut want: Vec<u32> = (0..s.keys).map(|i| key_of(i, s.key_bits)).collect();
            want.sort_unstable();
            assert_eq!(got, want);
            assert!(want.iter().all(|&k| u64::from(k) < 1u64 << s.key_bits));
        }
    }

    #[test]
    fn offsets_give_each_processor_its_run_of_each_digit() {
        // Two processors, radix 2: digit 0 counts 3 and 1, digit 1 counts 2 and 4.
        let hist = [3, 2, 1, 4];
        assert_eq!(offsets(&hist, 2, 0, 2), vec![0, 4]);
        assert_eq!(offsets(&hist, 2, 1, 2), vec![3, 6]);
    }
}
