//! `subword`: a debugging program of this project, after seed 002 s.9's
//! wtest, for writes narrower than a word. Processors write interleaved
//! bytes, unaligned blocks of three bytes, and interleaved 16-bit halves of
//! shared words between two barriers (a data-race-free program at byte
//! granularity, as a C program may be), and every processor checks every
//! byte after each barrier. A diff that wrote whole words would write back
//! another node's bytes from its twin (docs/fidelity.md, "Sub-word
//! writes").

use dsm_core::{Dsm, DsmError, SharedArray};

use super::error::AppError;
use super::wtest::{low_bits, mismatch};

pub struct SubwordData {
    bytes: SharedArray<u8>,
    halves: SharedArray<u16>,
}

/// Bytes per processor in the byte array (`elements` of the problem each
/// are 8 bytes and 4 halves, so a few pages at the default size).
const BYTES_PER_ELEMENT: usize = 8;
const HALVES_PER_ELEMENT: usize = 4;

pub fn setup(csm: &Dsm, per: usize) -> Result<SubwordData, DsmError> {
    let p = (csm.nodes() * csm.threads()) as usize;
    Ok(SubwordData {
        bytes: csm.alloc(p * per * BYTES_PER_ELEMENT, true)?,
        halves: csm.alloc(p * per * HALVES_PER_ELEMENT, true)?,
    })
}

/// Byte `i`'s value in round `r` of phase `phase`: it changes from each
/// round and phase to the next (an odd step), so every write is a change.
fn byte(r: u32, phase: u32, i: usize) -> u8 {
    let step = (2 * r + phase + 1).wrapping_mul(0x9d);
    // A hash: its low byte.
    (step ^ low_bits(i).wrapping_mul(0x3b)).to_le_bytes()[0]
}

fn half(r: u32, i: usize) -> u16 {
    // A hash: its low half.
    let [a, b, _, _] =
        ((r + 1).wrapping_mul(0x9e37) ^ low_bits(i).wrapping_mul(0x79b9)).to_le_bytes();
    u16::from_le_bytes([a, b])
}

/// The ways bytes are shared out among `p` processors: byte by byte
/// (a word's bytes belong to up to four processors), and in blocks of three
/// (blocks straddle words, as a renderer's pixel blocks did).
fn byte_owner(phase: u32, i: usize, p: usize) -> usize {
    match phase {
        0 => i % p,
        _ => (i / 3) % p,
    }
}

/// Per round: each byte phase, then the halves, every processor writing its
/// own share and checking all after a barrier. Returns the checks made.
pub fn run(csm: &Dsm, d: &SubwordData, tid: usize, rounds: u32) -> Result<u64, AppError> {
    let p = (csm.nodes() * csm.threads()) as usize;
    let mut checks = 0u64;
    csm.mark_start();
    for r in 0..rounds {
        for phase in 0..2 {
            for i in (0..d.bytes.len()).filter(|&i| byte_owner(phase, i, p) == tid) {
                d.bytes.set(i, byte(r, phase, i));
            }
            csm.barrier()?;
            for i in 0..d.bytes.len() {
                let (got, want) = (d.bytes.get(i), byte(r, phase, i));
                if got != want {
                    let check = ["subword interleaved bytes", "subword blocks of 3 bytes"];
                    return Err(mismatch(check[phase as usize], i, got.into(), want.into()));
                }
                checks += 1;
            }
            csm.barrier()?;
        }
        for i in (tid..d.halves.len()).step_by(p) {
            d.halves.set(i, half(r, i));
        }
        csm.barrier()?;
        for i in 0..d.halves.len() {
            let (got, want) = (d.halves.get(i), half(r, i));
            if got != want {
                return Err(mismatch(
                    "subword 16-bit halves",
                    i,
                    got.into(),
                    want.into(),
                ));
            }
            checks += 1;
        }
        csm.barrier()?;
    }
    csm.mark_end();
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_write_changes_its_byte_and_words_have_several_owners() {
        for i in 0..64 {
            assert_ne!(byte(0, 0, i), byte(0, 1, i));
            assert_ne!(byte(0, 1, i), byte(1, 0, i));
            assert_ne!(half(0, i), half(1, i));
        }
        // With 2 processors, each word's bytes belong to both, in both
        // phases.
        for w in 0..16 {
            for phase in 0..2 {
                let owners: std::collections::BTreeSet<_> = (4 * w..4 * w + 4)
                    .map(|i| byte_owner(phase, i, 2))
                    .collect();
                assert_eq!(owners.len(), 2, "word {w} phase {phase}");
            }
        }
    }
}
