//! What every transport is ([`Transport`]): the register file, DMA
//! memory, queue setup and notifications, with the feature bits both
//! transports require.

use std::sync::Arc;
use std::time::Duration;

use firmware_model::abi::Registers;
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;

use super::error::TransportError;
use crate::dma::DmaRegion;
use crate::virtqueue::RingLayout;

/// VIRTIO_F_VERSION_1 as a feature mask: both transports require it.
pub const F_VERSION_1: u64 = 1 << VIRTIO_F_VERSION_1;
/// VIRTIO_RING_F_EVENT_IDX as a feature mask: acked whenever offered.
pub const F_EVENT_IDX: u64 = 1 << VIRTIO_RING_F_EVENT_IDX;

/// The link between the driver and one adapter.
///
/// Bring-up order: [`Transport::setup_queue`] for every queue, then
/// [`Transport::start`]; afterwards only [`Transport::notify`] and
/// [`Transport::registers`] are used.
pub trait Transport: Send {
    /// Read the register file (virtio config space). For vhost-user this is a
    /// socket round trip: nothing hot should be read here.
    fn registers(&mut self) -> Result<Registers, TransportError>;

    /// All memory the device can reach by DMA; the driver allocates rings,
    /// buffers, frames and the status page in it.
    fn dma(&self) -> &DmaRegion;

    /// Whether all of [`Transport::dma`] reads zero until the driver writes
    /// it (memory created for this transport, which the device writes only
    /// where the driver points it): then the allocator hands out memory
    /// without zeroing it, and pages nobody touches cost nothing (a large
    /// receive region, such as Cashmere's home region, mostly unused).
    fn dma_zeroed(&self) -> bool {
        false
    }

    /// Whether VIRTIO_RING_F_EVENT_IDX was negotiated.
    fn event_idx(&self) -> bool;

    /// Largest size queue `queue` may be given.
    fn max_queue_size(&self, queue: u16) -> u16;

    /// Tell the device where queue `queue`'s rings are and how big it is.
    fn setup_queue(
        &mut self,
        queue: u16,
        size: u16,
        rings: &RingLayout,
    ) -> Result<(), TransportError>;

    /// Start the device once every queue is set up.
    fn start(&mut self) -> Result<(), TransportError>;

    /// Notify the device that queue `queue` has new buffers (a kick).
    fn notify(&self, queue: u16) -> Result<(), TransportError>;
    /// A handle that notifies `queue` from any thread (the transmit FIFO's
    /// doorbell, rung by whichever thread posted last).
    fn doorbell(&self, queue: u16) -> Result<Arc<dyn Doorbell>, TransportError>;

    /// A handle a thread can block on until the device signals `queue` (the
    /// vhost-user call eventfd), or `None` where the transport delivers no
    /// signal the driver can sleep on (the PCI user-space driver takes no
    /// interrupts: it must poll).
    fn call_signal(&self, _queue: u16) -> Result<Option<Arc<dyn CallSignal>>, TransportError> {
        Ok(None)
    }
}

/// The device's signal for one queue (a vhost-user call eventfd), as a thread
/// waits for it. One thread should wait on a signal at a time: [`CallSignal::wait`]
/// consumes the signal it returns on.
pub trait CallSignal: Send + Sync + std::fmt::Debug {
    /// Block until the device signals (or [`CallSignal::raise`] is called),
    /// at most `timeout`; consume the signal. `Ok(true)` if it came.
    fn wait(&self, timeout: Duration) -> Result<bool, TransportError>;
    /// Signal it from this side: wakes a thread blocked in [`CallSignal::wait`].
    fn raise(&self) -> Result<(), TransportError>;
}

/// Notifies one queue; shareable between threads.
pub trait Doorbell: Send + Sync + std::fmt::Debug {
    fn ring(&self) -> Result<(), TransportError>;
}

/// Check a queue set-up request: a queue the adapter has, a size from 1 to
/// `max`. Returns the queue's index.
pub(crate) fn check_queue(queue: u16, size: u16, max: u16) -> Result<usize, TransportError> {
    let q = usize::from(queue);
    if q >= firmware_model::abi::NUM_QUEUES {
        return Err(TransportError::NoSuchQueue(queue));
    }
    if size > max || size == 0 {
        return Err(TransportError::QueueTooLarge { size, max });
    }
    Ok(q)
}

impl<T: Transport + ?Sized> Transport for Box<T> {
    fn registers(&mut self) -> Result<Registers, TransportError> {
        (**self).registers()
    }
    fn dma(&self) -> &DmaRegion {
        (**self).dma()
    }
    fn dma_zeroed(&self) -> bool {
        (**self).dma_zeroed()
    }
    fn event_idx(&self) -> bool {
        (**self).event_idx()
    }
    fn max_queue_size(&self, queue: u16) -> u16 {
        (**self).max_queue_size(queue)
    }
    fn setup_queue(
        &mut self,
        queue: u16,
        size: u16,
        rings: &RingLayout,
    ) -> Result<(), TransportError> {
        (**self).setup_queue(queue, size, rings)
    }
    fn start(&mut self) -> Result<(), TransportError> {
        (**self).start()
    }
    fn notify(&self, queue: u16) -> Result<(), TransportError> {
        (**self).notify(queue)
    }
    fn doorbell(&self, queue: u16) -> Result<Arc<dyn Doorbell>, TransportError> {
        (**self).doorbell(queue)
    }
    fn call_signal(&self, queue: u16) -> Result<Option<Arc<dyn CallSignal>>, TransportError> {
        (**self).call_signal(queue)
    }
}
