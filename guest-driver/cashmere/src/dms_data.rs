//! CSM-DMS data propagation (seed 000 s.2.3.1.1 "Data"): a page's master
//! copy is its home's receive mapping (seed 000: "the home node creates a
//! receive mapping for the page"). Each node has a home region the size of
//! the heap that only it receives; page p's master copy is at
//! `p * page_size` in its home's region. Diffs are remote writes into it,
//! point-to-point to the home (the home's own go by loopback), so no other
//! node receives or copies them. A page fetch is a request word in the
//! home's mailbox and a reply in the requester's (`mailbox`), each store of
//! which wakes its receiver only.

use std::ops::Range;
use std::sync::Arc;

use mc_api::{MemoryChannel, NodeId, RxRegion, Sharing, TxRegion};

use super::mailbox::Mailboxes;
use super::seams::DataPropagation;
use super::space::{CsmSpace, KEY_HOME};
use super::CsmError;

pub struct DmsData {
    space: CsmSpace,
    me: u32,
    /// Transmit mapping of every node's home region: point-to-point to the
    /// others', this node's own with loopback (its master copies).
    to_home: Vec<TxRegion>,
    /// This node's receive mapping of its home region: the master copies of
    /// the pages it is home of.
    master: RxRegion,
    mail: Arc<Mailboxes>,
}

impl DmsData {
    /// Allocate (or find) every node's home region, attach this node's for
    /// receive and every one for transmit. Before the start barrier, like the
    /// mailboxes: a store into a region nobody receives yet is not kept.
    pub fn new(
        mc: &MemoryChannel,
        space: CsmSpace,
        mail: Arc<Mailboxes>,
    ) -> Result<DmsData, CsmError> {
        let me = mc.node_id().index() as u32;
        let mut to_home = Vec::with_capacity(space.nodes as usize);
        let mut master = None;
        for n in 0..space.nodes {
            let id = mc.region_alloc(KEY_HOME + n, space.heap_bytes(), false)?;
            if n == me {
                master = Some(mc.attach_receive(id, Sharing::Shared, false)?);
                to_home.push(mc.attach_transmit(id, Sharing::Shared, true)?);
            } else {
                to_home.push(mc.attach_transmit_to(id, Sharing::Shared, NodeId(n as u8))?);
            }
        }
        Ok(DmsData {
            space,
            me,
            to_home,
            master: master.expect("this node is one of the nodes"),
            mail,
        })
    }

    fn page_off(&self, page: u32) -> usize {
        page as usize * self.space.page_size as usize
    }
}

/// The bytes of a slice of words, as the Memory Channel carries them
/// (little-endian: the only byte order this crate is built for).
fn word_bytes(words: &[u32]) -> &[u8] {
    const _: () = assert!(cfg!(target_endian = "little"));
    // SAFETY: u32 has no padding and every byte pattern is a valid u8; the
    // length in bytes is 4 times the length in words, and u8 needs no
    // alignment. The result borrows `words`.
    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, 4 * words.len()) }
}

impl DataPropagation for DmsData {
    fn write_diff(
        &self,
        home: u32,
        page: u32,
        current: &[u32],
        runs: &[Range<usize>],
    ) -> Result<usize, CsmError> {
        // Remote writes straight into the master copy (the home's receive
        // mapping), one record per run: the seed's programmed-I/O diff.
        let base = self.page_off(page);
        let recs: Vec<(usize, &[u8])> = runs
            .iter()
            .map(|r| (base + 4 * r.start, word_bytes(&current[r.clone()])))
            .collect();
        self.to_home[home as usize].write_many(&recs)?;
        Ok(runs.iter().map(|r| 4 * r.len()).sum())
    }

    fn write_page(&self, page: u32, data: &[u8]) -> Result<(), CsmError> {
        self.to_home[self.me as usize].post(self.page_off(page), data)?;
        Ok(())
    }

    fn master_addr(&self, page: u32) -> Option<*const u8> {
        let off = self.page_off(page);
        if off + self.space.page_size as usize > self.master.len() {
            return None;
        }
        // SAFETY: `off` is within the receive mapping (checked above).
        Some(unsafe { self.master.as_ptr().add(off) })
    }

    fn read_master(&self, page: u32, out: &mut [u8]) -> Result<(), CsmError> {
        self.master.read(self.page_off(page), out)?;
        Ok(())
    }

    fn send_request(&self, home: u32, seq: u32, page: u32) -> Result<(), CsmError> {
        let w = (u64::from(seq) << 32) | u64::from(page);
        // One aligned 8-byte store: one packet, whole or not at all.
        self.mail.post_u64(home, self.mail.at().request(self.me), w)
    }

    fn poll_request(&self, from: u32) -> (u32, u32) {
        let w = self.mail.load_u64(self.mail.at().request(from));
        ((w >> 32) as u32, w as u32)
    }

    fn send_reply(
        &self,
        to: u32,
        seq: u32,
        page: u32,
        data: Option<&[u8]>,
    ) -> Result<(), CsmError> {
        let d = data.unwrap_or(&[]);
        let header = ReplyHeader {
            seq,
            page,
            checksum: checksum(seq, page, d),
        }
        .encode();
        // Data first, then the header: a requester that sees the header has
        // every earlier packet of this node's (per-source FIFO, packet by
        // packet). The header is one aligned 16-byte store, one packet.
        if !d.is_empty() {
            self.mail.post(to, self.mail.at().reply_data(), d)?;
        }
        self.mail.post(to, self.mail.at().reply_header(), &header)
    }

    fn reply_seq(&self) -> u32 {
        self.mail.load_u32(self.mail.at().reply_header())
    }

    fn read_reply(&self, seq: u32, page: u32, out: &mut [u8]) -> Result<bool, CsmError> {
        // Data before header: a stray late reply landing in between makes
        // the checksum disagree, never passes for this one.
        self.mail.read(self.mail.at().reply_data(), out)?;
        let mut h = [0u8; 16];
        self.mail.read(self.mail.at().reply_header(), &mut h)?;
        let h = ReplyHeader::decode(&h);
        Ok(h.seq == seq && h.page == page && h.checksum == checksum(seq, page, out))
    }

    fn post_echo(&self) -> Result<u64, CsmError> {
        self.mail.post_echo()
    }

    fn echo_seen(&self) -> u64 {
        self.mail.echo_seen()
    }

    fn echo_posted(&self) -> u64 {
        self.mail.echo_posted()
    }
}

/// The first 16 bytes of a reply buffer.
struct ReplyHeader {
    seq: u32,
    page: u32,
    checksum: u64,
}

impl ReplyHeader {
    fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&self.seq.to_le_bytes());
        b[4..8].copy_from_slice(&self.page.to_le_bytes());
        b[8..].copy_from_slice(&self.checksum.to_le_bytes());
        b
    }

    fn decode(b: &[u8; 16]) -> ReplyHeader {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        ReplyHeader {
            seq: u32_at(0),
            page: u32_at(4),
            checksum: u64::from(u32_at(8)) | u64::from(u32_at(12)) << 32,
        }
    }
}

/// End-to-end check of a reply: the Memory Channel delivers a packet whole
/// or not at all (a corrupted one is discarded by the CRC), so what a lost
/// packet leaves behind is stale bytes from an earlier reply. Any
/// well-mixed hash over the sequence, the page and the data tells them apart.
pub(crate) fn checksum(seq: u32, page: u32, data: &[u8]) -> u64 {
    let mix = |h: u64, w: u64| {
        let h = (h ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 32)
    };
    let mut h = mix(
        0x9e37_79b9_7f4a_7c15,
        u64::from(seq) << 32 | u64::from(page),
    );
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        h = mix(
            h,
            u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]),
        );
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(b) ^ (rest.len() as u64) << 56);
    }
    mix(h, data.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_tells_stale_data_and_other_requests_apart() {
        let page: Vec<u8> = (0..8192u32).map(|i| (i * 7) as u8).collect();
        let c = checksum(5, 3, &page);
        assert_eq!(c, checksum(5, 3, &page));
        assert_ne!(c, checksum(6, 3, &page), "another request");
        assert_ne!(c, checksum(5, 4, &page), "another page");
        for lost in [0usize, 32, 8160] {
            let mut stale = page.clone();
            stale[lost..lost + 32].fill(0);
            assert_ne!(c, checksum(5, 3, &stale), "packet at {lost} lost");
        }
        assert_ne!(checksum(1, 0, &[]), checksum(1, 0, &[0]));
    }

    #[test]
    fn a_reply_header_round_trips() {
        let h = ReplyHeader {
            seq: 0xdead_beef,
            page: 42,
            checksum: 0x0123_4567_89ab_cdef,
        };
        let d = ReplyHeader::decode(&h.encode());
        assert_eq!((d.seq, d.page, d.checksum), (h.seq, h.page, h.checksum));
    }
}
