//! The store path: every write the API makes into Memory Channel space goes
//! through here, posted to the adapter's transmit FIFO (docs/device.md
//! section 19) or, in reliable mode, checked piece by piece through the ACK
//! page and sent again until it went through clean (seed 004, Error
//! Management: "save count, write, check, retry").
//!
//! A store returns once it is queued: it says nothing about arrival, as on
//! the hardware, where a store to a transmit region is a posted PIO write.
//! What orders and proves: FIFO order (a node's stores reach the network in
//! the order they were queued, so [`MemoryChannel::fence`] only has to order
//! the program's own memory accesses around it), [`MemoryChannel::flush`]
//! (handed to the hub) and [`MemoryChannel::check_errors`] (arrived at every
//! adapter).

use std::time::{Duration, Instant};

use crate::error::{McError, WaitFor};
use crate::node::{Node, OP_TIMEOUT};

/// Bytes per checked piece of a reliable store.
pub const RELIABLE_CHUNK: usize = 128;
/// How long a reliable store waits for its ACK answer before sending again.
const RELIABLE_ACK_WAIT: Duration = Duration::from_millis(50);

impl Node {
    pub(crate) fn store(&self, addr: u64, data: &[u8]) -> Result<(), McError> {
        self.store_batch(&[(addr, data)])
    }

    /// One store through the driver's allocation-free path (reliable mode:
    /// as [`MemoryChannel::store`]).
    pub(crate) fn store_one(&self, addr: u64, data: &[u8]) -> Result<(), McError> {
        if self.reliable {
            return self.reliable_store(&[(addr, data)]);
        }
        self.stores.post_one(addr, data)
    }

    pub(crate) fn store_batch(&self, records: &[(u64, &[u8])]) -> Result<(), McError> {
        if self.reliable {
            return self.reliable_store(records);
        }
        self.stores.post(records)
    }

    /// Wait until every store this node queued before the call has been
    /// handed to the hub: for a program that must not end with stores in
    /// flight. It does not mean they arrived anywhere; an ACK-page check
    /// ([`MemoryChannel::check_errors`]) proves that. Reports a store the
    /// adapter refused since the last flush ([`McError::Refused`]).
    pub(crate) fn flush(&self) -> Result<(), McError> {
        self.stores.flush()
    }

    /// Save the count, write, check, and write again until the check is clean.
    /// Stores go in pieces of [`RELIABLE_CHUNK`] bytes, each checked on its own:
    /// at 1% corruption a large write would almost never come through whole.
    fn reliable_store(&self, records: &[(u64, &[u8])]) -> Result<(), McError> {
        let start = Instant::now();
        for &(addr, data) in records {
            for (k, piece) in data.chunks(RELIABLE_CHUNK).enumerate() {
                let at = addr + (k * RELIABLE_CHUNK) as u64;
                let mut attempt = 0u32;
                loop {
                    let saved = self.error_count();
                    self.stores.post(&[(at, piece)])?;
                    match self.check_errors_within(RELIABLE_ACK_WAIT) {
                        Ok(c) if c.count == saved && c.all_healthy(self.members_mask()) => break,
                        Ok(_) | Err(McError::Timeout { .. }) => {}
                        Err(e) => return Err(e),
                    }
                    attempt += 1;
                    if start.elapsed() > OP_TIMEOUT {
                        return Err(McError::Timeout {
                            after: OP_TIMEOUT,
                            waiting_for: WaitFor::CleanStore {
                                addr: at,
                                tries: attempt,
                            },
                        });
                    }
                    // A link that is down stays down for a while: back off.
                    std::thread::sleep(Duration::from_micros(u64::from(attempt.min(50)) * 20));
                }
            }
        }
        Ok(())
    }
}
