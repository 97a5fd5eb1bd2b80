//! A guest's errors and the events that tell its driver: a protection error
//! counted by the model and raised as an event, events routed to the nodes
//! they concern and handed out into the posted event buffers, and what went
//! wrong on a node's behalf logged within its allowance (guest_log.rs).

use std::fmt;
use std::time::Instant;

use firmware_model::abi::EventRecord;
use firmware_model::{Event, NodeId};
use log::Level;

use super::{log_fault_applied, DeviceState};
use crate::delivery::{DmaFailure, EventCollector};
use crate::node::{queue_name, EventsFlushed, RingDefect};

impl DeviceState {
    /// A guest did something wrong: log it (rate-limited), count a protection
    /// error for its adapter and raise an error event.
    pub(crate) fn guest_error(&mut self, id: NodeId, what: fmt::Arguments<'_>) {
        self.protection_error(id, what);
        self.flush_events(id);
    }

    /// The first half of [`Self::guest_error`]: logged and counted, its event
    /// queued for the node but not yet handed out.
    fn protection_error(&mut self, id: NodeId, what: fmt::Arguments<'_>) {
        let Some(node) = self.nodes.get_mut(id.index()) else {
            return;
        };
        node.log(Level::Warn, what);
        let mut sink = EventCollector::default();
        let now = self.now();
        let _ = self.hub.report_protection_error(now, id, &mut sink);
        for e in &sink.events {
            self.queue_event(e);
        }
    }

    /// Queue each event for the adapter it concerns and hand out what fits in
    /// the posted event buffers.
    pub(crate) fn dispatch(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut touched = 0u64;
        for e in &events {
            if let Some(n) = self.queue_event(e) {
                touched |= 1 << n.0;
            }
        }
        for id in self.node_ids() {
            if touched & (1 << id.0) != 0 {
                self.flush_events(id);
            }
        }
    }

    /// Queue `e` for its node (if a guest is there to read it); returns that node.
    fn queue_event(&mut self, e: &Event) -> Option<NodeId> {
        match (e.node(), EventRecord::from_event(e)) {
            (Some(n), Some(rec)) => {
                let node = self.nodes.get_mut(n.index())?;
                node.push_event(rec).then_some(n)
            }
            _ => {
                if let Event::FaultApplied { command, at } = e {
                    log_fault_applied(command, *at);
                }
                None
            }
        }
    }

    /// Hand out `id`'s pending events, and report what was wrong with its
    /// buffers: those reports' own events are handed out in one more round,
    /// whose complaints are counted but not flushed again (so a driver that
    /// keeps posting unusable buffers cannot keep this going).
    pub(crate) fn flush_events(&mut self, id: NodeId) {
        for round in 0..2 {
            let Some(node) = self.nodes.get_mut(id.index()) else {
                return;
            };
            let flushed = node.flush_events();
            if !self.report_events_flushed(id, flushed) || round == 1 {
                return;
            }
        }
    }

    /// Count and log what a flush found wrong; true if anything was.
    fn report_events_flushed(&mut self, id: NodeId, f: EventsFlushed) -> bool {
        let mut any = false;
        if let Some(e) = f.signal {
            self.nodes[id.index()].log(Level::Warn, format_args!("{e}"));
        }
        if f.unusable > 0 {
            let bad = f.unusable;
            self.protection_error(
                id,
                format_args!(
                    "{bad} event buffer(s) unusable (need one writable buffer of {} bytes)",
                    firmware_model::abi::EVENT_SIZE
                ),
            );
            any = true;
        }
        if let Some(d) = f.defect {
            self.protection_error(
                id,
                format_args!("{}", BrokenQueue(firmware_model::abi::EVENT_QUEUE, d)),
            );
            any = true;
        }
        any
    }

    /// The driver broke `id`'s queue `q` (reported once: the node knows).
    pub(crate) fn queue_broken(&mut self, id: NodeId, q: u16, defect: RingDefect) {
        self.guest_error(id, format_args!("{}", BrokenQueue(q, defect)));
    }

    /// DMA into a receiver's frames failed: its memory changed under a bound
    /// frame. Logged within that node's allowance.
    pub(crate) fn report_dma_failures(&mut self, failures: &[DmaFailure]) {
        for f in failures {
            if let Some(node) = self.nodes.get_mut(f.node.index()) {
                node.log(
                    Level::Warn,
                    format_args!(
                        "DMA of {} bytes to page {} failed (guest memory changed?)",
                        f.len, f.page
                    ),
                );
            }
        }
    }

    /// Report guest-caused lines left out in an interval that has ended (a
    /// flood that stopped). Cheap enough for every pass of the hub.
    pub(super) fn report_suppressed_lines(&mut self) {
        if !self.nodes.iter().any(|n| n.guest_log().has_suppressed()) {
            return;
        }
        let now = Instant::now();
        for n in &mut self.nodes {
            n.report_ended_log_interval(now);
        }
    }
}

/// The line that says a driver broke a queue.
struct BrokenQueue(u16, RingDefect);

impl fmt::Display for BrokenQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} queue broken, no longer served until the driver resets it: {}",
            queue_name(self.0),
            self.1
        )
    }
}
