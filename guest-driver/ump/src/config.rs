//! UMP's configuration (seed 004, UMP: "Make the size of the buffers
//! configurable"; "Allocate buffers sparsely, i.e., as required up to some
//! default limit"), validated once.

use std::time::Duration;

use firmware_model::abi::shm::HostShm;

use crate::error::UmpError;
use crate::link::CTRL;

/// How a node's UMP behaves. Every node may use its own, but a channel's
/// Memory Channel rings take the size its first opener asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Bytes of each Memory Channel ring (per direction of a channel), a
    /// multiple of 64. The seed measured with 32 KB.
    pub ring_bytes: usize,
    /// Bytes of each shared-memory ring. The seed measured with 256 KB.
    pub shm_ring_bytes: usize,
    /// Bytes of this node's UMP region, from which the rings of its
    /// channels are carved as they open (a multiple of the page size).
    pub region_bytes: u64,
    /// Most bytes written between two producer-index updates: smaller
    /// fragments let the reader start sooner, larger ones cost fewer stores.
    pub fragment_bytes: usize,
    /// Check a CRC-32 of each payload (catches dropped packets, which the
    /// error counts do not see).
    pub checksum: bool,
    /// Receiver-only detection (seed 004, Error Management): compare the
    /// error count the writer saved in the trailer with this node's count
    /// after the message. Off only to test the other paths alone.
    pub receiver_check: bool,
    /// Also check every message on the writer's side through the ACK page
    /// (imc_ckerrcnt) before its trailer: the writer learns of the loss
    /// too, at the cost of a round trip per message.
    pub writer_check: bool,
    /// How long a blocking call waits for the peer before it gives up.
    pub timeout: Duration,
    /// Polls a wait spins before it starts yielding the core (then it
    /// sleeps in growing steps up to 50 us): more is lower latency while
    /// cores are free, less leaves them to the hub and other tasks. The
    /// default, 50, is what the adapter's own latency bench spins before it
    /// yields: on a loaded 2-core host, 200 doubled the 8-byte one-way time
    /// (docs/ump.md, costs).
    pub spins: u32,
    /// Multicast through this node's outbuf (one copy of a message for a
    /// list of channels, `outbuf`); off: one copy per channel always.
    pub outbuf: bool,
    /// The other processes of this host (each a node with its own adapter,
    /// as PVM's tasks are) and the directory where channels to them keep
    /// their shared file: such channels go over shared memory
    /// (`shm_ring_bytes` rings), not through the hub. None: only the tasks
    /// (threads) of this node share memory.
    pub host_shm: Option<HostShm>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            ring_bytes: 32 << 10,
            shm_ring_bytes: 256 << 10,
            region_bytes: 2 << 20,
            fragment_bytes: 8 << 10,
            checksum: true,
            receiver_check: true,
            writer_check: false,
            timeout: Duration::from_secs(60),
            spins: 50,
            outbuf: true,
            host_shm: None,
        }
    }
}

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn flag(name: &str) -> Option<bool> {
    std::env::var(name)
        .ok()
        .map(|v| !matches!(v.trim(), "" | "0" | "false" | "no"))
}

impl Config {
    /// The defaults, changed by `MC_UMP_RING_KIB`, `MC_UMP_SHM_RING_KIB`,
    /// `MC_UMP_REGION_KIB`, `MC_UMP_FRAGMENT_KIB`, `MC_UMP_CHECKSUM`, `MC_UMP_RECEIVER_CHECK`,
    /// `MC_UMP_WRITER_CHECK`, `MC_UMP_TIMEOUT_S`, `MC_UMP_SPINS` and `MC_UMP_OUTBUF` (for the C
    /// library), and the host's shared memory as `mc-host` passes it
    /// ([`HostShm::from_lookup`]).
    pub fn from_env() -> Config {
        let d = Config::default();
        Config {
            ring_bytes: env::<usize>("MC_UMP_RING_KIB").map_or(d.ring_bytes, |k| k << 10),
            shm_ring_bytes: env::<usize>("MC_UMP_SHM_RING_KIB")
                .map_or(d.shm_ring_bytes, |k| k << 10),
            region_bytes: env::<u64>("MC_UMP_REGION_KIB").map_or(d.region_bytes, |k| k << 10),
            fragment_bytes: env::<usize>("MC_UMP_FRAGMENT_KIB")
                .map_or(d.fragment_bytes, |k| k << 10),
            checksum: flag("MC_UMP_CHECKSUM").unwrap_or(d.checksum),
            receiver_check: flag("MC_UMP_RECEIVER_CHECK").unwrap_or(d.receiver_check),
            writer_check: flag("MC_UMP_WRITER_CHECK").unwrap_or(d.writer_check),
            timeout: env::<u64>("MC_UMP_TIMEOUT_S").map_or(d.timeout, Duration::from_secs),
            spins: env::<u32>("MC_UMP_SPINS").unwrap_or(d.spins),
            outbuf: flag("MC_UMP_OUTBUF").unwrap_or(d.outbuf),
            host_shm: HostShm::from_lookup(|k| std::env::var(k).ok()).unwrap_or_else(|e| {
                // Channels to this host's processes then go over Memory
                // Channel: slower, still correct.
                log::warn!("UMP: ignoring the host's shared memory: {e}");
                None
            }),
        }
    }

    /// How UMP's waits step down from spinning.
    pub(crate) fn backoff(&self) -> mc_api::backoff::Backoff {
        mc_api::backoff::Backoff::with_policy(mc_api::backoff::BackoffPolicy {
            spins: self.spins,
            yields: 256,
            max_sleep: Duration::from_micros(50),
        })
    }

    /// Check the numbers against each other.
    pub fn validate(&self) -> Result<(), UmpError> {
        let bad = |s: String| Err(UmpError::Config(s));
        for (name, v) in [
            ("ring_bytes", self.ring_bytes),
            ("shm_ring_bytes", self.shm_ring_bytes),
        ] {
            if v < 64 || v % 64 != 0 || v > (1 << 30) {
                return bad(format!(
                    "{name} = {v}: a ring needs a multiple of 64 bytes, 64 B to 1 GiB"
                ));
            }
        }
        if self.fragment_bytes < 8 {
            return bad(format!(
                "fragment_bytes = {}: at least 8",
                self.fragment_bytes
            ));
        }
        if self.region_bytes < (self.ring_bytes + CTRL) as u64 || self.region_bytes > (1 << 31) {
            return bad(format!(
                "region_bytes = {}: must hold at least one ring of {} bytes (and at most 2 GiB)",
                self.region_bytes, self.ring_bytes
            ));
        }
        if self.timeout.is_zero() {
            return bad("timeout = 0".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_numbers_are_refused_with_the_reason() {
        assert!(Config::default().validate().is_ok());
        let c = Config {
            ring_bytes: 100,
            ..Config::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("ring_bytes = 100"));
        let c = Config {
            region_bytes: 1024,
            ..Config::default()
        };
        assert!(c.validate().is_err());
    }
}
