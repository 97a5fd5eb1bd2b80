//! The event queue: events the hub raises for this adapter, kept until its
//! driver posts event buffers and then written into them (docs/device.md
//! section 17).

use std::collections::VecDeque;

use firmware_model::abi::{self, EventRecord, EVENT_SIZE};
use firmware_model::saturating_u32;
use vm_memory::{Bytes, GuestAddress};

use super::{NodeState, RingDefect};
use crate::chain::split_chain;

/// Events kept for a driver that has posted no event buffers; beyond this they
/// are counted as lost and reported with one overflow event.
pub(crate) const MAX_PENDING_EVENTS: usize = 4096;

/// Events waiting for an event buffer.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    pending: VecDeque<EventRecord>,
    /// Events lost so far (the status page's `events_lost`).
    lost: u64,
    /// Events lost that the driver has not yet been told about.
    overflow_unreported: u64,
}

impl EventQueue {
    pub(crate) fn push(&mut self, e: EventRecord) {
        if self.pending.len() >= MAX_PENDING_EVENTS {
            self.lost += 1;
            self.overflow_unreported += 1;
        } else {
            self.pending.push_back(e);
        }
    }

    /// Records waiting (the overflow report counts as one).
    fn waiting(&self) -> usize {
        self.pending.len() + usize::from(self.overflow_unreported > 0)
    }

    /// The next record to hand out: the overflow report first.
    fn next(&mut self) -> Option<EventRecord> {
        if self.overflow_unreported > 0 {
            let r = EventRecord::overflow(self.overflow_unreported);
            self.overflow_unreported = 0;
            return Some(r);
        }
        self.pending.pop_front()
    }

    /// Events lost to a full queue.
    pub(crate) fn lost(&self) -> u64 {
        self.lost
    }

    pub(crate) fn forget_guest(&mut self) {
        self.pending.clear();
        self.overflow_unreported = 0;
    }
}

/// What handing out events found wrong with the driver's buffers, for the
/// device state to report (a protection error each).
#[derive(Debug, Default)]
pub(crate) struct EventsFlushed {
    /// Buffers returned unused: not one writable buffer of an event's size.
    pub(crate) unusable: u32,
    /// The queue was found broken (first time only).
    pub(crate) defect: Option<RingDefect>,
    /// Signalling the driver failed.
    pub(crate) signal: Option<std::io::Error>,
}

impl NodeState {
    /// Fill posted event buffers with pending events (only once the driver
    /// configured the event queue, and not while it is broken: queues.rs).
    pub(crate) fn flush_events(&mut self) -> EventsFlushed {
        let mut out = EventsFlushed::default();
        // Buffers that arrive while the device asks for more are used at
        // once, a bounded number of times (a guest posting unusable buffers
        // as fast as they are returned must not hold the hub).
        for _ in 0..4 {
            if !self.fill_event_buffers(&mut out) {
                break;
            }
        }
        out
    }

    /// One round of `flush_events`; true if buffers came while asking for
    /// more and events still wait.
    fn fill_event_buffers(&mut self, out: &mut EventsFlushed) -> bool {
        let want = self.events.waiting();
        if want == 0 {
            return false;
        }
        let q = match self.guest.served_queue(abi::EVENT_QUEUE) {
            Ok(Some(q)) => q,
            Ok(None) => return false,
            Err(d) => {
                out.defect = Some(d);
                return false;
            }
        };
        let (chains, defect) = q.chains(want);
        for chain in chains {
            let c = split_chain(chain, &q.mem, u64::MAX);
            let target = c
                .writable
                .filter(|w| c.defect.is_none() && w.1 as usize >= EVENT_SIZE);
            let Some((gpa, _)) = target else {
                q.add_used(c.head, 0);
                out.unusable += 1;
                continue;
            };
            let Some(rec) = self.events.next() else {
                break;
            };
            let written = q
                .mem
                .write_slice(&rec.to_bytes(), GuestAddress(gpa))
                .is_ok();
            let len = if written { EVENT_SIZE as u64 } else { 0 };
            q.add_used(c.head, saturating_u32(len));
        }
        let waiting = self.events.waiting() > 0;
        if let Err(e) = q.signal() {
            out.signal = Some(e);
        }
        if let Some(d) = defect {
            out.defect = self.guest.break_queue(abi::EVENT_QUEUE, d);
            return false;
        }
        if !waiting {
            // Nothing waits for a buffer: the next event takes whatever the
            // driver has posted by then, so its reposts need no kick (each
            // would wake a backend thread that takes the device lock).
            q.disable_notification();
            return false;
        }
        // Short of buffers: a kick when the driver posts more; if some came
        // while asking, use them now.
        q.enable_notification()
    }
}
