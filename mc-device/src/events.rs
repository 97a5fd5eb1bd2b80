//! The event queue: events the hub raises, queued per adapter and written
//! into the buffers its driver posted (docs/device.md section 17).

use firmware_model::abi::{self, EventRecord, EVENT_SIZE};
use firmware_model::Event;
use log::info;
use vm_memory::{Bytes, GuestAddress};

use crate::chain::split_chain;
use crate::state::DeviceState;

impl DeviceState {
    /// Queue each event for the adapter it concerns and hand out what fits in
    /// the posted event buffers.
    pub(crate) fn dispatch(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut touched = vec![false; self.nodes.len()];
        for e in &events {
            match (e.node(), EventRecord::from_event(e)) {
                (Some(n), Some(rec)) => {
                    if let Some(node) = self.nodes.get_mut(n.index()) {
                        if node.mem.is_some() {
                            node.queue_event(rec);
                            touched[n.index()] = true;
                        }
                    }
                }
                _ => {
                    if let Event::FaultApplied { command, at } = e {
                        info!("fault applied at {:.3} ms: {command}", at.0 as f64 / 1e6);
                    }
                }
            }
        }
        for (i, t) in touched.into_iter().enumerate() {
            if t {
                self.flush_events(i);
            }
        }
    }

    /// Fill posted event buffers with pending events (only once the driver
    /// configured the event queue, and not while it is broken: ring_access.rs).
    pub(crate) fn flush_events(&mut self, i: usize) {
        // Buffers that arrive while the device asks for more are used at
        // once, a bounded number of times (a guest posting unusable buffers
        // as fast as they are returned must not hold the hub).
        for _ in 0..4 {
            if !self.fill_event_buffers(i) {
                return;
            }
        }
    }

    /// One round of `flush_events`; true if buffers came while asking for
    /// more and events still wait.
    fn fill_event_buffers(&mut self, i: usize) -> bool {
        let node = &self.nodes[i];
        let want = node.pending_events.len() + usize::from(node.overflow_unreported > 0);
        if want == 0 {
            return false;
        }
        let Some(q) = self.served_queue(i, abi::EVENT_QUEUE) else {
            return false;
        };
        let (chains, defect) = q.chains(want);
        let node = &mut self.nodes[i];
        let mut bad = 0;
        for chain in chains {
            let c = split_chain(chain, &q.mem, u64::MAX);
            let target = c
                .writable
                .filter(|w| c.defect.is_none() && w.1 as usize >= EVENT_SIZE);
            let Some((gpa, _)) = target else {
                q.add_used(c.head, 0);
                bad += 1;
                continue;
            };
            let rec = if node.overflow_unreported > 0 {
                let r = EventRecord::overflow(node.overflow_unreported);
                node.overflow_unreported = 0;
                r
            } else {
                match node.pending_events.pop_front() {
                    Some(r) => r,
                    None => break,
                }
            };
            let written = q
                .mem
                .write_slice(&rec.to_bytes(), GuestAddress(gpa))
                .is_ok();
            q.add_used(c.head, if written { EVENT_SIZE as u32 } else { 0 });
        }
        let waiting = !node.pending_events.is_empty() || node.overflow_unreported > 0;
        q.signal();
        if bad > 0 {
            self.guest_error(i, format_args!("{bad} event buffer(s) unusable (need one writable buffer of {EVENT_SIZE} bytes)"));
        }
        if let Some(d) = defect {
            self.break_queue(i, abi::EVENT_QUEUE, d);
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
