//! A byte-exact picture of what every receiver's memory should hold.
//!
//! [`ShadowCluster`] drives a [`Hub`] with real store data and applies each
//! delivery and ACK report to a sparse copy of every node's receive pages. Tests of
//! the device and of guest code compare real guest memory against it.

use std::collections::HashMap;

use crate::hub::{Hub, ModelError, TransmitSummary};
use crate::sink::{AckReport, Delivery, DeliverySink, Event};
use crate::types::{GlobalAddr, Nanos, NodeId, PageNumber};

/// Every node's receive pages as the model says they should be.
#[derive(Clone, Debug, Default)]
pub struct ShadowCluster {
    page_size: usize,
    pages: HashMap<(NodeId, PageNumber), Vec<u8>>,
    /// Events in the order the hub produced them.
    pub events: Vec<Event>,
    /// ACK reports in order.
    pub acks: Vec<AckReport>,
}

struct ShadowSink<'a> {
    shadow: &'a mut ShadowCluster,
    data: &'a [u8],
}

impl ShadowCluster {
    pub fn new(page_size: u32) -> Self {
        ShadowCluster {
            page_size: page_size as usize,
            ..Default::default()
        }
    }

    fn page_mut(&mut self, node: NodeId, page: PageNumber) -> &mut Vec<u8> {
        let size = self.page_size;
        self.pages
            .entry((node, page))
            .or_insert_with(|| vec![0; size])
    }

    /// Node `src` stores `data` at `addr`; the shadow applies what the hub decides.
    pub fn store(
        &mut self,
        hub: &mut Hub,
        now: Nanos,
        src: NodeId,
        addr: GlobalAddr,
        data: &[u8],
    ) -> Result<TransmitSummary, ModelError> {
        let len = u32::try_from(data.len()).map_err(|_| ModelError::AddressOutOfRange {
            addr,
            len: data.len() as u64,
            size: hub.config().address_space,
        })?;
        let mut sink = ShadowSink { shadow: self, data };
        hub.transmit(now, src, addr, len, &mut sink)
    }

    /// Record the events of a fault or `advance` call made with this sink.
    pub fn sink(&mut self) -> impl DeliverySink + '_ {
        ShadowSink {
            shadow: self,
            data: &[],
        }
    }

    /// `len` bytes of `node`'s receive memory at `addr` (zero where never written).
    pub fn read(&self, node: NodeId, addr: GlobalAddr, len: usize) -> Vec<u8> {
        let ps = self.page_size as u64;
        (0..len as u64)
            .map(|i| {
                let a = addr.0 + i;
                let page = PageNumber(crate::saturating_u32(a / ps));
                self.pages
                    .get(&(node, page))
                    .map_or(0, |p| p[usize::try_from(a % ps).unwrap_or(usize::MAX)])
            })
            .collect()
    }

    /// The whole page as `node` should hold it, if anything was ever written there.
    pub fn page(&self, node: NodeId, page: PageNumber) -> Option<&[u8]> {
        self.pages.get(&(node, page)).map(Vec::as_slice)
    }

    /// Every (node, page) that has been written, sorted.
    pub fn written_pages(&self) -> Vec<(NodeId, PageNumber)> {
        let mut v: Vec<_> = self.pages.keys().copied().collect();
        v.sort();
        v
    }
}

impl DeliverySink for ShadowSink<'_> {
    fn deliver(&mut self, d: &Delivery) {
        let start = d.packet.store_offset as usize;
        let len = d.packet.len as usize;
        let off = d.page_offset as usize;
        // A delivery never crosses a page, and the data came from the caller of
        // `store`; a mismatch would be a model bug, so skip rather than panic.
        let Some(src) = self.data.get(start..start + len) else {
            return;
        };
        if let Some(dst) = self
            .shadow
            .page_mut(d.receiver, d.page)
            .get_mut(off..off + len)
        {
            dst.copy_from_slice(src);
        }
    }

    fn ack(&mut self, r: &AckReport) {
        let page = self.shadow.page_mut(r.writer, r.page);
        for (i, w) in r.words.iter().enumerate() {
            let off = r.page_offset as usize + 4 * i;
            if let Some(dst) = page.get_mut(off..off + 4) {
                dst.copy_from_slice(&w.to_le_bytes());
            }
        }
        self.shadow.acks.push(r.clone());
    }

    fn event(&mut self, e: &Event) {
        self.shadow.events.push(*e);
    }
}
