//! Why a C program's run on Cashmere cannot go on: each error names what the
//! program or its user can change.

use cashmere::CsmError;
use mc_api::{ConnectError, ErrorChain};

use super::heap::HeapLimit;
use crate::settings::SettingsError;

/// Why the run cannot go on; printed once, then the node stops (and tells
/// the others).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    // Printed in the message with each of its causes, so not also
    // returned as the source.
    #[error("cannot open the Memory Channel: {}", ErrorChain(.0))]
    Connect(ConnectError),
    #[error(transparent)]
    Csm(#[from] CsmError),
    #[error(transparent)]
    Dsm(#[from] dsm_core::DsmError),
    /// The virtual clock (`mc-host run --clock virtual`) could not be set
    /// up, or a thread's work count went wrong (no prediction).
    #[error("virtual clock")]
    Clock(#[from] mc_api::vclock::VclockError),
    #[error(
        "{what} before MAIN_INITENV in a program whose main file has no MAIN_ENV: the shared \
         heap and the cluster start at MAIN_INITENV (or at the first macro after MAIN_ENV's \
         set-up)"
    )]
    NotStarted { what: &'static str },
    #[error(
        "this program was not built with mc-cc, so the globals main sets before CREATE \
         cannot reach the other nodes: build it with scripts/mc-cc"
    )]
    NotBuilt,
    #[error(
        "Memory Channel space ran out for a shared heap of {heap} bytes on {nodes} nodes, \
         though the heap was sized to fit the cluster's space: something else holds part of \
         it ({why})"
    )]
    NoSpace {
        heap: usize,
        nodes: u32,
        why: mc_api::McError,
    },
    #[error(
        "MC_NODES says {hint} nodes but the cluster has {nodes}: the heap's layout is sized \
         from it (mc-host run and the QEMU image set it)"
    )]
    NodesHint { hint: u32, nodes: u32 },
    #[error(
        "no shared heap fits: the runtime's control block and the program's globals take \
         {fixed} bytes, and {variant} on {nodes} nodes with {address_space} bytes of Memory \
         Channel space (mc-host run --address-space) leaves less than that and a page for \
         G_MALLOC"
    )]
    NoHeap {
        fixed: usize,
        variant: cashmere::CsmVariant,
        nodes: u32,
        address_space: u64,
    },
    #[error(
        "CSM_HEAP_MIB={mib} asks for more than the largest shared heap, {} bytes for G_MALLOC \
         ({} MiB; the whole heap, with {fixed} bytes of control block and globals, {} bytes): \
         {limit}. Without CSM_HEAP_MIB the heap is that largest one",
        limit.user, limit.user >> 20, limit.heap
    )]
    HeapSetting {
        mib: usize,
        fixed: usize,
        limit: HeapLimit,
    },
    #[error(
        "G_MALLOC({wanted}): the program's G_MALLOCs come to {total} bytes ({} MiB), more than \
         the shared heap's {size} bytes for G_MALLOC{}",
        total >> 20, heap_full_why(*size, *set, limit)
    )]
    HeapFull {
        wanted: usize,
        /// Bytes from the start of G_MALLOC's space to this allocation's
        /// end: every G_MALLOC so far, alignment included, and this one.
        total: usize,
        size: usize,
        /// CSM_HEAP_MIB, when it set the heap.
        set: Option<usize>,
        limit: HeapLimit,
    },
    #[error(
        "the program asks for {asked} processes but the cluster runs {nodes} nodes x {threads} \
         threads = {procs}: give the program -p {procs}, or run it with --nodes/--threads \
         that multiply to {asked}"
    )]
    Shape {
        asked: u64,
        nodes: u32,
        threads: u32,
        procs: u32,
    },
    #[error(
        "{what} before every process was created ({created} of {wanted} CREATEs): the cluster \
         runs {nodes} nodes x {threads} threads = {procs} processes, main included"
    )]
    NotAllCreated {
        what: &'static str,
        created: u32,
        wanted: u32,
        nodes: u32,
        threads: u32,
        procs: u32,
    },
    #[error(
        "CREATE after the processes ended or started: one round of CREATEs per run is supported"
    )]
    SecondRound,
    #[error("{what} on node {node}: only main (process 0, on node 0) may do that")]
    NotMain { what: &'static str, node: u32 },
    #[error(
        "node 0's start record is not this program's (magic {got:#x}): every node must run \
         the same program"
    )]
    ForeignStart { got: u64 },
    #[error(
        "node 0 runs {theirs} processes and this node expected {ours}: every node must get \
         the same MC_THREADS"
    )]
    StartProcs { theirs: u64, ours: u32 },
    #[error(
        "the program's globals are {theirs} bytes on node 0 and {ours} here: every node must \
         run the same executable"
    )]
    GlobalsSize { theirs: u64, ours: usize },
    #[error(
        "the program's code is at {theirs:#x} on node 0 and {ours:#x} here (a PIE executable \
         with address randomisation on): pointers in globals would be wrong; build it with \
         mc-cc, which links it without PIE"
    )]
    CodeMoved { theirs: u64, ours: usize },
    #[error(
        "{what} at {addr:#x}: its state is outside the shared heap, so processes on other \
         nodes cannot see it; declare it in G_MALLOC'd memory"
    )]
    NotShared { what: &'static str, addr: usize },
    #[error(
        "{what} at {addr:#x} was never initialised on this node ({init} not run, or run \
         after CREATE on a global, which only its own node sees)"
    )]
    Uninitialised {
        what: &'static str,
        init: &'static str,
        addr: usize,
    },
    #[error(
        "{what}({n}): Cashmere's barriers take every process, and the cluster runs {nodes} \
         nodes x {threads} threads = {procs}: give the program -p {procs}, or run it with \
         --nodes/--threads that multiply to {n}"
    )]
    BarrierCount {
        what: &'static str,
        n: i64,
        nodes: u32,
        threads: u32,
        procs: u32,
    },
    #[error("UNLOCK of a lock this process does not hold (lock {id})")]
    NotHeld { id: u32 },
    #[error("cannot start a process thread: {0}")]
    Spawn(std::io::Error),
    #[error("a process thread panicked")]
    Panicked,
    #[error("cannot record the run: {0}")]
    Record(String),
}

/// The rest of [`RunError::HeapFull`]'s message: where the heap's size came
/// from, and the largest it could be and why.
fn heap_full_why(size: usize, set: Option<usize>, limit: &HeapLimit) -> String {
    match set {
        Some(mib) if size < limit.user => format!(
            " (CSM_HEAP_MIB={mib}); without CSM_HEAP_MIB it would be {} bytes ({} MiB), the most \
             there can be: {limit}",
            limit.user,
            limit.user >> 20
        ),
        _ => format!(
            " ({} MiB), the most there can be: {limit}. It cannot run on this model with these \
             sizes: shrink the problem",
            size >> 20
        ),
    }
}
