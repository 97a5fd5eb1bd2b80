//! CSM-DMS data propagation (seed 000 s.2.3.1.1 "Data"): the shared heap is
//! one coherent Memory Channel region; a page's master copy is its home's
//! receive mapping of that region. Diffs are remote writes into it; a page
//! fetch is a request word and a reply buffer in a message region, polled.

use crate::mc::{MemoryChannel, RxRegion, Sharing as McSharing, TxRegion};

use super::layout::{CsmLayout, KEY_HEAP, KEY_MSG};
use super::seams::DataPropagation;
use super::twin::Run;
use super::CsmError;

pub struct DmsData {
    l: CsmLayout,
    me: u32,
    heap_tx: TxRegion,
    heap_rx: RxRegion,
    msg_tx: TxRegion,
    msg_rx: RxRegion,
}

impl DmsData {
    pub fn new(mc: &MemoryChannel, l: CsmLayout) -> Result<DmsData, CsmError> {
        let heap = mc.region_alloc(KEY_HEAP, l.heap_bytes(), true)?;
        let msg = mc.region_alloc(KEY_MSG, l.msg_bytes(), true)?;
        Ok(DmsData {
            l,
            me: mc.node_id().index() as u32,
            heap_tx: mc.attach_transmit(heap, McSharing::Shared, true)?,
            heap_rx: mc.attach_receive(heap, McSharing::Shared, false)?,
            msg_tx: mc.attach_transmit(msg, McSharing::Shared, true)?,
            msg_rx: mc.attach_receive(msg, McSharing::Shared, false)?,
        })
    }

    fn page_off(&self, page: u32) -> usize {
        page as usize * self.l.page_size as usize
    }
}

impl DataPropagation for DmsData {
    fn write_diff(&self, _home: u32, page: u32, runs: &[Run]) -> Result<usize, CsmError> {
        let base = self.page_off(page);
        let recs: Vec<(usize, &[u8])> = runs.iter().map(|(o, b)| (base + o, &b[..])).collect();
        self.heap_tx.write_many(&recs)?;
        Ok(runs.iter().map(|(_, b)| b.len()).sum())
    }

    fn write_page(&self, page: u32, data: &[u8]) -> Result<(), CsmError> {
        self.heap_tx.write(self.page_off(page), data)?;
        Ok(())
    }

    fn read_master(&self, page: u32, out: &mut [u8]) -> Result<(), CsmError> {
        self.heap_rx.read(self.page_off(page), out)?;
        Ok(())
    }

    fn send_request(&self, home: u32, seq: u32, page: u32) -> Result<(), CsmError> {
        let w = (u64::from(seq) << 32) | u64::from(page);
        self.msg_tx.write_u64(self.l.request(self.me, home), w)?;
        Ok(())
    }

    fn poll_request(&self, from: u32) -> Option<(u32, u32)> {
        let w = self.msg_rx.load_u64(self.l.request(from, self.me)).ok()?;
        Some(((w >> 32) as u32, w as u32))
    }

    fn send_reply(&self, to: u32, seq: u32, data: Option<&[u8]>) -> Result<(), CsmError> {
        let at = self.l.reply(to);
        let s = seq.to_le_bytes();
        match data {
            // Data first, then the sequence word: total order shows the data
            // to the requester before it sees the answer.
            Some(d) => self.msg_tx.write_many(&[(at + 64, d), (at, &s)])?,
            None => self.msg_tx.write(at, &s)?,
        }
        Ok(())
    }

    fn reply_seq(&self) -> u32 {
        self.msg_rx.load_u32(self.l.reply(self.me)).unwrap_or(0)
    }

    fn read_reply(&self, out: &mut [u8]) -> Result<(), CsmError> {
        self.msg_rx.read(self.l.reply(self.me) + 64, out)?;
        Ok(())
    }
}
