//! Opening this node's adapter and the Memory Channel API from the
//! environment (`mc_api::ConnectOptions`: `MC_SOCKET` names a virtual
//! guest's vhost-user socket; without it the adapter's PCI function is
//! driven from user space, as root in a QEMU guest), with guest RAM sized
//! from the shared heap, as `mc-guest csm` sizes it (docs/cashmere.md,
//! "SOR grids").

use mc_api::{connect, ConnectError, ConnectOptions, MemoryChannel, OpenOptions};

/// A virtual guest's RAM for a heap of `heap_bytes`, unless `MC_RAM_MIB`
/// says: the heap is received once more as this node's home region.
fn ram_mib(heap_bytes: usize) -> usize {
    64.max(((4 << 20) + 2 * heap_bytes) >> 20) + 32
}

/// Open the adapter and the API for a Cashmere heap of `heap_bytes` whose
/// protocol space is `arena_bytes` (the start-up rendezvous waits for every
/// node of the cluster to do the same).
pub fn open(heap_bytes: usize, arena_bytes: u64) -> Result<MemoryChannel, ConnectError> {
    let env = ConnectOptions::from_env();
    let api = OpenOptions {
        arena_bytes,
        reliable: env.reliable,
        ..Default::default()
    };
    connect(&env.transport(ram_mib(heap_bytes)), &api)
}
