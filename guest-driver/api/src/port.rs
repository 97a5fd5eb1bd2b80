//! What the Memory Channel API needs from an adapter driver.
//!
//! The API (regions, spinlocks, error counts) is written against this seam so it
//! runs unchanged over every transport: the virtual guest (vhost-user) and PCI
//! inside a Linux guest. `mc_driver::adapter::Adapter` implements it.

use std::sync::Arc;

use firmware_model::abi::{EventRecord, Registers, StatusPage};
use firmware_model::PctEntry;
use mc_driver::transport::CallSignal;
use mc_driver::ArrivalTable;

use super::McError;

/// Receive memory owned by the driver: whole pages of guest RAM, contiguous in
/// the driver's address space, whose guest-physical 4 KiB frames the adapter DMAs
/// into. Reads are volatile: the device writes behind the program's back.
pub trait ReceiveMemory: Send + Sync {
    /// Guest-physical address of each 4 KiB frame, in order.
    fn frames(&self) -> Vec<u64>;
    /// Copy `buf.len()` bytes at `offset` out (volatile).
    fn read(&self, offset: usize, buf: &mut [u8]);
    /// Write bytes locally (no network traffic): used to reset a slot before
    /// waiting for the device to fill it.
    fn write_local(&self, offset: usize, data: &[u8]);
    /// Atomic 32-bit load at an aligned `offset` (acquire).
    fn load_u32(&self, offset: usize) -> u32;
    /// Atomic 64-bit load at an aligned `offset` (acquire).
    fn load_u64(&self, offset: usize) -> u64;
    /// Address of byte 0 in this process: the memory is mapped here for as
    /// long as the driver lives (its DMA memory is never unmapped), so a
    /// program may read it with plain loads, as on the hardware ("reads from
    /// that region are simply loads from a process virtual address", seed
    /// 004). Used by the C library (libimc).
    fn host_addr(&self) -> usize;
}

/// Posted stores (docs/device.md section 19): a store returns once it is
/// queued for the adapter; the node's stores reach the network in the order
/// they were queued. Used by every thread of a node at once, without a lock.
pub trait StorePath: Send + Sync {
    /// Queue `records` in order, adjacent.
    fn post(&self, records: &[(u64, &[u8])]) -> Result<(), McError>;
    /// Queue one store without allocating where the driver can (for code
    /// that runs in a signal handler); otherwise as `post`.
    fn post_one(&self, addr: u64, data: &[u8]) -> Result<(), McError> {
        self.post(&[(addr, data)])
    }
    /// Wait until everything queued before this call has been handed to the
    /// hub (not: delivered). Reports a store the adapter refused since the
    /// last flush as [`McError::Refused`].
    fn flush(&self) -> Result<(), McError>;
}

/// An adapter, as the Memory Channel API drives it.
pub trait McPort: Send {
    /// The register file, read once at start-up.
    fn registers(&self) -> Registers;
    /// Allocate receive memory for `pages` global pages.
    fn alloc_receive(&mut self, pages: u32) -> Result<Box<dyn ReceiveMemory>, McError>;
    /// Program PCT entries `first_page .. first_page + count`; with receive
    /// enabled, `frames` names `count * page_size / 4096` frames.
    fn set_pct(
        &mut self,
        first_page: u32,
        count: u32,
        entry: PctEntry,
        frames: &[u64],
    ) -> Result<(), McError>;
    /// The PCT entry of `page` as the adapter holds it now (a register read:
    /// a rejoined adapter is a fresh one, its PCT empty).
    fn pct_entry(&mut self, page: u32) -> Result<PctEntry, McError>;
    /// The adapter's store path, which every thread of the node uses at once.
    fn store_path(&self) -> Arc<dyn StorePath>;
    /// The status page (current values).
    fn status(&self) -> StatusPage;
    /// The cluster error count from the status page: one 64-bit load.
    fn cluster_error_count(&self) -> u64;
    /// Events the device has delivered since the last call.
    fn poll_events(&mut self) -> Vec<EventRecord>;
    /// Have the device signal each delivered event, and return what a
    /// thread blocks on for it; `None` where the driver has no such signal
    /// (it must poll [`McPort::poll_events`]).
    fn event_signal(&mut self) -> Result<Option<Arc<dyn CallSignal>>, McError> {
        Ok(None)
    }
    /// The adapter's arrival table, where stamped packets' virtual arrivals
    /// land (virtual time on: docs/virtual-time.md); `None` otherwise.
    fn arrival_table(&self) -> Option<ArrivalTable> {
        None
    }
}
