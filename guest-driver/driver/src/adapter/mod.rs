//! The adapter driver, over any [`Transport`].
//!
//! It owns the three queues (docs/device.md section 14), the transmit FIFO and
//! the DMA memory:
//! - transmit: the FIFO's doorbell; stores go through the FIFO
//!   ([`crate::fifo::TxFifo`], posted: any thread, no lock);
//! - control: one request at a time, answered in a 16-byte response;
//! - event: kept stocked with `EVENT_SIZE`-byte buffers.
//!
//! Nothing here sleeps on the device: answers are polled (the common
//! backoff, up to a timeout). The control and event queues, which the device
//! serves on kicks and which are off the fast path, are kicked on every post;
//! the transmit queue only when the hub asks (the FIFO's doorbell).
//!
//! One job per file: this one holds the adapter's bring-up; `control.rs` the
//! control queue and the PCT, `receive.rs` receive memory
//! ([`ReceiveFrames`]), `status.rs` the status page ([`StatusView`]),
//! `events.rs` the event queue.

mod arrival;
mod control;
mod events;
mod receive;
mod status;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use firmware_model::abi::{
    self, fifo, CtrlRequest, Registers, CTRL_HEADER_SIZE, CTRL_RESPONSE_SIZE, EVENT_SIZE,
    FRAME_SIZE, MAX_PCT_PAGES_PER_REQUEST,
};
use log::debug;

use crate::backoff::{poll_until_with, BackoffPolicy};
use crate::dma::{DmaAllocator, DmaRegion};
use crate::error::{Error, Result};
use crate::fifo::TxFifo;
use crate::transport::Transport;
use crate::virtqueue::{Buffer, RingLayout, Token, Virtqueue};

pub use arrival::{ArrivalTable, DEFAULT_GRANULE_SHIFT};
pub use receive::ReceiveFrames;
pub use status::StatusView;

/// How the driver sets the adapter up.
#[derive(Clone, Debug)]
pub struct AdapterOptions {
    /// Entries per queue (a power of two, at most the transport's limit).
    pub queue_size: u16,
    /// Slots of the transmit FIFO (32 bytes each; a power of two from 4096,
    /// so the largest record, 64 KiB, fits in half of it).
    pub fifo_slots: u32,
    /// Event buffers kept posted (at most the queue size).
    pub event_buffers: u16,
    /// How long to wait for the device before giving up.
    pub timeout: Duration,
    /// Polls of a used ring before the waiting thread starts yielding.
    pub spin: u32,
}

impl Default for AdapterOptions {
    fn default() -> Self {
        AdapterOptions {
            queue_size: 256,
            fifo_slots: 1 << 15,
            event_buffers: 64,
            timeout: Duration::from_secs(5),
            spin: 20_000,
        }
    }
}

/// The Memory Channel adapter driver.
pub struct Adapter<T: Transport> {
    transport: T,
    alloc: DmaAllocator,
    regs: Registers,
    opts: AdapterOptions,
    ctrl: Virtqueue,
    ctrl_req: DmaRegion,
    ctrl_resp: DmaRegion,
    /// A request that timed out and may still complete.
    ctrl_pending: Option<Token>,
    fifo: Arc<TxFifo>,
    events: Virtqueue,
    /// By token index: the buffer of a posted event chain.
    event_bufs: Vec<Option<DmaRegion>>,
    status_page: Option<DmaRegion>,
    /// Where the device writes stamped packets' virtual arrivals (virtual
    /// time on: arrival.rs).
    arrivals: Option<ArrivalTable>,
}

impl<T: Transport> std::fmt::Debug for Adapter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter")
            .field("node", &self.regs.node_id)
            .field("nodes", &self.regs.nodes)
            .field("fifo", &self.fifo)
            .finish()
    }
}

/// The smallest FIFO: the largest record (64 KiB, 2049 slots) fits in half.
pub const MIN_FIFO_SLOTS: u32 = 4096;

/// Poll `f` until it yields a value: `spin` busy polls, then the common
/// backoff, until `timeout`.
fn wait<R>(
    spin: u32,
    timeout: Duration,
    what: &'static str,
    f: impl FnMut() -> Result<Option<R>>,
) -> Result<R> {
    let policy = BackoffPolicy {
        spins: spin,
        ..BackoffPolicy::DEFAULT
    };
    poll_until_with(policy, timeout, f)?.ok_or(Error::Timeout {
        what,
        after: timeout,
    })
}

impl<T: Transport> Adapter<T> {
    /// Set up the queues, the control and transmit buffers and the event
    /// buffers, and start the device.
    pub fn new(mut transport: T, opts: AdapterOptions) -> Result<Adapter<T>> {
        let regs = transport.registers()?;
        if regs.page_size == 0 || regs.page_size % FRAME_SIZE != 0 {
            return Err(Error::BadPageSize(regs.page_size));
        }
        crate::vclock::learn_network(firmware_model::vtime::VirtualLink::from_register(
            regs.link_timing,
        ));
        let mut alloc = if transport.dma_zeroed() {
            DmaAllocator::new_zeroed(transport.dma().clone())
        } else {
            DmaAllocator::new(transport.dma().clone())
        };
        let event_idx = transport.event_idx();
        let mut make = |q: u16, transport: &mut T| -> Result<Virtqueue> {
            let size = opts.queue_size.min(transport.max_queue_size(q));
            let rings = RingLayout::allocate(&mut alloc, size)?;
            transport.setup_queue(q, size, &rings)?;
            Ok(Virtqueue::new(rings, size, event_idx)?)
        };
        let tx = make(abi::TX_QUEUE, &mut transport)?;
        let ctrl = make(abi::CTRL_QUEUE, &mut transport)?;
        let mut events = make(abi::EVENT_QUEUE, &mut transport)?;
        transport.start()?;

        // The largest request: SET_PCT of the most pages, with their frames.
        let max_frames =
            MAX_PCT_PAGES_PER_REQUEST as usize * (regs.page_size / FRAME_SIZE) as usize;
        let ctrl_req = alloc.alloc(CTRL_HEADER_SIZE + 16 + 8 * max_frames, 4096)?;
        let ctrl_resp = alloc.alloc(CTRL_RESPONSE_SIZE, 16)?;

        if !fifo::valid_slots(opts.fifo_slots) || opts.fifo_slots < MIN_FIFO_SLOTS {
            return Err(Error::FifoSize {
                slots: opts.fifo_slots,
            });
        }
        let fifo_mem = alloc.alloc(fifo::bytes(opts.fifo_slots), 4096)?;
        let doorbell = transport.doorbell(abi::TX_QUEUE)?;
        let fifo = Arc::new(TxFifo::new(
            fifo_mem,
            opts.fifo_slots,
            doorbell,
            opts.timeout,
        )?);

        let n_ev = usize::from(opts.event_buffers.clamp(1, events.size()));
        let block = alloc.alloc(n_ev * EVENT_SIZE, 64)?;
        let mut event_bufs = vec![None; usize::from(events.size())];
        for i in 0..n_ev {
            let b = block.sub(i * EVENT_SIZE, EVENT_SIZE)?;
            let t = events.add(&[], &[Buffer::of(&b)?])?;
            event_bufs[usize::from(t.index())] = Some(b);
        }
        events.kick_prepare()?;
        transport.notify(abi::EVENT_QUEUE)?;

        debug!(
            "node {}: adapter up: queues of {}/{}/{}, a transmit FIFO of {} slots, \
             {n_ev} event buffers, {} KiB of DMA memory left",
            regs.node_id,
            tx.size(),
            ctrl.size(),
            events.size(),
            opts.fifo_slots,
            alloc.remaining() >> 10
        );
        let mut adapter = Adapter {
            transport,
            alloc,
            regs,
            opts,
            ctrl,
            ctrl_req,
            ctrl_resp,
            ctrl_pending: None,
            fifo,
            events,
            event_bufs,
            status_page: None,
            arrivals: None,
        };
        let gpa = adapter.fifo.gpa();
        adapter.ctrl_ok(
            "SET_TX_FIFO",
            &CtrlRequest::SetTxFifo {
                gpa,
                slots: adapter.opts.fifo_slots,
            },
        )?;
        if crate::vclock::enabled() {
            adapter.register_arrival_table()?;
        }
        Ok(adapter)
    }

    /// Read the register file now (a round trip to the device).
    pub fn registers(&mut self) -> Result<Registers> {
        let r = self.transport.registers()?;
        self.regs = r;
        Ok(r)
    }

    /// This adapter's node number (from the register file at start-up).
    pub fn node_id(&self) -> u32 {
        self.regs.node_id
    }

    /// Cluster size (from the register file at start-up).
    pub fn nodes(&self) -> u32 {
        self.regs.nodes
    }

    /// Global page size in bytes.
    pub fn page_size(&self) -> u32 {
        self.regs.page_size
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    /// DMA memory not yet allocated.
    pub fn dma_remaining(&self) -> usize {
        self.alloc.remaining()
    }

    /// Allocate DMA memory for the caller's own use (zeroed, never freed).
    pub fn alloc_dma(&mut self, size: usize, align: usize) -> Result<DmaRegion> {
        Ok(self.alloc.alloc(size, align)?)
    }

    // ---- transmit

    /// The transmit FIFO: posted stores from any thread of the node.
    pub fn fifo(&self) -> &Arc<TxFifo> {
        &self.fifo
    }

    /// Post one store (returns at once; see [`TxFifo::post`]).
    pub fn store(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.fifo.post(addr, data).map(|_| ())
    }

    /// Wait until every store posted so far is handed to the hub, and report
    /// a refusal the device made meanwhile ([`TxFifo::flush`]).
    pub fn flush(&self) -> Result<()> {
        self.fifo.flush()
    }
}
