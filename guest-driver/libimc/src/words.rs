//! C `int`s and saved registers as the unsigned words they carry, bit for
//! bit. The seed's interface passes keys, ids and return codes as `int`,
//! and the kernel saves a register as a signed `greg_t`; the Rust side
//! keeps the same 32 or 64 bits unsigned.

use std::ffi::c_int;

/// A C `int` as the 32-bit word it is (a negative key is a key too).
pub(crate) fn word_of(v: c_int) -> u32 {
    u32::from_ne_bytes(v.to_ne_bytes())
}

/// A 32-bit word back as the C `int` it came from.
pub(crate) fn int_of(w: u32) -> c_int {
    c_int::from_ne_bytes(w.to_ne_bytes())
}

/// A saved register (`greg_t`) as the 64 bits the CPU holds.
pub(crate) fn reg_bits(v: i64) -> u64 {
    u64::from_ne_bytes(v.to_ne_bytes())
}

/// 64 register bits as the `greg_t` the kernel restores.
pub(crate) fn greg_of(bits: u64) -> i64 {
    i64::from_ne_bytes(bits.to_ne_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_keep_every_bit() {
        for v in [0, 1, -1, c_int::MIN, c_int::MAX] {
            assert_eq!(int_of(word_of(v)), v);
        }
        assert_eq!(word_of(-1), u32::MAX);
        for v in [0, -1, i64::MIN, i64::MAX, 0x100] {
            assert_eq!(greg_of(reg_bits(v)), v);
        }
        assert_eq!(reg_bits(-1), u64::MAX);
    }
}
