//! When the device may touch a virtqueue's rings, and what it does when a
//! driver breaks one.
//!
//! A queue is served only once its driver has configured it: ready (vhost-user
//! marks a ring ready when it gets its kick eventfd), enabled
//! (VHOST_USER_SET_VRING_ENABLE) and given ring addresses (an available ring at
//! guest-physical 0 is the reset value, which virtio-queue also refuses). Until
//! then the device neither reads nor writes any of its ring memory: no
//! `avail_event`, no used flags, no iteration.
//!
//! A configured queue is checked each time before it is served: its three rings
//! must lie in guest RAM, its available index must not have moved backwards or
//! forward by more than the queue size, and each head taken from it must name a
//! descriptor of the queue. A driver that breaks one of these has broken the
//! queue. The device then does what QEMU does (hw/virtio/virtio.c:
//! `virtqueue_num_heads` and `virtqueue_get_head` call `virtio_error`, which
//! marks the device broken and sets NEEDS_RESET): it stops serving that queue,
//! logs it once (a protection error for that adapter), shows it in the register
//! file (`broken_queues`, docs/device.md section 13), and spends no more time on
//! it until the driver re-initialises the ring: VHOST_USER_GET_VRING_BASE, which
//! stops a ring (QEMU sends it whenever it stops or resets the device), or a
//! reconnect.
//!
//! Every ring access here goes through the node's checked memory snapshot
//! (`NodeState::mem`), never through the vhost-user daemon's own view of guest
//! memory, which a new memory table replaces before the backend has checked it.

use std::fmt;
use std::sync::atomic::Ordering;

use firmware_model::abi;
use vhost_user_backend::{VringRwLock, VringT};
use virtio_queue::{DescriptorChain, QueueOwnedT, QueueT};

use crate::memory::{range_ok, MemGuard};

/// How a driver broke a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RingDefect {
    /// One of the rings is not wholly inside guest RAM.
    OutsideRam { ring: &'static str, gpa: u64 },
    /// The available index moved backwards or by more than the queue size.
    AvailIndex { from: u16, to: u16, size: u16 },
    /// An available-ring entry names a descriptor outside the queue.
    Head { head: u16, size: u16 },
}

impl fmt::Display for RingDefect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RingDefect::OutsideRam { ring, gpa } => {
                write!(f, "its {ring} at {gpa:#x} is not inside guest RAM")
            }
            RingDefect::AvailIndex { from, to, size } => write!(
                f,
                "the driver moved the available index from {from} to {to} (queue of {size})"
            ),
            RingDefect::Head { head, size } => write!(
                f,
                "the driver made descriptor {head} available in a queue of {size}"
            ),
        }
    }
}

pub(crate) fn queue_name(q: u16) -> &'static str {
    match q {
        abi::TX_QUEUE => "transmit",
        abi::CTRL_QUEUE => "control",
        abi::EVENT_QUEUE => "event",
        _ => "unknown",
    }
}

/// Whether the driver has configured `vring` (ready, enabled, rings set). Reads
/// only the device-side queue state, never guest memory.
pub(super) fn configured(vring: &VringRwLock) -> bool {
    let s = vring.get_ref();
    let q = s.get_queue();
    q.ready() && s.is_enabled() && q.avail_ring() != 0
}

/// Check a configured queue's rings and available index against `mem`.
pub(super) fn check(vring: &VringRwLock, mem: &MemGuard) -> Result<(), RingDefect> {
    let s = vring.get_ref();
    let q = s.get_queue();
    let size = q.size();
    let n = usize::from(size);
    // virtio 1.x split ring sizes, event-index words included.
    for (ring, gpa, len) in [
        ("descriptor table", q.desc_table(), 16 * n),
        ("available ring", q.avail_ring(), 6 + 2 * n),
        ("used ring", q.used_ring(), 6 + 8 * n),
    ] {
        if !range_ok(mem, gpa, len) {
            return Err(RingDefect::OutsideRam { ring, gpa });
        }
    }
    let from = q.next_avail();
    // In RAM (checked above), so the load cannot fail.
    let to = q
        .avail_idx(&**mem, Ordering::Acquire)
        .map_err(|_| RingDefect::OutsideRam {
            ring: "available ring",
            gpa: q.avail_ring(),
        })?
        .0;
    if to.wrapping_sub(from) > size {
        return Err(RingDefect::AvailIndex { from, to, size });
    }
    Ok(())
}

/// A queue the device may serve now, with the memory to serve it through.
pub(crate) struct ServedQueue {
    vring: VringRwLock,
    pub(crate) mem: MemGuard,
    queue: u16,
}

impl ServedQueue {
    pub(super) fn new(vring: VringRwLock, mem: MemGuard, queue: u16) -> ServedQueue {
        ServedQueue { vring, mem, queue }
    }

    /// Up to `max` available chains, in order. Stops at a defect (an index
    /// the driver moved since the queue was checked, a head outside the queue)
    /// and returns it with the chains before it.
    pub(crate) fn chains(
        &self,
        max: usize,
    ) -> (Vec<DescriptorChain<MemGuard>>, Option<RingDefect>) {
        let mut s = self.vring.get_mut();
        let q = s.get_queue_mut();
        let size = q.size();
        let from = q.next_avail();
        let mut out = Vec::new();
        let it = match q.iter(self.mem.clone()) {
            Ok(it) => it,
            Err(_) => {
                // The only way left to fail (the queue is configured and its
                // rings are in RAM): the index moved too far since `check`.
                let to = q
                    .avail_idx(&*self.mem, Ordering::Acquire)
                    .map_or(from, |w| w.0);
                return (out, Some(RingDefect::AvailIndex { from, to, size }));
            }
        };
        for chain in it.take(max) {
            let head = chain.head_index();
            if head >= size {
                return (out, Some(RingDefect::Head { head, size }));
            }
            out.push(chain);
        }
        (out, None)
    }

    /// Return chain `head` to the driver with `len` bytes written.
    pub(crate) fn add_used(&self, head: u16, len: u32) {
        let mut s = self.vring.get_mut();
        let _ = s.get_queue_mut().add_used(&*self.mem, head, len);
    }

    /// Ask the driver for a kick at its next buffer (`avail_event`, or used
    /// flags without EVENT_IDX). True if buffers arrived meanwhile.
    pub(crate) fn enable_notification(&self) -> bool {
        let mut s = self.vring.get_mut();
        s.get_queue_mut()
            .enable_notification(&*self.mem)
            .unwrap_or(false)
    }

    /// Tell the driver not to kick for its next buffers (used flags without
    /// EVENT_IDX; with it, an `avail_event` left behind does that).
    pub(crate) fn disable_notification(&self) {
        let mut s = self.vring.get_mut();
        let _ = s.get_queue_mut().disable_notification(&*self.mem);
    }

    /// Interrupt the driver if it asked for it (EVENT_IDX `used_event`). A
    /// saturated call eventfd is no error: the driver has an interrupt
    /// pending.
    pub(crate) fn signal(&self) -> std::io::Result<()> {
        let needed = {
            let mut s = self.vring.get_mut();
            // The used_event word is in RAM (checked), so this cannot fail.
            s.get_queue_mut()
                .needs_notification(&*self.mem)
                .unwrap_or(false)
        };
        if !needed {
            return Ok(());
        }
        match self.vring.signal_used_queue() {
            Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => Err(std::io::Error::new(
                e.kind(),
                format!("cannot signal the {} queue: {e}", queue_name(self.queue)),
            )),
            _ => Ok(()),
        }
    }
}
