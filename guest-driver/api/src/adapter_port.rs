//! The Memory Channel API over the adapter driver: [`McPort`] for [`Adapter`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use firmware_model::abi::{EventRecord, Registers, Status, StatusPage};
use firmware_model::PctEntry;

use crate::error::McError;
use crate::port::{McPort, ReceiveMemory, StorePath};
use mc_driver::adapter::{Adapter, ReceiveFrames, StatusView};
use mc_driver::fifo::TxFifo;
use mc_driver::transport::{CallSignal, Transport};

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

    fn host_addr(&self) -> usize {
        firmware_model::to_usize(self.region().host_addr())
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

/// A refused store keeps its cause as the device gave it.
fn refusal(e: mc_driver::Error) -> McError {
    match e {
        mc_driver::Error::Refused { status, detail, .. } => McError::Refused {
            status: Status::from_u32(status).unwrap_or(Status::DeviceError),
            detail,
        },
        other => McError::from(other),
    }
}

impl StorePath for TxFifo {
    fn post(&self, records: &[(u64, &[u8])]) -> Result<(), McError> {
        match records {
            [(addr, data)] => TxFifo::post(self, *addr, data),
            _ => self.post_all(records),
        }
        .map(|_| ())
        .map_err(refusal)
    }

    fn post_one(&self, addr: u64, data: &[u8]) -> Result<(), McError> {
        TxFifo::post_one(self, addr, data)
            .map(|_| ())
            .map_err(refusal)
    }

    fn flush(&self) -> Result<(), McError> {
        TxFifo::flush(self).map_err(refusal)
    }
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

    fn pct_entry(&mut self, page: u32) -> Result<PctEntry, McError> {
        let (word, _) = self.adapter.get_pct(page)?;
        PctEntry::from_bits(word).map_err(|_| McError::BadPctEntry { page, word })
    }

    fn store_path(&self) -> Arc<dyn StorePath> {
        self.adapter.fifo().clone()
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

    fn event_signal(&mut self) -> Result<Option<Arc<dyn CallSignal>>, McError> {
        Ok(self.adapter.event_signal()?)
    }

    fn arrival_table(&self) -> Option<mc_driver::ArrivalTable> {
        self.adapter.arrival_table().cloned()
    }
}
