//! Events from the device (page-written notifications, membership changes),
//! kept until someone asks for them: the notification channel of seed 004's
//! interrupt-on-receive regions.

use std::time::Duration;

use firmware_model::abi::event_type;
use firmware_model::NodeId;

use crate::channel::{wait_for, MemoryChannel};
use crate::error::{McError, WaitFor};
use crate::port::McPort;
use crate::region::RxRegion;

/// A page written event on an interrupt-on-receive region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notification {
    pub page: u32,
    pub source: NodeId,
}

impl MemoryChannel {
    /// Events from the device, kept until someone asks for them.
    pub(crate) fn pump_events(&self) {
        let new = self.port().poll_events();
        if !new.is_empty() {
            self.inner
                .events
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(new);
        }
    }

    /// Wait for a store into `rx` (attached with `notify`).
    pub fn wait_notification(
        &self,
        rx: &RxRegion,
        timeout: Duration,
    ) -> Result<Notification, McError> {
        let (first, pages) = rx.pages();
        wait_for(WaitFor::Notification, timeout, || {
            self.pump_events();
            let mut ev = self.inner.events.lock().unwrap_or_else(|p| p.into_inner());
            let pos = ev.iter().position(|e| {
                e.kind == event_type::PAGE_WRITTEN
                    && (first..first + pages).contains(&(e.v0 as u32))
            })?;
            let e = ev.remove(pos);
            Some(Notification {
                page: e.v0 as u32,
                source: NodeId(e.a as u8),
            })
        })
    }
}
