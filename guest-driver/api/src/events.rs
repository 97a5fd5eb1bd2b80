//! Events from the device (page-written notifications, membership changes),
//! kept until someone asks for them: the notification channel of seed 004's
//! interrupt-on-receive regions.

use std::sync::Arc;
use std::time::Duration;

use firmware_model::abi::{event_type, EventRecord};
use firmware_model::NodeId;
use mc_driver::transport::CallSignal;

use crate::error::{McError, WaitFor};
use crate::node::{wait_for, Node};
use crate::port::McPort;

/// A page written event on an interrupt-on-receive region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notification {
    pub page: u32,
    pub source: NodeId,
}

impl Notification {
    /// The notification `e` carries if it is a page-written event into
    /// `first..first + pages`. A page or node number that does not fit its
    /// type is not one the device sends, so it matches no region.
    fn of(e: &EventRecord, (first, pages): (u32, u32)) -> Option<Notification> {
        if e.kind != event_type::PAGE_WRITTEN {
            return None;
        }
        let page = u32::try_from(e.v0).ok()?;
        let source = NodeId(u8::try_from(e.a).ok()?);
        (first..first + pages)
            .contains(&page)
            .then_some(Notification { page, source })
    }
}

impl Node {
    /// Events from the device, kept until someone asks for them.
    pub(crate) fn pump_events(&self) {
        let new = self.port().poll_events();
        if !new.is_empty() {
            self.events
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(new);
        }
    }

    /// What a thread blocks on until the adapter delivers an event (a store
    /// into a region attached with `notify`, a membership change): the
    /// interrupt of seed 004's interrupt-on-receive regions. `None` where the
    /// driver has no such signal (PCI in a QEMU guest: no interrupts reach a
    /// user-space driver), and the caller must poll.
    pub(crate) fn event_signal(&self) -> Result<Option<EventSignal>, McError> {
        Ok(self
            .port()
            .event_signal()?
            .map(|s| EventSignal { signal: s }))
    }

    /// Take the page-written notifications of `rx` that have arrived, without
    /// waiting. This also re-arms the adapter's signal.
    pub(crate) fn take_notifications(&self, (first, pages): (u32, u32)) -> Vec<Notification> {
        self.pump_events();
        let mut ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let mut taken = Vec::new();
        ev.retain(|e| match Notification::of(e, (first, pages)) {
            Some(n) => {
                taken.push(n);
                false
            }
            None => true,
        });
        taken
    }

    /// Wait for a store into `rx` (attached with `notify`).
    pub(crate) fn wait_notification(
        &self,
        (first, pages): (u32, u32),
        timeout: Duration,
    ) -> Result<Notification, McError> {
        let l = self.layout;
        let range = (
            l.page_addr(first),
            u64::from(pages) * u64::from(l.page_size),
        );
        wait_for(
            self,
            WaitFor::Notification,
            timeout,
            || {
                self.pump_events();
                let mut ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
                let (pos, n) = ev
                    .iter()
                    .enumerate()
                    .find_map(|(i, e)| Some((i, Notification::of(e, (first, pages))?)))?;
                ev.remove(pos);
                Some(n)
            },
            || self.arrival(range.0, range.1),
        )
    }
}

/// The adapter's event signal ([`MemoryChannel::event_signal`]). One thread
/// waits on it at a time; after it returns, take the events
/// ([`MemoryChannel::take_notifications`]) before waiting again, or the
/// adapter does not signal the next one.
#[derive(Clone, Debug)]
pub struct EventSignal {
    signal: Arc<dyn CallSignal>,
}

impl EventSignal {
    /// Block until the adapter signals an event or [`EventSignal::raise`] is
    /// called, at most `timeout`. `Ok(true)` if a signal came.
    pub fn wait(&self, timeout: Duration) -> Result<bool, McError> {
        Ok(self.signal.wait(timeout).map_err(mc_driver::Error::from)?)
    }

    /// Wake the thread blocked in [`EventSignal::wait`] (to stop it, say).
    pub fn raise(&self) -> Result<(), McError> {
        Ok(self.signal.raise().map_err(mc_driver::Error::from)?)
    }
}
