//! Summaries of samples, and this machine's raw limits (the figures each
//! measurement is printed next to).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The median of `v` (sorted in place); NaN when nothing was measured.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// The `p` quantile of `v` (sorted in place), `p` from 0 to 1, rounded
/// down to a sample; NaN when nothing was measured.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "the index is (len - 1) * p rounded down, p clamped to 0..=1: a sample's index"
)]
pub(crate) fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[((v.len() - 1) as f64 * p.clamp(0.0, 1.0)) as usize]
}

/// Raw limit: a value passed between two threads through one cache line.
pub fn raw_cache_line_one_way_ns(iters: u32) -> f64 {
    #[repr(align(64))]
    struct CacheLine(AtomicU64);
    let a = Arc::new((CacheLine(AtomicU64::new(0)), CacheLine(AtomicU64::new(0))));
    let b = a.clone();
    let t = std::thread::spawn(move || {
        for i in 1..=u64::from(iters) {
            while b.0 .0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            b.1 .0.store(i, Ordering::Release);
        }
    });
    let mut samples = Vec::with_capacity(iters as usize);
    for i in 1..=u64::from(iters) {
        let t0 = Instant::now();
        a.0 .0.store(i, Ordering::Release);
        while a.1 .0.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        samples.push(t0.elapsed().as_nanos() as f64 / 2.0);
    }
    let _ = t.join();
    median(&mut samples)
}

/// Raw limit: memcpy bandwidth in MB/s for `size`-byte copies.
pub fn raw_memcpy_mb_s(size: usize) -> f64 {
    let src = vec![7u8; 8 << 20];
    let mut dst = vec![0u8; 8 << 20];
    let mut samples = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        let mut off = 0;
        let mut bytes = 0usize;
        while bytes < 64 << 20 {
            dst[off..off + size].copy_from_slice(&src[off..off + size]);
            bytes += size;
            off = (off + size) % (src.len() - size + 1);
        }
        std::hint::black_box(&dst);
        samples.push(bytes as f64 / t0.elapsed().as_secs_f64() / 1e6);
    }
    median(&mut samples)
}
