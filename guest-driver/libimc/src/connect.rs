//! Opening this node's adapter and the Memory Channel API from the
//! environment (`mc_api::ConnectOptions`: `MC_SOCKET` names a virtual
//! guest's vhost-user socket; without it the adapter's PCI function is
//! driven from user space, as root in a QEMU guest), with libimc's
//! defaults: 64 MiB of virtual guest RAM and a 4 MiB coherent arena.
//!
//! The C library reaches the adapter only through `mc_api::connect`;
//! every Memory Channel operation goes through `mc-api`.

use mc_api::{connect, ConnectError, ConnectOptions, MemoryChannel, OpenOptions};

/// A virtual guest's RAM when `MC_RAM_MIB` does not say (MiB).
const DEFAULT_RAM_MIB: usize = 64;
/// The coherent arena when `MC_ARENA_KIB` does not say (KiB).
const DEFAULT_ARENA_KIB: u64 = 4096;

/// Open the adapter and the API (the start-up rendezvous waits for every
/// node of the cluster to do the same).
pub fn open(opts: &ConnectOptions) -> Result<MemoryChannel, ConnectError> {
    let api = OpenOptions {
        arena_bytes: opts.arena_kib.unwrap_or(DEFAULT_ARENA_KIB) << 10,
        reliable: opts.reliable,
        ..Default::default()
    };
    connect(&opts.transport(DEFAULT_RAM_MIB), &api)
}
