//! Which network the clock's lone arrivals follow: the one the adapter's
//! register file names (`--link clan` gives seed 001's cLAN, anything else
//! Memory Channel 2), learnt when an adapter comes up. One value per
//! process: every adapter of a process belongs to one cluster.

use std::sync::atomic::{AtomicU8, Ordering};

use firmware_model::vtime::VirtualLink;

const MC2: u8 = 0;
const CLAN: u8 = 1;

static NETWORK: AtomicU8 = AtomicU8::new(MC2);

/// Remember the network of the adapter just brought up.
pub fn learn_network(link: VirtualLink) {
    let code = match link {
        VirtualLink::Mc2 => MC2,
        VirtualLink::Clan => CLAN,
    };
    NETWORK.store(code, Ordering::Relaxed);
}

/// The network this process's adapters are on (Memory Channel 2 until an
/// adapter says otherwise).
pub fn network() -> VirtualLink {
    match NETWORK.load(Ordering::Relaxed) {
        CLAN => VirtualLink::Clan,
        _ => VirtualLink::Mc2,
    }
}
