//! Cashmere as a protocol of the DSM core ([`dsm_core::Protocol`]): what a
//! program holding a [`dsm_core::Dsm`] calls lands on the node's [`Csm`].

use std::any::Any;

use dsm_core::{Allocator, DsmError, Protocol, Stats, TimeBreakdown, TimedWindow};
use mc_api::vclock;

use crate::{Csm, CsmError};

/// The protocol's name (`mc-guest csm --protocol cashmere`); its variants
/// are chosen apart (`--variant`).
pub const NAME: &str = "cashmere";

impl From<CsmError> for DsmError {
    fn from(e: CsmError) -> DsmError {
        DsmError::protocol(e)
    }
}

impl Protocol for Csm {
    fn name(&self) -> &'static str {
        NAME
    }
    fn node_id(&self) -> u32 {
        Csm::node_id(self)
    }
    fn nodes(&self) -> u32 {
        Csm::nodes(self)
    }
    fn threads(&self) -> u32 {
        Csm::threads(self)
    }
    fn page_size(&self) -> u32 {
        Csm::page_size(self)
    }
    fn heap(&self) -> &dsm_core::vm::HeapMemory {
        self.node.heap()
    }
    fn allocator(&self) -> &Allocator {
        self.node.allocator()
    }
    fn window(&self) -> &TimedWindow {
        self.node.window()
    }
    fn poll(&self) -> Result<(), DsmError> {
        Ok(Csm::poll(self)?)
    }
    fn lock_acquire(&self, lock: u32) -> Result<(), DsmError> {
        Ok(Csm::lock_acquire(self, lock)?)
    }
    fn lock_release(&self, lock: u32) -> Result<(), DsmError> {
        Ok(Csm::lock_release(self, lock)?)
    }
    fn barrier(&self) -> Result<(), DsmError> {
        Ok(Csm::barrier(self)?)
    }
    fn flag_set(&self, flag: u32, value: u64) -> Result<(), DsmError> {
        Ok(Csm::flag_set(self, flag, value)?)
    }
    fn flag_wait(&self, flag: u32) -> Result<u64, DsmError> {
        Ok(Csm::flag_wait(self, flag)?)
    }
    fn abort(&self) {
        Csm::abort(self);
    }
    fn finish(&self) -> Result<Stats, DsmError> {
        Ok(Csm::finish(self)?)
    }
    fn stats(&self) -> Stats {
        Csm::stats(self)
    }
    fn join_clock(&self, local: u32, vt: u64) -> Result<vclock::Participant, DsmError> {
        Ok(Csm::join_clock(self, local, vt)?)
    }
    fn protocol_breakdown(&self) -> Option<TimeBreakdown> {
        Csm::protocol_breakdown(self)
    }
    fn mark_start(&self) {
        Csm::mark_start(self);
    }
    fn mark_end(&self) {
        Csm::mark_end(self);
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
