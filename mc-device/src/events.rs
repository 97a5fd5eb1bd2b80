//! The event queue: events the hub raises, queued per adapter and written
//! into the buffers its driver posted (docs/device.md section 17).

use firmware_model::abi::{self, EventRecord, EVENT_SIZE};
use firmware_model::Event;
use log::info;
use vhost_user_backend::VringT;
use virtio_queue::QueueOwnedT;
use vm_memory::{Bytes, GuestAddress, GuestAddressSpace};

use crate::chain::{signal, split_chain};
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

    /// Fill posted event buffers with pending events.
    pub(crate) fn flush_events(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let want = node.pending_events.len() + usize::from(node.overflow_unreported > 0);
        if want == 0 {
            return;
        }
        let (Some(vrings), Some(atomic)) = (node.vrings.as_ref(), node.mem.as_ref()) else {
            return;
        };
        let Some(vring) = vrings.get(abi::EVENT_QUEUE as usize).cloned() else {
            return;
        };
        let mem = atomic.memory();
        let chains: Vec<_> = match vring.get_mut().get_queue_mut().iter(mem.clone()) {
            Ok(it) => it.take(want).collect(),
            Err(_) => return,
        };
        let mut bad = 0;
        for chain in chains {
            let c = split_chain(chain, &mem, u64::MAX);
            let target = c
                .writable
                .filter(|w| c.defect.is_none() && w.1 as usize >= EVENT_SIZE);
            let Some((gpa, _)) = target else {
                let _ = vring.add_used(c.head, 0);
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
            let written = mem.write_slice(&rec.to_bytes(), GuestAddress(gpa)).is_ok();
            let _ = vring.add_used(c.head, if written { EVENT_SIZE as u32 } else { 0 });
        }
        // Ask for a kick when the driver posts more buffers.
        let _ = vring.enable_notification();
        signal(&vring, i, "event");
        if bad > 0 {
            self.guest_error(i, format_args!("{bad} event buffer(s) unusable (need one writable buffer of {EVENT_SIZE} bytes)"));
        }
    }
}
