//! `wtest` and `test`, the Cashmere debugging programs of seed 002 s.9: a
//! small array partitioned by thread; every thread works on every partition
//! and every element is checked at each step.

use dsm_core::{Dsm, DsmError, SharedArray};

use super::error::AppError;

pub struct WtestData {
    a: SharedArray<u32>,
    counter: SharedArray<u64>,
    per: usize,
}

pub fn setup(csm: &Dsm, per: usize) -> Result<WtestData, DsmError> {
    let p = (csm.nodes() * csm.threads()) as usize;
    Ok(WtestData {
        a: csm.alloc(p * per, true)?,
        counter: csm.alloc(1, true)?,
        per,
    })
}

fn value(round: u32, i: usize) -> u32 {
    (round + 1).wrapping_mul(0x9e37_79b9) ^ low_bits(i).wrapping_mul(2_654_435_761)
}

/// The low 32 bits of an element's index, for the check values' hashes.
#[allow(
    clippy::cast_possible_truncation,
    reason = "a hash input: the low bits are the point"
)]
pub(super) fn low_bits(i: usize) -> u32 {
    i as u32
}

/// A debugging program read a wrong value (wtest, test, subword).
pub(super) fn mismatch(check: &'static str, element: usize, got: u64, want: u64) -> AppError {
    AppError::Wtest {
        check,
        element,
        got,
        want,
    }
}

/// Processors (nodes x threads) wtest and test can run on: one bit each in
/// a 32-bit word (`csm::run` refuses more).
pub const MAX_PROCESSORS: usize = 32;

/// wtest: per round, owners write their partitions and everyone checks every
/// element; then every thread visits every element and sets its own bit,
/// partition by partition under that partition's lock (very fine-grain
/// sharing), and everyone checks every element again. Returns the number of
/// element checks made.
pub fn wtest(csm: &Dsm, d: &WtestData, tid: usize, rounds: u32) -> Result<u64, AppError> {
    let p = (csm.nodes() * csm.threads()) as usize;
    assert!(p <= MAX_PROCESSORS, "wtest sets one bit per thread");
    let all = if p == 32 { u32::MAX } else { (1u32 << p) - 1 };
    let mine = tid * d.per..(tid + 1) * d.per;
    let mut checks = 0u64;
    csm.mark_start();
    for r in 0..rounds {
        for i in mine.clone() {
            d.a.set(i, value(r, i));
        }
        csm.barrier()?;
        for i in 0..p * d.per {
            let v = d.a.get(i);
            if v != value(r, i) {
                return Err(mismatch(
                    "wtest write phase",
                    i,
                    v.into(),
                    value(r, i).into(),
                ));
            }
            checks += 1;
        }
        csm.barrier()?;
        for i in mine.clone() {
            d.a.set(i, 0);
        }
        csm.barrier()?;
        for k in 0..p {
            let q = (tid + k) % p;
            csm.lock_acquire(u32::try_from(q).expect("a partition number fits u32"))?;
            for i in q * d.per..(q + 1) * d.per {
                d.a.set(i, d.a.get(i) | (1 << tid));
            }
            csm.lock_release(u32::try_from(q).expect("a partition number fits u32"))?;
        }
        csm.barrier()?;
        for i in 0..p * d.per {
            let v = d.a.get(i);
            if v != all {
                return Err(mismatch("wtest bit phase", i, v.into(), all.into()));
            }
            checks += 1;
        }
        csm.barrier()?;
    }
    csm.mark_end();
    Ok(checks)
}

/// test: per round, owners write their partitions; each thread checks its
/// right neighbour's partition and adds one to a lock-protected counter;
/// after a barrier everyone checks the counter.
pub fn test(csm: &Dsm, d: &WtestData, tid: usize, rounds: u32) -> Result<u64, AppError> {
    let p = (csm.nodes() * csm.threads()) as usize;
    let mut checks = 0u64;
    csm.mark_start();
    for r in 0..rounds {
        for i in tid * d.per..(tid + 1) * d.per {
            d.a.set(i, value(r, i));
        }
        csm.barrier()?;
        let q = (tid + 1) % p;
        for i in q * d.per..(q + 1) * d.per {
            let v = d.a.get(i);
            if v != value(r, i) {
                return Err(mismatch("test neighbour", i, v.into(), value(r, i).into()));
            }
            checks += 1;
        }
        csm.lock_acquire(0)?;
        d.counter.set(0, d.counter.get(0) + 1);
        csm.lock_release(0)?;
        csm.barrier()?;
        let c = d.counter.get(0);
        let want = (p as u64) * u64::from(r + 1);
        if c != want {
            return Err(mismatch("test counter", 0, c, want));
        }
        checks += 1;
        csm.barrier()?;
    }
    csm.mark_end();
    Ok(checks)
}
