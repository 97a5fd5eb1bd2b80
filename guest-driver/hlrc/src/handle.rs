//! HLRC as the DSM core drives it ([`Hlrc`]): start-up, the entry points,
//! and the end.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use dsm_core::sigsegv::{self, FaultError, FaultHandler};
use dsm_core::vm::HeapMemory;
use dsm_core::{
    times, Allocator, DsmConfig, DsmError, Protocol, Stats, TimeBreakdown, TimedWindow,
};
use mc_api::{Barrier, MemoryChannel};

use crate::engine::Engine;
use crate::error::HlrcError;
use crate::mailbox::Mailboxes;
use crate::node::HlrcNode;
use crate::pages::NodePages;
use crate::{BarrierMode, HomePolicy};

/// The protocol's name (`mc-guest csm --protocol hlrc`, `CSM_PROTOCOL`).
pub const NAME: &str = "hlrc";
/// HLRC whose barriers broadcast their write notices ([`BarrierMode::Broadcast`]).
pub const NAME_BROADCAST: &str = "hlrc-broadcast";

const KEY_BARRIER: u32 = 0x484c_1000;
const BARRIER_GIVE_UP: Duration = Duration::from_secs(600);

/// What a node of HLRC starts with; every node passes the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HlrcConfig {
    /// The DSM core's part. HLRC takes one application thread per node
    /// (seed 001 s.4.3).
    pub core: DsmConfig,
    /// Where pages' homes are.
    pub homes: HomePolicy,
    /// How barriers spread write notices (a manager, or broadcast).
    pub barrier: BarrierMode,
}

impl Default for HlrcConfig {
    fn default() -> Self {
        HlrcConfig {
            core: DsmConfig::default(),
            homes: HomePolicy::FirstTouch,
            barrier: BarrierMode::Manager,
        }
    }
}

impl From<HlrcError> for DsmError {
    fn from(e: HlrcError) -> DsmError {
        DsmError::protocol(e)
    }
}

/// The node as the SIGSEGV handler reaches it.
struct Faults {
    node: Arc<HlrcNode>,
    page_size: usize,
}

impl FaultHandler for Faults {
    fn heap_view(&self) -> (usize, usize) {
        (self.node.heap.app_base() as usize, self.node.heap.len())
    }
    fn resolve_fault(&self, offset: usize) -> Result<(), FaultError> {
        self.node
            .fault(offset, self.page_size)
            .map_err(|e| Box::new(e) as FaultError)
    }
    fn abandon(&self) {
        self.node.mail.abandon();
    }
    fn node_id(&self) -> u32 {
        u32::try_from(self.node.me).unwrap_or(u32::MAX)
    }
}

/// A node of HLRC; one per node.
pub struct Hlrc {
    node: Arc<HlrcNode>,
    faults: Box<Faults>,
    registration: AtomicUsize,
    cfg: DsmConfig,
    alloc: Allocator,
    window: TimedWindow,
    barrier: Mutex<Barrier>,
    comm: Mutex<Option<JoinHandle<()>>>,
}

impl Hlrc {
    /// Map the heap, attach the mailboxes, start the communication thread,
    /// and wait until every node has.
    pub fn start(mc: &MemoryChannel, cfg: &HlrcConfig) -> Result<Hlrc, HlrcError> {
        let homes = cfg.homes;
        let barrier = cfg.barrier;
        let cfg = &cfg.core;
        if !cfg.page_size_supported() {
            return Err(HlrcError::PageSize(cfg.page_size));
        }
        if cfg.threads != 1 {
            return Err(HlrcError::Threads {
                threads: cfg.threads,
            });
        }
        times::init();
        let ps = cfg.page_bytes();
        let heap_bytes = cfg.heap_in_pages();
        let heap = Arc::new(HeapMemory::new(heap_bytes, cfg.heap_base).map_err(HlrcError::Heap)?);
        let me = mc.node_id().index();
        let nodes = usize::try_from(mc.nodes()).expect("a node count fits usize");
        let pages = NodePages::new(heap.clone(), ps).map_err(HlrcError::Heap)?;
        let engine = Engine::new(me, nodes, heap_bytes / ps, homes, pages).with_barrier(barrier);
        let mail = Mailboxes::attach(mc, barrier == BarrierMode::Broadcast)?;
        let node = Arc::new(HlrcNode::new(mc.clone(), me, nodes, heap, engine, mail));
        let faults = Box::new(Faults {
            node: node.clone(),
            page_size: ps,
        });
        let hlrc = Hlrc {
            node: node.clone(),
            faults,
            registration: AtomicUsize::new(usize::MAX),
            cfg: cfg.clone(),
            alloc: Allocator::default(),
            window: TimedWindow::new(),
            barrier: Mutex::new(Barrier::new(mc, KEY_BARRIER)?),
            comm: Mutex::new(None),
        };
        let r = sigsegv::register(hlrc.faults.as_ref())
            .ok_or(HlrcError::TooManyHeaps(sigsegv::MAX_HEAPS))?;
        hlrc.registration.store(r, Ordering::Release);
        let comm = std::thread::Builder::new()
            .name(format!("hlrc-comm-{me}"))
            .spawn(move || node.serve())
            .map_err(HlrcError::Spawn)?;
        *hlrc.comm.lock().unwrap_or_else(|p| p.into_inner()) = Some(comm);
        // Nobody stores into a mailbox before its owner receives it.
        hlrc.barrier
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .wait(BARRIER_GIVE_UP)?;
        Ok(hlrc)
    }

    fn lock_id(&self, lock: u32) -> Result<usize, HlrcError> {
        if lock >= self.cfg.locks {
            return Err(HlrcError::NoSuchLock {
                lock,
                locks: self.cfg.locks,
            });
        }
        Ok(usize::try_from(lock).expect("a lock number fits usize"))
    }

    fn flag_id(&self, flag: u32) -> Result<usize, HlrcError> {
        if flag >= self.cfg.flags {
            return Err(HlrcError::NoSuchFlag {
                flag,
                flags: self.cfg.flags,
            });
        }
        Ok(usize::try_from(flag).expect("a flag number fits usize"))
    }

    fn stop_comm(&self) {
        self.node.stop.store(true, Ordering::Release);
        if let Some(h) = self.comm.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if h.join().is_err() {
                log::error!(
                    "hlrc: node {}'s communication thread panicked",
                    self.node.me
                );
            }
        }
    }
}

impl Drop for Hlrc {
    fn drop(&mut self) {
        self.stop_comm();
        let r = self.registration.load(Ordering::Acquire);
        if r != usize::MAX {
            sigsegv::unregister(r);
        }
    }
}

impl Protocol for Hlrc {
    fn name(&self) -> &'static str {
        NAME
    }
    fn node_id(&self) -> u32 {
        u32::try_from(self.node.me).unwrap_or(u32::MAX)
    }
    fn nodes(&self) -> u32 {
        u32::try_from(self.node.nodes).unwrap_or(u32::MAX)
    }
    fn threads(&self) -> u32 {
        1
    }
    fn page_size(&self) -> u32 {
        self.cfg.page_size
    }
    fn heap(&self) -> &HeapMemory {
        &self.node.heap
    }
    fn allocator(&self) -> &Allocator {
        &self.alloc
    }
    fn window(&self) -> &TimedWindow {
        &self.window
    }
    fn poll(&self) -> Result<(), DsmError> {
        // The communication thread answers (seed 001 s.4.1.2).
        Ok(())
    }
    fn lock_acquire(&self, lock: u32) -> Result<(), DsmError> {
        let l = self.lock_id(lock)?;
        Ok(self.node.acquire(l)?)
    }
    fn lock_release(&self, lock: u32) -> Result<(), DsmError> {
        let l = self.lock_id(lock)?;
        Ok(self.node.release(l)?)
    }
    fn barrier(&self) -> Result<(), DsmError> {
        Ok(self.node.barrier()?)
    }
    fn flag_set(&self, flag: u32, value: u64) -> Result<(), DsmError> {
        if value == 0 {
            return Err(HlrcError::ZeroFlagValue.into());
        }
        let f = self.flag_id(flag)?;
        Ok(self.node.flag_set(f, value)?)
    }
    fn flag_wait(&self, flag: u32) -> Result<u64, DsmError> {
        let f = self.flag_id(flag)?;
        Ok(self.node.flag_wait(f)?)
    }
    fn abort(&self) {
        self.node.mail.abandon();
    }
    fn finish(&self) -> Result<Stats, DsmError> {
        // The final barrier: after it nobody asks this node for anything.
        self.node.barrier()?;
        // Let what is still queued go out before the thread stops.
        while self.node.mail.pending() {
            self.node.mail.flush().map_err(DsmError::from)?;
            std::thread::yield_now();
        }
        self.stop_comm();
        Ok(self.node.stats())
    }
    fn stats(&self) -> Stats {
        self.node.stats()
    }
    fn protocol_breakdown(&self) -> Option<TimeBreakdown> {
        None
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
