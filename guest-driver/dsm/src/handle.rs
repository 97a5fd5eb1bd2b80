//! The program-facing handle ([`Dsm`]): what a program on any protocol
//! calls. Clone it for each application thread of a node.

use std::sync::Arc;

use mc_api::vclock;

use crate::{times, DsmError, Protocol, SharedArray, Stats, TimeBreakdown};

/// A node's handle on its DSM protocol.
#[derive(Clone)]
pub struct Dsm {
    protocol: Arc<dyn Protocol>,
}

impl std::fmt::Debug for Dsm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dsm")
            .field("protocol", &self.protocol.name())
            .field("node", &self.protocol.node_id())
            .finish()
    }
}

impl Dsm {
    /// The handle on a started protocol node.
    pub fn new(protocol: Arc<dyn Protocol>) -> Dsm {
        Dsm { protocol }
    }

    /// The protocol's name.
    pub fn protocol_name(&self) -> &'static str {
        self.protocol.name()
    }

    /// The protocol itself, if it is a `P` (tools that need what only one
    /// protocol has).
    pub fn protocol<P: Protocol>(&self) -> Option<&P> {
        self.protocol.as_any().downcast_ref::<P>()
    }

    pub fn node_id(&self) -> u32 {
        self.protocol.node_id()
    }
    pub fn nodes(&self) -> u32 {
        self.protocol.nodes()
    }
    pub fn threads(&self) -> u32 {
        self.protocol.threads()
    }
    pub fn page_size(&self) -> u32 {
        self.protocol.page_size()
    }

    /// `len` elements of `T` in the shared heap, at a page boundary if
    /// `page_aligned`. Every node makes the same allocations in the same
    /// order, so they land at the same offsets.
    pub fn alloc<T: Copy>(
        &self,
        len: usize,
        page_aligned: bool,
    ) -> Result<SharedArray<T>, DsmError> {
        let ps = usize::try_from(self.protocol.page_size()).expect("a page size fits usize");
        Ok(self
            .protocol
            .allocator()
            .alloc(self.protocol.heap(), ps, len, page_aligned)?)
    }

    #[inline]
    pub fn poll(&self) -> Result<(), DsmError> {
        self.protocol.poll()
    }
    pub fn lock_acquire(&self, lock: u32) -> Result<(), DsmError> {
        self.protocol.lock_acquire(lock)
    }
    pub fn lock_release(&self, lock: u32) -> Result<(), DsmError> {
        self.protocol.lock_release(lock)
    }
    pub fn barrier(&self) -> Result<(), DsmError> {
        self.protocol.barrier()
    }
    pub fn flag_set(&self, flag: u32, value: u64) -> Result<(), DsmError> {
        self.protocol.flag_set(flag, value)
    }
    pub fn flag_wait(&self, flag: u32) -> Result<u64, DsmError> {
        self.protocol.flag_wait(flag)
    }
    pub fn abort(&self) {
        self.protocol.abort();
    }
    pub fn finish(&self) -> Result<Stats, DsmError> {
        self.protocol.finish()
    }
    pub fn stats(&self) -> Stats {
        self.protocol.stats()
    }

    pub fn join_clock(&self, local: u32, vt: u64) -> Result<vclock::Participant, DsmError> {
        self.protocol.join_clock(local, vt)
    }
    pub fn mark_start(&self) {
        self.protocol.mark_start();
    }
    pub fn mark_end(&self) {
        self.protocol.mark_end();
    }
    /// Seconds since this node started.
    pub fn elapsed(&self) -> f64 {
        self.protocol.window().elapsed()
    }
    /// The timed part's wall-clock seconds.
    pub fn timed(&self) -> Option<f64> {
        self.protocol.window().timed()
    }
    /// The timed part's predicted seconds (virtual time).
    pub fn predicted(&self) -> Option<f64> {
        self.protocol.window().predicted()
    }
    /// The timed part in virtual ns: (earliest start, latest end).
    pub fn virtual_window(&self) -> Option<(u64, u64)> {
        self.protocol.window().virtual_window()
    }
    /// The calling thread's time breakdown, named `name`.
    pub fn thread_breakdown(&self, name: &str) -> TimeBreakdown {
        times::breakdown(name, self.protocol.node_id())
    }
    /// The protocol thread's breakdown, if the protocol has such a thread.
    pub fn protocol_breakdown(&self) -> Option<TimeBreakdown> {
        self.protocol.protocol_breakdown()
    }
}
