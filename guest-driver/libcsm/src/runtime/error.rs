//! Why a C program's run on Cashmere cannot go on: each error names what the
//! program or its user can change.

use cashmere::CsmError;
use mc_api::{Chain, ConnectError};

use crate::settings::SettingsError;

/// Why the run cannot go on; printed once, then the node stops (and tells
/// the others).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    // Printed in the message with each of its causes, so not also
    // returned as the source.
    #[error("cannot open the Memory Channel: {}", Chain(.0))]
    Connect(ConnectError),
    #[error(transparent)]
    Csm(#[from] CsmError),
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
        "the shared heap ({heap_mib} MiB) is every node's home region, so {nodes} nodes need \
         {nodes} x {heap_mib} MiB of Memory Channel space: give mc-host run a larger \
         --address-space (at most 1G), or a smaller heap with CSM_HEAP_MIB ({why})"
    )]
    NoSpace {
        heap_mib: usize,
        nodes: u32,
        why: mc_api::McError,
    },
    #[error(
        "a heap of {user} bytes for G_MALLOC would start at {base:#x}, below the end of the \
         executable ({floor:#x}): the heap lies below the program's globals at {globals:#x}; \
         set a smaller CSM_HEAP_MIB"
    )]
    HeapBelow {
        user: usize,
        base: usize,
        floor: usize,
        globals: usize,
    },
    #[error(
        "MC_NODES says {hint} nodes but the cluster has {nodes}: the heap's layout is sized \
         from it (mc-host run and the QEMU image set it)"
    )]
    NodesHint { hint: u32, nodes: u32 },
    #[error(
        "the shared heap would be {bytes} bytes ({user} for G_MALLOC, {globals} for the \
         program's globals): at most {max}; give a smaller MAIN_INITENV size or CSM_HEAP_MIB"
    )]
    HeapTooLarge {
        bytes: usize,
        user: usize,
        globals: usize,
        max: usize,
    },
    #[error(
        "G_MALLOC({wanted}): the shared heap is full ({used} of {size} bytes used); set \
         CSM_HEAP_MIB (without it the heap is MAIN_INITENV's size or 64 MiB, at most half \
         the Memory Channel address space over the nodes)"
    )]
    HeapFull {
        wanted: usize,
        used: usize,
        size: usize,
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
