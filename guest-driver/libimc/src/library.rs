//! The process's state behind the C calls: the node's open Memory Channel
//! (opened by the first call, from the environment: `connect`), the
//! regions this process allocated and attached, its lock sets, and the
//! command relay. One per process, for every thread.

use std::collections::{HashMap, HashSet};
use std::ffi::c_int;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use firmware_model::ErrorChain;
use mc_api::{ConnectOptions, LockSet, MemoryChannel, RxRegion};

use crate::abi::IMC_NOTINIT;
use crate::connect;
use crate::relay::Relay;
use crate::{failure, plain};

/// This process's attachments of one region.
#[derive(Default)]
pub(crate) struct Attached {
    /// The transmit view's address (the mapping is in `plain`).
    pub(crate) tx: Option<usize>,
    pub(crate) rx: Option<RxRegion>,
}

/// Regions this process allocated (imc_asalloc) and attached.
#[derive(Default)]
pub(crate) struct RegionBook {
    pub(crate) allocated: HashSet<u32>,
    pub(crate) attached: HashMap<u32, Attached>,
}

pub(crate) struct Library {
    pub(crate) mc: MemoryChannel,
    /// Bytes per Memory Channel page: regions are whole pages.
    pub(crate) page_size: u64,
    regions: Mutex<RegionBook>,
    locks: Mutex<HashMap<u32, Arc<LockSet>>>,
    pub(crate) relay: Relay,
}

impl Library {
    pub(crate) fn regions(&self) -> MutexGuard<'_, RegionBook> {
        self.regions.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn locks(&self) -> MutexGuard<'_, HashMap<u32, Arc<LockSet>>> {
        self.locks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The node numbers of the cluster's members now, in node order.
    pub(crate) fn members(&self) -> Vec<u32> {
        self.mc
            .hosts()
            .members
            .iter()
            .map(|n| u32::from(n.0))
            .collect()
    }
}

static LIBRARY: OnceLock<Result<Library, String>> = OnceLock::new();

/// The library, opened on first use; `IMC_NOTINIT` if the adapter could not
/// be opened (the reason is kept for `imc_perror`).
pub(crate) fn library() -> Result<&'static Library, c_int> {
    match LIBRARY.get_or_init(open) {
        Ok(l) => Ok(l),
        Err(why) => Err(failure(IMC_NOTINIT, why.clone())),
    }
}

fn open() -> Result<Library, String> {
    let opts = ConnectOptions::from_env();
    let mc = connect::open(&opts)
        .map_err(|e| format!("opening the Memory Channel: {}", ErrorChain(&e)))?;
    plain::install()
        .map_err(|e| format!("installing the plain-store handlers: {}", ErrorChain(&e)))?;
    let relay = Relay::start(&mc, &opts)
        .map_err(|e| format!("starting the command relay: {}", ErrorChain(&e)))?;
    // A C program ends with exit(), which runs no Rust destructor: hand what
    // is still queued to the hub then.
    // SAFETY: registers a function without arguments that only reads a
    // static; atexit has no other requirement.
    unsafe { libc::atexit(flush_at_exit) };
    log::info!("libimc: node{} of {} open", mc.node_id().0, mc.nodes());
    Ok(Library {
        page_size: u64::from(mc.registers().page_size),
        mc,
        regions: Mutex::new(RegionBook::default()),
        locks: Mutex::new(HashMap::new()),
        relay,
    })
}

extern "C" fn flush_at_exit() {
    if let Some(Ok(l)) = LIBRARY.get() {
        if let Err(e) = l.mc.flush() {
            eprintln!("libimc: stores still queued at exit: {}", ErrorChain(&e));
        }
    }
}
