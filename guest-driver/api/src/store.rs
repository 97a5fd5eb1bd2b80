//! The store path: every write the API makes into Memory Channel space goes
//! through here, straight to the adapter or, in reliable mode, checked
//! piece by piece through the ACK page and sent again until it went through
//! clean (seed 004, Error Management: "save count, write, check, retry").

use std::time::{Duration, Instant};

use crate::channel::{MemoryChannel, OP_TIMEOUT};
use crate::error::{McError, WaitFor};
use crate::port::McPort;

/// Bytes per checked piece of a reliable store.
pub const RELIABLE_CHUNK: usize = 128;
/// How long a reliable store waits for its ACK answer before sending again.
const RELIABLE_ACK_WAIT: Duration = Duration::from_millis(50);

impl MemoryChannel {
    pub(crate) fn store(&self, addr: u64, data: &[u8]) -> Result<(), McError> {
        if self.inner.reliable {
            return self.reliable_store(&[(addr, data)]);
        }
        self.port().store(addr, data)
    }

    pub(crate) fn store_batch(&self, records: &[(u64, &[u8])]) -> Result<(), McError> {
        if self.inner.reliable {
            return self.reliable_store(records);
        }
        self.port().store_batch(records)
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
                    self.port().store(at, piece)?;
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
