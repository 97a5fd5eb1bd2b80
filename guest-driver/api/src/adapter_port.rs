//! The Memory Channel API over the adapter driver: [`McPort`] for [`Adapter`].

use std::sync::atomic::Ordering;

use firmware_model::abi::{EventRecord, Registers, Status, StatusPage, TxCompletion};
use firmware_model::PctEntry;

use crate::error::McError;
use crate::port::{McPort, ReceiveMemory};
use mc_driver::adapter::{Adapter, ReceiveFrames, StatusView};
use mc_driver::transport::Transport;

impl ReceiveMemory for ReceiveFrames {
    fn frames(&self) -> Vec<u64> {
        ReceiveFrames::frames(self)
    }

    fn read(&self, offset: usize, buf: &mut [u8]) {
        // Offsets come from the API's own bounds-checked regions.
        if self.region().read(offset, buf).is_err() {
            buf.fill(0);
        }
    }

    fn write_local(&self, offset: usize, data: &[u8]) {
        let _ = self.region().write(offset, data);
    }

    fn load_u32(&self, offset: usize) -> u32 {
        self.region()
            .atomic_u32(offset)
            .map(|a| u32::from_le(a.load(Ordering::Acquire)))
            .unwrap_or(0)
    }

    fn load_u64(&self, offset: usize) -> u64 {
        self.region()
            .atomic_u64(offset)
            .map(|a| u64::from_le(a.load(Ordering::Acquire)))
            .unwrap_or(0)
    }
}

/// An [`Adapter`] with its status page registered, as the API drives it.
pub struct AdapterPort<T: Transport> {
    adapter: Adapter<T>,
    status: StatusView,
    regs: Registers,
}

impl<T: Transport> AdapterPort<T> {
    pub fn new(mut adapter: Adapter<T>) -> Result<Self, McError> {
        let regs = adapter.registers()?;
        let status = adapter.set_status_page()?;
        Ok(AdapterPort {
            adapter,
            status,
            regs,
        })
    }

    pub fn adapter(&mut self) -> &mut Adapter<T> {
        &mut self.adapter
    }
}

fn check(c: TxCompletion, expected: usize) -> Result<(), McError> {
    if c.status == Status::Ok as u32 && c.records_done as usize == expected {
        return Ok(());
    }
    Err(McError::Refused {
        status: Status::from_u32(c.status).unwrap_or(Status::DeviceError),
        detail: c.records_done,
    })
}

impl<T: Transport> McPort for AdapterPort<T> {
    fn registers(&self) -> Registers {
        self.regs
    }

    fn alloc_receive(&mut self, pages: u32) -> Result<Box<dyn ReceiveMemory>, McError> {
        Ok(Box::new(self.adapter.alloc_receive(pages)?))
    }

    fn set_pct(
        &mut self,
        first_page: u32,
        count: u32,
        entry: PctEntry,
        frames: &[u64],
    ) -> Result<(), McError> {
        Ok(self
            .adapter
            .set_pct(first_page, count, entry.to_bits(), frames)?)
    }

    fn store(&mut self, addr: u64, data: &[u8]) -> Result<(), McError> {
        check(self.adapter.transmit(&[(addr, data)])?, 1)
    }

    fn store_batch(&mut self, records: &[(u64, &[u8])]) -> Result<(), McError> {
        if records.is_empty() {
            return Ok(());
        }
        // One chain per buffer-full, all posted before any is waited for, so the
        // driver fills the next buffer while the hub sends the last one. The
        // device handles chains in order; the first refusal is reported.
        let cap = self.adapter.tx_capacity();
        let mut posted = Vec::new();
        let mut start = 0;
        while start < records.len() {
            let mut end = start;
            let mut size = 0;
            while end < records.len() {
                let r = firmware_model::abi::TxRecordHeader::record_size(records[end].1.len() as u32)
                    as usize;
                if end > start && size + r > cap {
                    break;
                }
                size += r;
                end += 1;
            }
            posted.push((
                self.adapter.post_transmit(&records[start..end])?,
                end - start,
            ));
            start = end;
        }
        let mut first_error = None;
        for (ticket, n) in posted {
            let r = self
                .adapter
                .wait_transmit(ticket)
                .map_err(McError::from)
                .and_then(|c| check(c, n));
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn status(&self) -> StatusPage {
        self.status.read().unwrap_or_default()
    }

    fn cluster_error_count(&self) -> u64 {
        self.status.cluster_error_count().unwrap_or(0)
    }

    fn poll_events(&mut self) -> Vec<EventRecord> {
        self.adapter.poll_events().unwrap_or_default()
    }
}
