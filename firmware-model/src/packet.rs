//! Splitting a store into Memory Channel packets.
//!
//! The adapter collects stores into packets of at most `max_payload` bytes
//! (32 bytes on the 21164 / MC1 write buffers). The model cuts a store at every
//! multiple of `max_payload` in global address space, so a packet never crosses an
//! aligned payload block and so never crosses a page (pages are multiples of the
//! payload size).

use crate::types::{GlobalAddr, NodeId, PageNumber};

/// One packet on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Packet {
    /// Position in the hub's single global order (starts at 1).
    pub seq: u64,
    /// Adapter that sent it.
    pub source: NodeId,
    /// First global address it writes.
    pub addr: GlobalAddr,
    /// Payload bytes.
    pub len: u32,
    /// Offset of this packet's payload within the store it came from: the device
    /// copies `store[store_offset .. store_offset + len]`.
    pub store_offset: u32,
}

impl Packet {
    pub fn page(&self, page_size: u32) -> PageNumber {
        PageNumber(crate::saturating_u32(self.addr.0 / u64::from(page_size)))
    }

    pub fn page_offset(&self, page_size: u32) -> u32 {
        crate::rem_u32(self.addr.0, page_size)
    }
}

/// Consecutive packets of one store to one page, forwarded together where
/// the hub's outcome is the same as packet by packet (`hub/forward.rs`):
/// `packets` packets with consecutive sequence numbers from `first_seq`,
/// covering `len` bytes at `addr`, cut at multiples of `max_payload` as
/// [`split_store`] cuts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketRun {
    /// Sequence number of its first packet.
    pub first_seq: u64,
    /// How many packets.
    pub packets: u32,
    pub source: NodeId,
    /// First global address written.
    pub addr: GlobalAddr,
    /// Bytes of all its packets together.
    pub len: u32,
    /// Offset of its first byte within the store it came from.
    pub store_offset: u32,
    /// The page it writes (a run never crosses one).
    pub page: PageNumber,
    /// Offset of `addr` within that page.
    pub page_offset: u32,
    /// The payload size the packets were cut at.
    pub max_payload: u32,
}

impl PacketRun {
    /// Its packets one by one, in order, as the hub would have numbered
    /// them: each with its page offset.
    pub fn packets(&self) -> impl Iterator<Item = (Packet, u32)> + '_ {
        split_store(self.addr, self.len, self.max_payload)
            .zip(self.first_seq..)
            .map(|((addr, len, off), seq)| {
                (
                    Packet {
                        seq,
                        source: self.source,
                        addr,
                        len,
                        store_offset: self.store_offset + off,
                    },
                    self.page_offset + off,
                )
            })
    }
}

/// How many packets [`split_store`] cuts `len` bytes at `addr` into.
pub fn packet_count(addr: GlobalAddr, len: u32, max_payload: u32) -> u32 {
    if len == 0 {
        return 0;
    }
    let block = u64::from(max_payload.max(1));
    let first = addr.0 / block;
    let last = (addr.0 + u64::from(len) - 1) / block;
    crate::saturating_u32(last - first + 1)
}

/// The `(addr, len, store_offset)` pieces a store of `len` bytes at `addr` becomes.
pub fn split_store(
    addr: GlobalAddr,
    len: u32,
    max_payload: u32,
) -> impl Iterator<Item = (GlobalAddr, u32, u32)> {
    let block = u64::from(max_payload.max(1));
    let end = addr.0 + u64::from(len);
    let mut cur = addr.0;
    std::iter::from_fn(move || {
        if cur >= end {
            return None;
        }
        let block_end = (cur / block + 1) * block;
        let piece_end = block_end.min(end);
        let piece = (
            cur,
            crate::saturating_u32(piece_end - cur),
            crate::saturating_u32(cur - addr.0),
        );
        cur = piece_end;
        Some((GlobalAddr(piece.0), piece.1, piece.2))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn aligned_store_is_whole_packets() {
        let p: Vec<_> = split_store(GlobalAddr(64), 96, 32).collect();
        assert_eq!(
            p,
            vec![
                (GlobalAddr(64), 32, 0),
                (GlobalAddr(96), 32, 32),
                (GlobalAddr(128), 32, 64)
            ]
        );
    }

    #[test]
    fn unaligned_store_is_cut_at_block_boundaries() {
        let p: Vec<_> = split_store(GlobalAddr(8190), 4, 32).collect();
        assert_eq!(p, vec![(GlobalAddr(8190), 2, 0), (GlobalAddr(8192), 2, 2)]);
    }

    proptest! {
        #[test]
        fn packet_count_counts_the_pieces(
            addr in 0u64..1_000_000,
            len in 0u32..100_000,
            payload_log in 3u32..=8,
        ) {
            let payload = 1u32 << payload_log;
            let n = split_store(GlobalAddr(addr), len, payload).count();
            prop_assert_eq!(packet_count(GlobalAddr(addr), len, payload) as usize, n);
        }

        #[test]
        fn pieces_cover_the_store_exactly(
            addr in 0u64..1_000_000,
            len in 1u32..100_000,
            payload_log in 3u32..=8,
            page_4k in any::<bool>(),
        ) {
            let payload = 1u32 << payload_log;
            let page = if page_4k { 4096u64 } else { 8192 };
            let mut next = addr;
            let mut offset = 0u32;
            for (a, l, off) in split_store(GlobalAddr(addr), len, payload) {
                prop_assert_eq!(a.0, next);
                prop_assert_eq!(off, offset);
                prop_assert!(l >= 1 && l <= payload);
                // Never crosses a payload block, hence never a page.
                prop_assert_eq!(a.0 / u64::from(payload), (a.0 + u64::from(l) - 1) / u64::from(payload));
                prop_assert_eq!(a.0 / page, (a.0 + u64::from(l) - 1) / page);
                next += u64::from(l);
                offset += l;
            }
            prop_assert_eq!(next, addr + u64::from(len));
        }
    }
}
