//! Noticing that the network lost Cashmere's stores. Memory Channel does not
//! retransmit (seed 004, Error Management: software checks the error count
//! around what it must not lose). Cashmere's protocol has no retransmission of
//! its own for data and metadata, so on an API that is not reliable a lost
//! diff, notice or directory word leaves a node with wrong data or waiting
//! for an answer that never comes. Rather than fail later on a wrong value or
//! a timeout that names a symptom, every barrier looks at the cluster error
//! count (one load from the status page) and stops the run when it moved.
//! Cashmere cannot tell a lost page request or reply (which its fetch
//! retries, checked end to end) from a lost diff or notice (which nothing
//! repairs), so any error between barriers stops the run there; `finish`
//! does not look, so that a program whose last phase only fetched pages
//! through losses ends as it did.
//! With a reliable API (each store retried until it went through clean) the
//! count may move freely.

use mc_api::MemoryChannel;

use crate::CsmError;

#[derive(Clone, Copy)]
pub(crate) struct LossWatch {
    /// The API retransmits: losses are repaired under Cashmere.
    reliable: bool,
    errors_at_start: u64,
}

impl LossWatch {
    pub(crate) fn new(mc: &MemoryChannel) -> LossWatch {
        LossWatch {
            reliable: mc.is_reliable(),
            errors_at_start: mc.error_count(),
        }
    }

    /// An error if the network damaged or lost packets since Cashmere
    /// started and nothing retransmits them. Errors on other adapters reach
    /// this node's status page within a bounded lag (docs/device.md s.19),
    /// so one barrier may miss an error the next one sees.
    pub(crate) fn check(&self, mc: &MemoryChannel) -> Result<(), CsmError> {
        if self.reliable {
            return Ok(());
        }
        let now = mc.error_count();
        if now != self.errors_at_start {
            return Err(CsmError::NetworkLoss {
                before: self.errors_at_start,
                now,
            });
        }
        Ok(())
    }
}
