//! Model time: nanoseconds since the cluster started, the clock the hub's
//! decisions are made on (`firmware_model::Nanos`). One value, copied to the
//! device state (under the lock) and to the device (read without it).

use std::time::Instant;

use firmware_model::Nanos;

/// When the cluster started: model time 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClusterClock {
    start: Instant,
}

impl ClusterClock {
    /// Model time 0 is now.
    pub(crate) fn start() -> ClusterClock {
        ClusterClock {
            start: Instant::now(),
        }
    }

    /// Model time now.
    pub(crate) fn now(&self) -> Nanos {
        Nanos(u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}
