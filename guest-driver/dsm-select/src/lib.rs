//! The DSM protocols by name (docs/dsm.md): the one place that knows every
//! protocol, so that `mc-guest csm --protocol NAME` and libcsm's
//! `CSM_PROTOCOL` start the same ones. A new protocol is a crate of its own
//! on `dsm-core` and a line in each of [`ProtocolName`]'s matches here.

use std::sync::Arc;

use cashmere::{Config, Csm};
use dsm_core::{Dsm, DsmConfig, DsmError};
use dsm_naive::Naive;
use hlrc::{BarrierMode, Hlrc, HlrcConfig};
use mc_api::MemoryChannel;

/// The variable that names a C program's protocol.
pub use firmware_model::abi::dsm::PROTOCOL_ENV;

/// A DSM protocol a run may ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ProtocolName {
    /// Cashmere-2L and its variants (docs/cashmere.md; `--variant`).
    #[default]
    Cashmere,
    /// Every page at node 0, every copy dropped at an acquire (`dsm-naive`).
    Naive,
    /// Home-based lazy release consistency, seed 001 (`hlrc`): one
    /// application thread per node.
    Hlrc,
    /// HLRC whose barriers broadcast the write notices
    /// (`hlrc-broadcast`: seed 001 s.6's what-if, docs/hlrc.md).
    HlrcBroadcast,
}

/// A protocol name nobody knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no DSM protocol is called {0:?} (one of {names})", names = ProtocolName::names())]
pub struct UnknownProtocol(pub String);

impl ProtocolName {
    pub const ALL: [ProtocolName; 4] = [
        ProtocolName::Cashmere,
        ProtocolName::Naive,
        ProtocolName::Hlrc,
        ProtocolName::HlrcBroadcast,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProtocolName::Cashmere => cashmere::NAME,
            ProtocolName::Naive => dsm_naive::NAME,
            ProtocolName::Hlrc => hlrc::NAME,
            ProtocolName::HlrcBroadcast => hlrc::NAME_BROADCAST,
        }
    }

    /// Every name, comma-separated.
    pub fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }

    /// Whether the protocol runs one protocol node per thread (Cashmere's
    /// 1L, `Config::levels`) as well as per machine.
    pub fn has_one_level(self) -> bool {
        self == ProtocolName::Cashmere
    }

    /// Start this node of the protocol with the run's configuration (the
    /// naive protocol takes its sizes, threads, locks, flags and heap base;
    /// Cashmere all of it). One protocol node per machine (2L).
    pub fn start(self, mc: &MemoryChannel, cfg: &Config) -> Result<Dsm, DsmError> {
        let core = DsmConfig {
            heap_bytes: cfg.heap_bytes,
            page_size: cfg.page_size,
            threads: cfg.threads,
            locks: cfg.locks,
            flags: cfg.flags,
            heap_base: cfg.heap_base,
        };
        Ok(match self {
            ProtocolName::Cashmere => Dsm::new(Arc::new(Csm::start(mc, cfg)?)),
            ProtocolName::Naive => Dsm::new(Arc::new(Naive::start(mc, &core)?)),
            ProtocolName::Hlrc | ProtocolName::HlrcBroadcast => Dsm::new(Arc::new(
                Hlrc::start(
                    mc,
                    &HlrcConfig {
                        core,
                        barrier: if self == ProtocolName::HlrcBroadcast {
                            BarrierMode::Broadcast
                        } else {
                            BarrierMode::Manager
                        },
                        ..HlrcConfig::default()
                    },
                )
                .map_err(DsmError::from)?,
            )),
        })
    }
}

impl std::fmt::Display for ProtocolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ProtocolName {
    type Err = UnknownProtocol;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownProtocol(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_and_others_are_refused() {
        for p in ProtocolName::ALL {
            assert_eq!(p.name().parse::<ProtocolName>(), Ok(p));
        }
        let e = "treadmarks".parse::<ProtocolName>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "no DSM protocol is called \"treadmarks\" (one of cashmere, naive, hlrc, hlrc-broadcast)"
        );
    }
}
