//! What the UMP tests share: messages whose bytes say which message they
//! are, and rings small enough that messages stream through them.

use ump::Config;

/// A message whose bytes say which message it is, so a mix-up shows.
pub fn message(tag: u64, len: usize) -> Vec<u8> {
    let mut x = tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// 4 KiB rings and 1 KiB fragments: most messages stream in pieces.
pub fn small_rings() -> Config {
    Config {
        ring_bytes: 4096,
        shm_ring_bytes: 4096,
        region_bytes: 256 << 10,
        fragment_bytes: 1024,
        ..Config::default()
    }
}
