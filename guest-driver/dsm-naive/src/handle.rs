//! The naive protocol as the DSM core drives it ([`Naive`]): start-up, the
//! synchronisation operations (each a release before and an acquire after
//! the operation itself) and the end.

use std::any::Any;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use dsm_core::node_barrier::NodeBarrierError;
use dsm_core::times::{self, Activity};
use dsm_core::{Allocator, DsmError, Protocol, Stats, TimeBreakdown, TimedWindow};
use mc_api::MemoryChannel;

use crate::node::{await_word, NaiveNode, Waited};
use crate::space::Layout;
use crate::{server, NaiveConfig, NaiveError};

/// The protocol's name (`mc-guest csm --protocol naive`, `CSM_PROTOCOL`).
pub const NAME: &str = "naive";

/// How long a cluster barrier may take.
const BARRIER_GIVE_UP: Duration = Duration::from_secs(600);

impl From<NaiveError> for DsmError {
    fn from(e: NaiveError) -> DsmError {
        DsmError::protocol(e)
    }
}

/// A node of the naive protocol; one per node, shared by its threads.
pub struct Naive {
    node: Arc<NaiveNode>,
    server: Mutex<Option<JoinHandle<Result<(), NaiveError>>>>,
}

impl Naive {
    /// Map the heap, attach the regions, start node 0's server, and wait
    /// until every node has done the same.
    pub fn start(mc: &MemoryChannel, cfg: &NaiveConfig) -> Result<Naive, NaiveError> {
        let node = Arc::new(NaiveNode::new(mc, cfg)?);
        node.register()?;
        let server = if node.me == 0 {
            let served = server::served_at_start(&node)?;
            let n = node.clone();
            Some(
                std::thread::Builder::new()
                    .name("naive-home".into())
                    .spawn(move || server::serve(n, served))
                    .map_err(NaiveError::Spawn)?,
            )
        } else {
            None
        };
        // Nobody stores into a region before every node receives it.
        node.barrier
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .wait(BARRIER_GIVE_UP)?;
        Ok(Naive {
            node,
            server: Mutex::new(server),
        })
    }

    fn cluster_barrier(&self) -> Result<(), NaiveError> {
        let n = &self.node;
        n.release()?;
        n.barrier
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .wait(BARRIER_GIVE_UP)?;
        Ok(())
    }

    fn barrier_all(&self) -> Result<(), NaiveError> {
        let _barrier = times::enter(Activity::Barrier);
        let n = &self.node;
        n.local
            .arrive(
                n.threads,
                || n.check_failed().err(),
                || {
                    n.count(|s| s.barriers += 1);
                    self.cluster_barrier().and_then(|()| n.acquire())
                },
            )
            .map_err(|e| match e {
                NodeBarrierError::Failed(e) => NaiveError::NodeBarrier(e),
                NodeBarrierError::Aborted(e) => e,
            })
    }

    fn flag_word(&self, flag: u32) -> Result<usize, NaiveError> {
        if flag >= self.node.at.flags {
            return Err(NaiveError::NoSuchFlag {
                flag,
                flags: self.node.at.flags,
            });
        }
        Ok(Layout::flag(flag))
    }
}

impl Protocol for Naive {
    fn name(&self) -> &'static str {
        NAME
    }
    fn node_id(&self) -> u32 {
        self.node.me
    }
    fn nodes(&self) -> u32 {
        self.node.nodes
    }
    fn threads(&self) -> u32 {
        self.node.threads
    }
    fn page_size(&self) -> u32 {
        self.node.page_size
    }
    fn heap(&self) -> &dsm_core::vm::HeapMemory {
        &self.node.heap
    }
    fn allocator(&self) -> &Allocator {
        &self.node.alloc
    }
    fn window(&self) -> &TimedWindow {
        &self.node.window
    }
    fn poll(&self) -> Result<(), DsmError> {
        // Node 0's server answers; nobody else has anything to answer.
        Ok(())
    }
    fn lock_acquire(&self, lock: u32) -> Result<(), DsmError> {
        {
            let _lock = times::enter(Activity::Lock);
            self.node
                .regions
                .locks
                .acquire(lock)
                .map_err(NaiveError::from)?;
        }
        self.node.count(|s| s.lock_acquires += 1);
        Ok(self.node.acquire()?)
    }
    fn lock_release(&self, lock: u32) -> Result<(), DsmError> {
        self.node.release()?;
        Ok(self
            .node
            .regions
            .locks
            .release(lock)
            .map_err(NaiveError::from)?)
    }
    fn barrier(&self) -> Result<(), DsmError> {
        Ok(self.barrier_all()?)
    }
    fn flag_set(&self, flag: u32, value: u64) -> Result<(), DsmError> {
        if value == 0 {
            return Err(NaiveError::ZeroFlagValue.into());
        }
        let at = self.flag_word(flag)?;
        self.node.release()?;
        Ok(self
            .node
            .regions
            .sync_tx
            .write_u64(at, value)
            .map_err(NaiveError::from)?)
    }
    fn flag_wait(&self, flag: u32) -> Result<u64, DsmError> {
        let at = self.flag_word(flag)?;
        let v = {
            let _flag = times::enter(Activity::Flag);
            let n = &self.node;
            await_word(
                &n.regions.sync_rx,
                at,
                BARRIER_GIVE_UP,
                |w| w != 0,
                || n.check_failed(),
            )
            .map_err(|e| match e {
                Waited::TimedOut(after) => NaiveError::FlagTimeout { flag, after },
                Waited::Failed(e) => e,
            })?
        };
        self.node.count(|s| s.flag_waits += 1);
        self.node.acquire()?;
        Ok(v)
    }
    fn abort(&self) {
        use dsm_core::sigsegv::FaultHandler;
        self.node.abandon();
    }
    fn finish(&self) -> Result<Stats, DsmError> {
        // The final barrier: after it nobody asks node 0 for anything.
        self.cluster_barrier()?;
        self.node
            .stop
            .store(true, std::sync::atomic::Ordering::Release);
        if let Some(h) = self.server.lock().unwrap_or_else(|p| p.into_inner()).take() {
            match h.join() {
                Ok(r) => r?,
                Err(_) => log::error!("naive: node 0's server panicked"),
            }
        }
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
