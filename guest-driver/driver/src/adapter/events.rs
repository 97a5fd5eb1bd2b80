//! The event queue: kept stocked with `EVENT_SIZE`-byte buffers the device
//! fills with event records (docs/device.md section 14); each buffer is
//! posted again as soon as its event is read.

use std::sync::Arc;

use firmware_model::abi::{self, EventRecord, EVENT_SIZE};
use log::warn;

use super::Adapter;
use crate::error::{Error, Result};
use crate::transport::{CallSignal, Transport};
use crate::virtqueue::Buffer;

impl<T: Transport> Adapter<T> {
    /// Ask the device to signal the event queue when it delivers an event
    /// (the interrupt of an interrupt-on-receive page, seed 004), and return
    /// what a thread blocks on for it; `None` where the transport has no
    /// signal (PCI: poll [`Adapter::poll_events`] instead). The device signals
    /// once per batch of events: after a signal, call `poll_events` (which
    /// re-arms it) before waiting again.
    pub fn event_signal(&mut self) -> Result<Option<Arc<dyn CallSignal>>> {
        let Some(signal) = self.transport.call_signal(abi::EVENT_QUEUE)? else {
            return Ok(None);
        };
        self.events.set_calls(true)?;
        Ok(Some(signal))
    }

    /// Events the device has delivered since the last call (buffers are
    /// posted again at once).
    pub fn poll_events(&mut self) -> Result<Vec<EventRecord>> {
        let mut out = Vec::new();
        let mut reposted = 0;
        while let Some(u) = self.events.poll_used()? {
            let Some(buf) = self
                .event_bufs
                .get_mut(usize::from(u.token.index()))
                .and_then(Option::take)
            else {
                return Err(Error::StrayCompletion {
                    queue: "event",
                    chain: u.token.index(),
                });
            };
            if u.len as usize >= EVENT_SIZE {
                let mut b = [0u8; EVENT_SIZE];
                buf.read(0, &mut b)?;
                if let Some(e) = EventRecord::from_bytes(&b) {
                    out.push(e);
                }
            } else {
                warn!("event buffer returned with {} bytes", u.len);
            }
            let t = self.events.add(&[], &[Buffer::of(&buf)?])?;
            self.event_bufs[usize::from(t.index())] = Some(buf);
            reposted += 1;
        }
        // The device asks for a kick (avail_event) only while it holds
        // events it has no buffer for; otherwise it takes the buffers at
        // its next event, and a kick would only wake a backend thread.
        if reposted > 0 && self.events.kick_prepare()? {
            self.transport.notify(abi::EVENT_QUEUE)?;
        }
        Ok(out)
    }
}
