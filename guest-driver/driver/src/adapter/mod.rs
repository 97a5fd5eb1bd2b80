//! The adapter driver, over any [`Transport`].
//!
//! It owns the three queues (docs/device.md section 14) and the DMA memory:
//! - control: one request at a time, answered in a 16-byte response;
//! - transmit: a pool of DMA buffers, each holding the records of one chain and
//!   its 8-byte completion; chains may be kept in flight for streaming
//!   ([`Adapter::post_transmit`], [`Adapter::poll_transmit`],
//!   [`Adapter::wait_transmit`]) or sent one at a time ([`Adapter::transmit`]);
//! - event: kept stocked with `EVENT_SIZE`-byte buffers.
//!
//! Nothing here sleeps on the device: completions are polled (a bounded spin,
//! then `yield_now`, up to a timeout). Kicks: the transmit queue is kicked only
//! when the device asks (EVENT_IDX `avail_event`: the backend polls it while
//! busy); the control and event queues, which the device serves on kicks
//! (section 14) and which are off the fast path, are kicked on every post.
//!
//! One job per file: this one holds the adapter's bring-up and the transmit
//! path; `control.rs` the control queue and the PCT, `receive.rs` receive
//! memory ([`ReceiveFrames`]), `status.rs` the status page ([`StatusView`]),
//! `events.rs` the event queue.

mod control;
mod events;
mod receive;
mod status;
#[cfg(test)]
mod tests;

use std::time::Duration;

use firmware_model::abi::{
    self, Registers, Status, TxCompletion, CTRL_HEADER_SIZE, CTRL_RESPONSE_SIZE, EVENT_SIZE,
    FRAME_SIZE, MAX_PCT_PAGES_PER_REQUEST, MAX_TX_CHAIN_BYTES, TX_COMPLETION_SIZE,
};
use log::{debug, trace, warn};

use crate::backoff::{poll_until_with, BackoffPolicy};
use crate::dma::{DmaAllocator, DmaRegion};
use crate::error::{Error, Result};
use crate::transport::Transport;
use crate::tx::{encode_records, records_size, Store};
use crate::virtqueue::{Buffer, RingLayout, Token, Virtqueue};

pub use receive::ReceiveFrames;
pub use status::StatusView;

/// How the driver sets the adapter up.
#[derive(Clone, Debug)]
pub struct AdapterOptions {
    /// Entries per queue (a power of two, at most the transport's limit).
    pub queue_size: u16,
    /// Transmit buffers, i.e. transmit chains that can be in flight at once
    /// (at most half the queue size: a chain takes two descriptors).
    pub tx_buffers: usize,
    /// Bytes of records one transmit chain may carry (at most 1 MiB).
    pub tx_buffer_size: usize,
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
            tx_buffers: 16,
            tx_buffer_size: 128 << 10,
            event_buffers: 64,
            timeout: Duration::from_secs(5),
            spin: 20_000,
        }
    }
}

/// Names a posted transmit chain until its completion is collected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxTicket(pub u64);

#[derive(Debug)]
struct TxBuffer {
    records: DmaRegion,
    completion: DmaRegion,
}

/// Completion value the driver plants before posting: a device that consumes
/// a chain without writing its completion leaves it in place.
const TX_SENTINEL: TxCompletion = TxCompletion {
    status: u32::MAX,
    records_done: u32::MAX,
};

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
    tx: Virtqueue,
    tx_buffers: Vec<TxBuffer>,
    tx_free: Vec<usize>,
    /// By token index: the buffer and ticket of a chain in flight.
    tx_in_flight: Vec<Option<(usize, TxTicket)>>,
    /// Completions reaped but not yet collected, in completion order.
    tx_done: std::collections::VecDeque<(TxTicket, TxCompletion)>,
    next_ticket: u64,
    events: Virtqueue,
    /// By token index: the buffer of a posted event chain.
    event_bufs: Vec<Option<DmaRegion>>,
    status_page: Option<DmaRegion>,
}

impl<T: Transport> std::fmt::Debug for Adapter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter")
            .field("node", &self.regs.node_id)
            .field("nodes", &self.regs.nodes)
            .field("tx_in_flight", &self.tx.in_flight())
            .finish()
    }
}

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
        let mut alloc = DmaAllocator::new(transport.dma().clone());
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

        let n_tx = opts.tx_buffers.clamp(1, usize::from(tx.size() / 2).max(1));
        let tx_size = opts
            .tx_buffer_size
            .clamp(abi::TX_RECORD_HEADER_SIZE + 8, MAX_TX_CHAIN_BYTES as usize);
        let mut tx_buffers = Vec::with_capacity(n_tx);
        for _ in 0..n_tx {
            tx_buffers.push(TxBuffer {
                records: alloc.alloc(tx_size, 4096)?,
                completion: alloc.alloc(TX_COMPLETION_SIZE, 8)?,
            });
        }

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
            "node {}: adapter up: queues of {}/{}/{}, {n_tx} transmit buffers of {tx_size} B, \
             {n_ev} event buffers, {} KiB of DMA memory left",
            regs.node_id,
            tx.size(),
            ctrl.size(),
            events.size(),
            alloc.remaining() >> 10
        );
        Ok(Adapter {
            tx_in_flight: vec![None; usize::from(tx.size())],
            tx_free: (0..n_tx).rev().collect(),
            transport,
            alloc,
            regs,
            opts,
            ctrl,
            ctrl_req,
            ctrl_resp,
            ctrl_pending: None,
            tx,
            tx_buffers,
            tx_done: Default::default(),
            next_ticket: 0,
            events,
            event_bufs,
            status_page: None,
        })
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

    /// Chains posted and not yet completed.
    pub fn tx_in_flight(&self) -> usize {
        self.tx.in_flight()
    }

    /// Largest records size one transmit chain can carry.
    pub fn tx_capacity(&self) -> usize {
        self.tx_buffers.first().map_or(0, |b| b.records.len())
    }

    /// Send `stores` as one chain and wait for its completion. The device's
    /// verdict is in the completion (`status`, `records_done`).
    pub fn transmit(&mut self, stores: &[Store<'_>]) -> Result<TxCompletion> {
        let t = self.post_transmit(stores)?;
        self.wait_transmit(t)
    }

    /// Post `stores` as one chain without waiting for it. Waits for a free
    /// transmit buffer if all are in flight (their completions are kept for
    /// [`Adapter::poll_transmit`] / [`Adapter::wait_transmit`]).
    pub fn post_transmit(&mut self, stores: &[Store<'_>]) -> Result<TxTicket> {
        if stores.is_empty() {
            return Err(Error::EmptyTransmit);
        }
        let size = records_size(stores)?;
        if size > self.tx_capacity() {
            return Err(Error::RecordsTooLarge {
                size: size as u64,
                capacity: self.tx_capacity(),
            });
        }
        let slot = match self.tx_free.pop() {
            Some(s) => s,
            None => {
                let (spin, timeout) = (self.opts.spin, self.opts.timeout);
                wait(spin, timeout, "free transmit buffer", || {
                    self.reap_tx()?;
                    Ok(self.tx_free.pop())
                })?
            }
        };
        let buf = &self.tx_buffers[slot];
        let posted = encode_records(stores, &buf.records).and_then(|n| {
            buf.completion.write(0, &TX_SENTINEL.to_bytes())?;
            Ok(self.tx.add(
                &[Buffer::prefix(&buf.records, n)?],
                &[Buffer::of(&buf.completion)?],
            )?)
        });
        let token = match posted {
            Ok(t) => t,
            Err(e) => {
                self.tx_free.push(slot);
                return Err(e);
            }
        };
        let ticket = TxTicket(self.next_ticket);
        self.next_ticket += 1;
        self.tx_in_flight[usize::from(token.index())] = Some((slot, ticket));
        if self.tx.kick_prepare()? {
            self.transport.notify(abi::TX_QUEUE)?;
        }
        trace!("transmit {ticket:?}: {} stores, {size} bytes", stores.len());
        Ok(ticket)
    }

    /// Move every completed transmit chain to `tx_done`.
    fn reap_tx(&mut self) -> Result<usize> {
        let mut n = 0;
        while let Some(u) = self.tx.poll_used()? {
            let Some((slot, ticket)) = self
                .tx_in_flight
                .get_mut(usize::from(u.token.index()))
                .and_then(Option::take)
            else {
                return Err(Error::StrayCompletion {
                    queue: "transmit",
                    chain: u.token.index(),
                });
            };
            let mut b = [0u8; TX_COMPLETION_SIZE];
            self.tx_buffers[slot].completion.read(0, &mut b)?;
            let c = TxCompletion::from_bytes(&b).unwrap_or(TX_SENTINEL);
            let c = if (u.len as usize) < TX_COMPLETION_SIZE || c == TX_SENTINEL {
                warn!(
                    "transmit {ticket:?}: completed without a completion record ({} bytes)",
                    u.len
                );
                TxCompletion {
                    status: Status::DeviceError as u32,
                    records_done: 0,
                }
            } else {
                c
            };
            self.tx_free.push(slot);
            self.tx_done.push_back((ticket, c));
            n += 1;
        }
        Ok(n)
    }

    /// The next transmit completion not yet collected, if any.
    pub fn poll_transmit(&mut self) -> Result<Option<(TxTicket, TxCompletion)>> {
        if self.tx_done.is_empty() {
            self.reap_tx()?;
        }
        Ok(self.tx_done.pop_front())
    }

    /// Wait for the completion of `ticket` (others reaped meanwhile are kept).
    pub fn wait_transmit(&mut self, ticket: TxTicket) -> Result<TxCompletion> {
        let in_flight = self
            .tx_in_flight
            .iter()
            .flatten()
            .any(|(_, t)| *t == ticket);
        let take = |done: &mut std::collections::VecDeque<(TxTicket, TxCompletion)>| {
            done.iter()
                .position(|(t, _)| *t == ticket)
                .and_then(|i| done.remove(i))
                .map(|(_, c)| c)
        };
        if let Some(c) = take(&mut self.tx_done) {
            return Ok(c);
        }
        if !in_flight {
            return Err(Error::NotInFlight(ticket));
        }
        let (spin, timeout) = (self.opts.spin, self.opts.timeout);
        wait(spin, timeout, "transmit", || {
            self.reap_tx()?;
            Ok(take(&mut self.tx_done))
        })
    }

    /// Wait until no transmit chain is in flight; returns the completions
    /// not yet collected, in completion order.
    pub fn drain_transmit(&mut self) -> Result<Vec<(TxTicket, TxCompletion)>> {
        let (spin, timeout) = (self.opts.spin, self.opts.timeout);
        wait(spin, timeout, "transmit drain", || {
            self.reap_tx()?;
            Ok((self.tx.in_flight() == 0).then_some(()))
        })?;
        Ok(self.tx_done.drain(..).collect())
    }
}
