//! One adapter as a vhost-user device: what QEMU (or a virtual guest) talks to.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::sync::Arc;

use firmware_model::abi::{self, CONFIG_SIZE};
use firmware_model::NodeId;
use log::{warn, Level};
use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
use vhost_user_backend::VhostUserBackend;
use virtio_bindings::bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::bindings::virtio_ring::{
    VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC,
};
use vm_memory::{GuestAddressSpace, GuestMemoryAtomic};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{EventConsumer, EventNotifier};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::device::Device;
use crate::guarded_vring::GuardedVring;
use crate::mem_table::check_mem_table;
use crate::memory::Mem;
use crate::node::Node;
use crate::store_order::wait_for_committed_stores;

/// `size` bytes of the register file from `offset`, zero past its end: QEMU
/// rejects a reply of any other length.
pub(crate) fn config_slice(regs: &[u8; CONFIG_SIZE], offset: u32, size: u32) -> Vec<u8> {
    let mut out = vec![0u8; size as usize];
    let start = (offset as usize).min(CONFIG_SIZE);
    let end = (offset as usize)
        .saturating_add(size as usize)
        .min(CONFIG_SIZE);
    if start < end {
        out[..end - start].copy_from_slice(&regs[start..end]);
    }
    out
}

/// The vhost-user backend of node `node`.
pub(crate) struct NodeBackend {
    pub(crate) node: NodeId,
    pub(crate) shared: Arc<Device>,
    /// The event that stops a connection's vring worker thread: one for the
    /// node's lifetime, owned here (see `exit_event`).
    exit: EventFd,
}

impl NodeBackend {
    pub(crate) fn new(node: NodeId, shared: Arc<Device>) -> io::Result<NodeBackend> {
        Ok(NodeBackend {
            node,
            shared,
            exit: EventFd::new(EFD_NONBLOCK)?,
        })
    }

    /// Clear the exit event before the next connection's daemon starts: the
    /// last one's worker left it signalled (the worker exits on it without
    /// reading it), and a signalled event would stop the new worker at once.
    pub(crate) fn rearm_exit_event(&self) {
        // Non-blocking: one read takes the whole count, or finds none.
        let _ = self.exit.read();
    }
}

impl VhostUserBackend for NodeBackend {
    type Bitmap = ();
    type Vring = GuardedVring;

    fn num_queues(&self) -> usize {
        abi::NUM_QUEUES
    }

    fn max_queue_size(&self) -> usize {
        usize::from(abi::MAX_QUEUE_SIZE)
    }

    fn features(&self) -> u64 {
        (1 << VIRTIO_F_VERSION_1)
            | (1 << VIRTIO_RING_F_EVENT_IDX)
            | (1 << VIRTIO_RING_F_INDIRECT_DESC)
            // Without this bit vhost-user refuses SET_VRING_ENABLE.
            | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits()
    }

    fn acked_features(&self, features: u64) {
        self.shared
            .lock()
            .node_mut(self.node)
            .log(Level::Debug, format_args!("features acked {features:#x}"));
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::CONFIG
            | VhostUserProtocolFeatures::REPLY_ACK
    }

    fn set_event_idx(&self, enabled: bool) {
        self.shared.lock().node_mut(self.node).log(
            Level::Debug,
            format_args!("EVENT_IDX {}", if enabled { "on" } else { "off" }),
        );
    }

    /// The register file. Exactly `size` bytes, zero past its end.
    fn get_config(&self, offset: u32, size: u32) -> Vec<u8> {
        let regs = self.shared.lock().registers(self.node).to_bytes();
        config_slice(&regs, offset, size)
    }

    /// Every register is read-only. The write is refused and counted as a
    /// protection error; the connection stays up (an `Err` here would close it).
    fn set_config(&self, offset: u32, buf: &[u8]) -> io::Result<()> {
        let mut st = self.shared.lock();
        st.refuse_config_write(self.node, offset, buf.len());
        Ok(())
    }

    /// A new memory table: checked (mem_table.rs) before anything touches it.
    /// A table that could raise SIGBUS is refused: the node is left with no
    /// guest memory, and the error ends this guest's connection; the other
    /// nodes go on.
    fn update_memory(&self, mem: GuestMemoryAtomic<Mem>) -> io::Result<()> {
        let table = mem.memory().into_inner();
        let checked = check_mem_table(&table);
        let mut st = self.shared.lock();
        match checked {
            Ok(()) => {
                st.memory_table_changed(self.node, GuestMemoryAtomic::from(table));
                Ok(())
            }
            Err(e) => {
                // The daemon installed the table in its own view already: take
                // it back, so that not even the daemon touches it.
                if let Ok(g) = mem.lock() {
                    g.replace(Mem::new());
                }
                let node = st.node_mut(self.node);
                node.guest_mut().refuse_memory();
                node.log(
                    Level::Error,
                    format_args!(
                        "guest memory refused, disconnecting this guest: {}",
                        firmware_model::ErrorChain(&e)
                    ),
                );
                Err(io::Error::new(io::ErrorKind::InvalidInput, e))
            }
        }
    }

    /// The node's one exit event, handed to each connection's daemon in turn
    /// (creating a pair per connection leaked one descriptor per connection).
    fn exit_event(&self, _thread_index: usize) -> Option<(EventConsumer, EventNotifier)> {
        // The notifier is the daemon's own duplicate, closed when it drops.
        let notifier = match self.exit.try_clone() {
            Ok(n) => n,
            Err(e) => {
                warn!("{}: cannot duplicate the exit event: {e}", Node(self.node));
                return None;
            }
        };
        // SAFETY: vhost-user-backend 0.24 (`VringEpollHandler::new`) turns the
        // consumer back into a raw descriptor with `into_raw_fd` and only
        // registers it with its epoll instance: it never closes it, so
        // `self.exit` stays its one owner and closes it once, when the node's
        // backend is dropped.
        let consumer = unsafe { EventConsumer::from_raw_fd(self.exit.as_raw_fd()) };
        // SAFETY: `notifier` is a fresh duplicate owned by nothing else.
        let notifier = unsafe { EventNotifier::from_raw_fd(notifier.into_raw_fd()) };
        Some((consumer, notifier))
    }

    /// VHOST_USER_GET_VRING_BASE stopped ring `queue_index`: the driver is
    /// re-initialising it, so a queue it broke is served again once restarted.
    fn stop_vring(&self, queue_index: u32) -> io::Result<()> {
        self.shared
            .lock()
            .node_mut(self.node)
            .guest_mut()
            .ring_stopped(queue_index);
        Ok(())
    }

    fn reset_device(&self) {
        self.shared
            .lock()
            .node_mut(self.node)
            .guest_mut()
            .reset_queues();
    }

    /// Kicks. Control and event queues are served here. A kick on the
    /// transmit queue (the FIFO's doorbell) also reaches the hub thread
    /// directly, which watches its eventfd while it sleeps; waking it here as
    /// well covers a kick that came before it started watching. Never returns
    /// an error: that would stop this worker thread for good.
    fn handle_event(
        &self,
        device_event: u16,
        evset: EventSet,
        vrings: &[GuardedVring],
        _thread: usize,
    ) -> io::Result<()> {
        if evset != EventSet::IN {
            return Ok(());
        }
        {
            let mut st = self.shared.lock();
            st.node_mut(self.node)
                .guest_mut()
                .capture_vrings(|| vrings.iter().map(|v| v.0.clone()).collect());
            if device_event == abi::EVENT_QUEUE {
                st.flush_events(self.node);
            }
        }
        if device_event == abi::CTRL_QUEUE {
            // A batch at a time, letting the lock go in between; each batch
            // ordered after this node's earlier stores, waited for without
            // the device lock (transmit/progress.rs).
            loop {
                wait_for_committed_stores(&self.shared, self.node);
                if !self.shared.lock().process_ctrl(self.node) {
                    break;
                }
                std::thread::yield_now();
            }
        }
        if device_event == abi::CTRL_QUEUE || device_event == abi::TX_QUEUE {
            // A kick, a FIFO registered or the PCT changed: the hub looks
            // again (it may be asleep without watching this node's kick yet).
            self.shared.wake_hub();
        }
        Ok(())
    }
}
