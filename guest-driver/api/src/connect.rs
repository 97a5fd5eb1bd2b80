//! Connecting to this node's adapter and opening the Memory Channel API on
//! it, the one way every program and library of the guest does: the
//! transport `mc_driver::open_adapter` chooses (a virtual guest's
//! vhost-user socket, else the PCI function, as root in a QEMU guest), the
//! API's port on that adapter, then the API, whose start-up rendezvous
//! waits for every node of the cluster ([`connect`]).
//!
//! [`ConnectOptions`] is what the environment asks for (`MC_SOCKET`,
//! `MC_RAM_MIB`, `MC_DMA_MIB`, `MC_RELIABLE`, `MC_ARENA_KIB`, which
//! `mc-host run` and the QEMU image set): the C libraries' only way to be
//! told, having no command line. Each caller keeps its own defaults for
//! what the environment leaves out.

use std::ffi::OsString;
use std::path::PathBuf;

use mc_driver::{open_adapter, OpenError, TransportChoice, SOCKET_ENV};

use crate::adapter_port::AdapterPort;
use crate::channel::MemoryChannel;
use crate::error::McError;
use crate::open::OpenOptions;
use crate::port::McPort;

/// DMA memory of the PCI transport when `MC_DMA_MIB` does not say (MiB).
pub const DEFAULT_DMA_MIB: usize = 16;

/// Why the Memory Channel could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The transport, or the adapter on it.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The API on the adapter.
    #[error(transparent)]
    Api(#[from] McError),
}

/// Open the adapter `choice` names, then the API on it with `opts` (the
/// start-up rendezvous waits for every node of the cluster to do the same).
pub fn connect(
    choice: &TransportChoice,
    opts: &OpenOptions,
) -> Result<MemoryChannel, ConnectError> {
    Ok(MemoryChannel::open(connect_port(choice)?, opts)?)
}

/// The first half of [`connect`]: the adapter alone, for a caller that sizes
/// what it opens the API with from the adapter's registers (libcsm sizes
/// the shared heap from the cluster's Memory Channel space).
pub fn connect_port(choice: &TransportChoice) -> Result<Box<dyn McPort>, ConnectError> {
    Ok(Box::new(AdapterPort::new(open_adapter(choice)?)?))
}

/// What the environment asks of the connection; `None` where it does not
/// say (or says something that is not a number).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectOptions {
    /// `MC_SOCKET` (when not empty): the virtual guest's socket.
    pub socket: Option<PathBuf>,
    /// `MC_RAM_MIB`: RAM of a virtual guest.
    pub ram_mib: Option<usize>,
    /// `MC_DMA_MIB`: DMA memory of the PCI transport.
    pub dma_mib: Option<usize>,
    /// `MC_RELIABLE` set and not empty, `0` or `false`: check every store
    /// and send it again until clean.
    pub reliable: bool,
    /// `MC_ARENA_KIB`: the coherent arena.
    pub arena_kib: Option<u64>,
}

impl ConnectOptions {
    /// This process's environment.
    pub fn from_env() -> ConnectOptions {
        ConnectOptions::from_vars(|name| std::env::var_os(name))
    }

    /// The variables `var` gives.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> ConnectOptions {
        let text = |name: &str| var(name).and_then(|v| v.to_str().map(|s| s.trim().to_string()));
        let number = |name: &str| text(name).and_then(|v| v.parse().ok());
        ConnectOptions {
            socket: var(SOCKET_ENV).filter(|s| !s.is_empty()).map(PathBuf::from),
            ram_mib: number("MC_RAM_MIB"),
            dma_mib: number("MC_DMA_MIB"),
            reliable: text("MC_RELIABLE")
                .is_some_and(|v| !matches!(v.as_str(), "" | "0" | "false")),
            arena_kib: text("MC_ARENA_KIB").and_then(|v| v.parse().ok()),
        }
    }

    /// A virtual guest (vhost-user), not a QEMU guest.
    pub fn is_virtual(&self) -> bool {
        self.socket.is_some()
    }

    /// The transport these options choose, with a virtual guest's RAM
    /// `default_ram_mib` unless `MC_RAM_MIB` says, and [`DEFAULT_DMA_MIB`]
    /// unless `MC_DMA_MIB` says.
    pub fn transport(&self, default_ram_mib: usize) -> TransportChoice {
        TransportChoice {
            socket: self.socket.clone(),
            ram_bytes: self.ram_mib.unwrap_or(default_ram_mib) << 20,
            dma_bytes: self.dma_mib.unwrap_or(DEFAULT_DMA_MIB) << 20,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn options(vars: &[(&str, &str)]) -> ConnectOptions {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        ConnectOptions::from_vars(|name| vars.get(name).cloned())
    }

    #[test]
    fn the_environment_says_what_it_sets_and_nothing_else() {
        assert_eq!(options(&[]), ConnectOptions::default());
        let o = options(&[
            ("MC_SOCKET", "/run/node1.sock"),
            ("MC_RAM_MIB", " 96 "),
            ("MC_DMA_MIB", "32"),
            ("MC_RELIABLE", "1"),
            ("MC_ARENA_KIB", "8192"),
        ]);
        assert_eq!(o.socket, Some(PathBuf::from("/run/node1.sock")));
        assert!(o.is_virtual());
        assert_eq!(
            (o.ram_mib, o.dma_mib, o.arena_kib),
            (Some(96), Some(32), Some(8192))
        );
        assert!(o.reliable);
        let t = o.transport(64);
        assert_eq!((t.ram_bytes, t.dma_bytes), (96 << 20, 32 << 20));
    }

    #[test]
    fn empty_and_false_values_ask_for_nothing() {
        let o = options(&[("MC_SOCKET", ""), ("MC_RAM_MIB", "lots")]);
        assert!(!o.is_virtual());
        assert_eq!(o.ram_mib, None);
        for off in ["", "0", "false", " 0 "] {
            assert!(!options(&[("MC_RELIABLE", off)]).reliable, "{off:?}");
        }
        let t = o.transport(64);
        assert_eq!(
            (t.ram_bytes, t.dma_bytes),
            (64 << 20, DEFAULT_DMA_MIB << 20)
        );
    }
}
