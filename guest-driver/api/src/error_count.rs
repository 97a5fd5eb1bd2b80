//! Error counts (seed 004, Error Management): the cluster error count read
//! from the status page (imc_rderrcnt) and the check through this node's ACK
//! page (imc_ckerrcnt), which is ordered after every store this node made
//! before it, so "save count, write, check" detects any error in between.

use firmware_model::Nanos;
use std::sync::atomic::Ordering;
use std::time::Duration;

use firmware_model::AdapterErrorStatus;

use crate::error::{McError, WaitFor};
use crate::node::{wait_for, Node, OP_TIMEOUT};
use crate::port::{McPort, ReceiveMemory};

/// Result of an ACK-page check (imc_ckerrcnt).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorCheck {
    /// The cluster error count including every error up to the check.
    pub count: u64,
    /// Every adapter's error status, word i for node i.
    pub statuses: Vec<AdapterErrorStatus>,
}

impl ErrorCheck {
    /// Every member online with its link up.
    pub fn all_healthy(&self, members: u64) -> bool {
        self.statuses
            .iter()
            .enumerate()
            .all(|(i, s)| members & (1 << i) == 0 || s.is_healthy())
    }
}

impl Node {
    /// The cluster error count: one load from the status page (imc_rderrcnt).
    /// Not guaranteed current for errors on remote nodes; see
    /// [`MemoryChannel::check_errors`].
    pub(crate) fn error_count(&self) -> u64 {
        self.port().cluster_error_count()
    }

    /// Read every adapter's error status through this node's ACK page
    /// (imc_ckerrcnt). The ACK is ordered after every store this node made
    /// before it, and its answer lands only once every one of them has
    /// reached every adapter: "save count, write, check" detects any error in
    /// between, and a check that returns proves arrival. A store the adapter
    /// refused is reported as [`McError::Refused`].
    pub(crate) fn check_errors(&self) -> Result<ErrorCheck, McError> {
        self.check_errors_within(OP_TIMEOUT)
    }

    /// [`MemoryChannel::check_errors`], giving up after `timeout` (the query is
    /// lost while this node's link is down).
    pub(crate) fn check_errors_within(&self, timeout: Duration) -> Result<ErrorCheck, McError> {
        let Some(statuses) = self.ack_round_trip(timeout, |ack, base, n| {
            (0..n)
                .map(|i| AdapterErrorStatus::from_word(ack.load_u32(base + 4 * i)))
                .collect()
        })?
        else {
            self.stores.flush()?;
            return Err(McError::Offline);
        };
        // Everything before the query has been taken by now: a store the
        // adapter refused meanwhile is reported here too.
        self.stores.flush()?;
        Ok(ErrorCheck {
            count: self.error_count(),
            statuses,
        })
    }

    /// Post a query to this node's ACK page and wait for its answer, then
    /// `read` the answer (the ACK memory, the slot's offset, the node
    /// count) while the slot is still this caller's. When it returns, every
    /// store this node queued before it has reached every adapter (or was
    /// discarded there). None: the adapter crashed since the query was
    /// posted, so it was refused and no answer comes.
    pub(crate) fn ack_round_trip<T>(
        &self,
        timeout: Duration,
        read: impl FnOnce(&dyn ReceiveMemory, usize, usize) -> T,
    ) -> Result<Option<T>, McError> {
        let _slot = self.ack_slot.lock().unwrap_or_else(|p| p.into_inner());
        let l = self.layout;
        let n = self.regs.nodes as usize;
        let slots = (l.page_size as usize / (4 * n)).max(1);
        let seq = self.ack_seq.fetch_add(1, Ordering::Relaxed) as usize;
        let base = (seq % slots) * 4 * n;
        // Words never have bits 24..29 set, so all-ones marks "not yet answered".
        self.ack.write_local(base, &vec![0xff; 4 * n]);
        let addr = l.page_addr(l.ack_page(self.me)) + base as u64;
        let generation = self.coherence.generation();
        self.stores.post(&[(addr, &[1])])?;
        let ack = &self.ack;
        // The answer is the hub's, not a stamped store: in virtual time it
        // comes one round trip after the query (docs/virtual-time.md).
        let asked = mc_driver::vclock::stamp();
        let answer_at = || {
            let network = mc_driver::vclock::network();
            let query = network.arrival(Nanos(asked), 1);
            Some(network.arrival(query, 4 * n as u64).0)
        };
        let answered = wait_for(
            self,
            WaitFor::AckAnswer,
            timeout,
            || {
                if (0..n).all(|i| ack.load_u32(base + 4 * i) != u32::MAX) {
                    Some(true)
                } else {
                    // The adapter crashed (and maybe rejoined with an empty PCT)
                    // since the query was posted: it was refused, no answer comes.
                    (self.coherence.generation() != generation).then_some(false)
                }
            },
            answer_at,
        )?;
        Ok(answered.then(|| read(&**ack, base, n)))
    }
}
