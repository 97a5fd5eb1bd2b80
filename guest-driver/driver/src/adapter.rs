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

use std::time::Duration;

use firmware_model::abi::{
    self, CtrlRequest, CtrlResponse, EventRecord, Registers, Status, StatusPage, TxCompletion,
    CTRL_HEADER_SIZE, CTRL_RESPONSE_SIZE, EVENT_SIZE, FRAME_SIZE, MAX_PCT_PAGES_PER_REQUEST,
    MAX_TX_CHAIN_BYTES, STATUS_PAGE_SIZE, TX_COMPLETION_SIZE,
};
use log::{debug, trace, warn};

use crate::backoff::{poll_until_with, BackoffPolicy};
use crate::dma::{DmaAllocator, DmaRegion};
use crate::error::{Error, Result};
use crate::transport::Transport;
use crate::tx::{encode_records, records_size, Store};
use crate::virtqueue::{Buffer, RingLayout, Token, Virtqueue};

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

/// Receive memory for a run of global pages: page-aligned, contiguous 4 KiB
/// frames in DMA memory, which the adapter fills by DMA. Cheap to clone; may
/// be read from any thread.
#[derive(Clone, Debug)]
pub struct ReceiveFrames {
    region: DmaRegion,
    page_size: u32,
}

impl ReceiveFrames {
    /// Number of global pages this region receives.
    pub fn pages(&self) -> u32 {
        (self.region.len() / self.page_size as usize) as u32
    }

    /// Guest-physical addresses of every frame, page by page: what SET_PCT
    /// wants for these pages.
    pub fn frames(&self) -> Vec<u64> {
        let base = self.region.gpa();
        (0..(self.region.len() / FRAME_SIZE as usize) as u64)
            .map(|i| base + i * u64::from(FRAME_SIZE))
            .collect()
    }

    /// The memory itself.
    pub fn region(&self) -> &DmaRegion {
        &self.region
    }

    /// Copy bytes at `offset` from the start of the first page (volatile).
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        Ok(self.region.read(offset, buf)?)
    }

    pub fn read_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        Ok(self.region.read_vec(offset, len)?)
    }

    /// One aligned 64-bit load (a flag or counter the sender writes whole).
    pub fn load_u64(&self, offset: usize) -> Result<u64> {
        Ok(u64::from_le(
            self.region
                .atomic_u64(offset)?
                .load(std::sync::atomic::Ordering::Acquire),
        ))
    }

    /// Poll until the bytes at `offset` equal `expected`, for at most `timeout`.
    pub fn wait_for(&self, offset: usize, expected: &[u8], timeout: Duration) -> Result<()> {
        let mut buf = vec![0u8; expected.len()];
        wait(BackoffPolicy::DEFAULT.spins, timeout, "receive", || {
            self.region.read(offset, &mut buf)?;
            Ok((buf == expected).then_some(()))
        })
    }

    /// Zero the whole region (the adapter never does: it only writes data).
    pub fn clear(&self) -> Result<()> {
        Ok(self.region.fill(0, self.region.len(), 0)?)
    }
}

/// A view of the status page, cheap to clone and usable from any thread.
#[derive(Clone, Debug)]
pub struct StatusView {
    region: DmaRegion,
}

/// How long [`StatusView::read`] keeps trying for a consistent copy.
const STATUS_READ_GIVE_UP: std::time::Duration = std::time::Duration::from_secs(1);

impl StatusView {
    /// The cluster error count: one aligned 64-bit load (`imc_rderrcnt`).
    pub fn cluster_error_count(&self) -> Result<u64> {
        self.load(abi::status_page::CLUSTER_ERROR_COUNT)
    }

    /// The update counter (incremented after every update of the page).
    pub fn updates(&self) -> Result<u64> {
        self.load(abi::status_page::UPDATES)
    }

    fn load(&self, off: usize) -> Result<u64> {
        Ok(u64::from_le(
            self.region
                .atomic_u64(off)?
                .load(std::sync::atomic::Ordering::Acquire),
        ))
    }

    /// The whole page, consistent: re-read while the device updated it meanwhile.
    pub fn read(&self) -> Result<StatusPage> {
        let mut buf = [0u8; STATUS_PAGE_SIZE];
        // A sequence lock: odd while the device is writing the page. The
        // device's writer may be preempted half-way through an update (cores
        // are shared), so a reader backs off rather than giving up at once.
        let whole = poll_until_with(
            BackoffPolicy::DEFAULT,
            STATUS_READ_GIVE_UP,
            || -> Result<_> {
                let before = self.updates()?;
                if before % 2 != 0 {
                    return Ok(None);
                }
                self.region.read(0, &mut buf)?;
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                Ok((self.updates()? == before).then_some(()))
            },
        )?;
        match whole {
            Some(()) => StatusPage::from_bytes(&buf).ok_or(Error::StatusPageNotReady),
            // Never whole for this long: the device is not updating it sanely.
            None => Err(Error::StatusPageNotReady),
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

    // ---- control queue

    /// Send a control request and wait for the answer. A status other than OK
    /// is returned in the response, not as an error.
    pub fn ctrl(&mut self, req: &CtrlRequest) -> Result<CtrlResponse> {
        if let Some(t) = self.ctrl_pending {
            match self.ctrl.poll_used()? {
                Some(u) if u.token == t => {
                    warn!("control: a request that timed out completed late");
                    self.ctrl_pending = None;
                }
                Some(u) => {
                    return Err(Error::StrayCompletion {
                        queue: "control",
                        chain: u.token.index(),
                    })
                }
                None => return Err(Error::Busy("the control queue")),
            }
        }
        let bytes = req.encode();
        if bytes.len() > self.ctrl_req.len() {
            return Err(Error::RequestTooLarge {
                len: bytes.len(),
                max: self.ctrl_req.len(),
            });
        }
        self.ctrl_req.write(0, &bytes)?;
        self.ctrl_resp.fill(0, CTRL_RESPONSE_SIZE, 0xff)?;
        let token = self.ctrl.add(
            &[Buffer::prefix(&self.ctrl_req, bytes.len())?],
            &[Buffer::of(&self.ctrl_resp)?],
        )?;
        self.ctrl.kick_prepare()?;
        self.transport.notify(abi::CTRL_QUEUE)?;
        let ctrl = &mut self.ctrl;
        let used = match wait(self.opts.spin, self.opts.timeout, "control request", || {
            Ok(ctrl.poll_used()?)
        }) {
            Ok(u) => u,
            Err(e) => {
                if matches!(e, Error::Timeout { .. }) {
                    self.ctrl_pending = Some(token);
                }
                return Err(e);
            }
        };
        if used.token != token {
            return Err(Error::StrayCompletion {
                queue: "control",
                chain: used.token.index(),
            });
        }
        if (used.len as usize) < CTRL_RESPONSE_SIZE {
            return Err(Error::ShortAnswer {
                what: "control request",
                len: used.len,
                need: CTRL_RESPONSE_SIZE,
            });
        }
        let mut b = [0u8; CTRL_RESPONSE_SIZE];
        self.ctrl_resp.read(0, &mut b)?;
        let resp = CtrlResponse::from_bytes(&b).ok_or(Error::ShortAnswer {
            what: "control request",
            len: used.len,
            need: CTRL_RESPONSE_SIZE,
        })?;
        trace!("control {req:?} -> {resp:?}");
        Ok(resp)
    }

    /// A control request that must succeed: a refusal is an error.
    fn ctrl_ok(&mut self, request: &'static str, req: &CtrlRequest) -> Result<CtrlResponse> {
        let r = self.ctrl(req)?;
        if r.status != Status::Ok as u32 {
            return Err(Error::Refused {
                request,
                status: r.status,
                detail: r.detail,
            });
        }
        Ok(r)
    }

    /// Program `count` PCT entries from `first_page` with the entry word
    /// `entry` (`firmware_model::PctEntry::to_bits`). With receive enabled,
    /// `frames` holds `count * page_size / 4096` frame addresses (see
    /// [`ReceiveFrames::frames`]); otherwise it is empty.
    ///
    /// More than `MAX_PCT_PAGES_PER_REQUEST` pages go as several requests,
    /// in order; if the device refuses one, the pages before it stay
    /// programmed and the error names the first page of the refused piece.
    pub fn set_pct(
        &mut self,
        first_page: u32,
        count: u32,
        entry: u32,
        frames: &[u64],
    ) -> Result<()> {
        let per_page = (self.regs.page_size / FRAME_SIZE).max(1) as usize;
        let mismatched = !frames.is_empty() && frames.len() != count as usize * per_page;
        // A wrong frame count goes as one request: the device judges it
        // (Malformed, nothing changed).
        let step = if mismatched {
            count.max(1)
        } else {
            MAX_PCT_PAGES_PER_REQUEST
        };
        let mut done = 0u32;
        loop {
            let n = (count - done).min(step);
            let piece = if frames.is_empty() || mismatched {
                frames.to_vec()
            } else {
                frames[done as usize * per_page..(done + n) as usize * per_page].to_vec()
            };
            let first = first_page
                .checked_add(done)
                .ok_or(Error::PageRange { first_page, count })?;
            self.ctrl_ok(
                "SET_PCT",
                &CtrlRequest::SetPct {
                    first_page: first,
                    count: n,
                    entry,
                    frames: piece,
                },
            )?;
            done += n;
            if done >= count {
                return Ok(());
            }
        }
    }

    /// A PCT entry word, and whether receive frames are bound to the page.
    pub fn get_pct(&mut self, page: u32) -> Result<(u32, bool)> {
        let r = self.ctrl_ok("GET_PCT", &CtrlRequest::GetPct { page })?;
        Ok((r.value as u32, r.detail != 0))
    }

    /// The cluster error count and this adapter's error status word, asked of
    /// the device (the status page is cheaper).
    pub fn get_status(&mut self) -> Result<(u64, u32)> {
        let r = self.ctrl_ok("GET_STATUS", &CtrlRequest::GetStatus)?;
        Ok((r.value, r.detail))
    }

    /// Disable every PCT entry, unbind every frame, clear the error status.
    pub fn reset(&mut self) -> Result<()> {
        self.ctrl_ok("RESET", &CtrlRequest::Reset)?;
        Ok(())
    }

    // ---- receive memory

    /// Allocate receive memory for `pages` global pages: contiguous,
    /// page-aligned frames. Bind it with [`Adapter::set_pct`] and
    /// [`ReceiveFrames::frames`], or use [`Adapter::map_receive`].
    pub fn alloc_receive(&mut self, pages: u32) -> Result<ReceiveFrames> {
        let page_size = self.regs.page_size;
        let bytes = usize::try_from(u64::from(pages) * u64::from(page_size))
            .map_err(|_| Error::ReceiveTooLarge { pages, page_size })?;
        if pages == 0 {
            return Err(Error::NoPages);
        }
        let region = self.alloc.alloc(bytes, page_size as usize)?;
        Ok(ReceiveFrames { region, page_size })
    }

    /// Allocate receive memory for `count` pages from `first_page` and program
    /// them with `entry` (which should enable receive).
    pub fn map_receive(
        &mut self,
        first_page: u32,
        count: u32,
        entry: u32,
    ) -> Result<ReceiveFrames> {
        let rx = self.alloc_receive(count)?;
        self.set_pct(first_page, count, entry, &rx.frames())?;
        Ok(rx)
    }

    // ---- status page

    /// Allocate the status page in DMA memory (once) and register it with the
    /// adapter, which writes it in full before answering.
    pub fn set_status_page(&mut self) -> Result<StatusView> {
        let page = match &self.status_page {
            Some(p) => p.clone(),
            None => {
                let p = self.alloc.alloc(4096, 4096)?;
                self.status_page = Some(p.clone());
                p
            }
        };
        self.ctrl_ok(
            "SET_STATUS_PAGE",
            &CtrlRequest::SetStatusPage { gpa: page.gpa() },
        )?;
        Ok(StatusView {
            region: page.sub(0, STATUS_PAGE_SIZE)?,
        })
    }

    /// A view of the status page, if one was registered.
    pub fn status_view(&self) -> Result<StatusView> {
        let p = self.status_page.as_ref().ok_or(Error::NoStatusPage)?;
        Ok(StatusView {
            region: p.sub(0, STATUS_PAGE_SIZE)?,
        })
    }

    /// The status page as the device last wrote it.
    pub fn status(&self) -> Result<StatusPage> {
        self.status_view()?.read()
    }

    /// The cluster error count from the status page: one 64-bit load.
    pub fn cluster_error_count(&self) -> Result<u64> {
        self.status_view()?.cluster_error_count()
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

    // ---- events

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
        if reposted > 0 {
            self.events.kick_prepare()?;
            self.transport.notify(abi::EVENT_QUEUE)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    //! The adapter over a fake transport whose device is a test thread
    //! serving the rings with virtio-queue's device side (no backend).

    use super::*;
    use crate::test_device::{guest_ram, DeviceQueue};
    use crate::transport::TransportError;
    use firmware_model::abi::{TxRecordHeader, TX_RECORD_HEADER_SIZE};
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;
    use vm_memory::GuestMemoryMmap;

    type Rings = Arc<Mutex<Vec<Option<(RingLayout, u16)>>>>;

    struct FakeTransport {
        dma: DmaRegion,
        rings: Rings,
        kicks: Arc<[AtomicUsize; 3]>,
    }

    impl Transport for FakeTransport {
        fn registers(&mut self) -> Result<Registers, TransportError> {
            Ok(Registers {
                node_id: 1,
                nodes: 2,
                page_size: 8192,
                max_payload: 32,
                address_space: 512 << 20,
                ..Default::default()
            })
        }
        fn dma(&self) -> &DmaRegion {
            &self.dma
        }
        fn event_idx(&self) -> bool {
            true
        }
        fn max_queue_size(&self, _queue: u16) -> u16 {
            64
        }
        fn setup_queue(
            &mut self,
            queue: u16,
            size: u16,
            rings: &RingLayout,
        ) -> Result<(), TransportError> {
            let mut r = self.rings.lock().unwrap();
            r[usize::from(queue)] = Some((rings.clone(), size));
            Ok(())
        }
        fn start(&mut self) -> Result<(), TransportError> {
            Ok(())
        }
        fn notify(&self, queue: u16) -> Result<(), TransportError> {
            self.kicks[usize::from(queue)].fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    /// What the fake device does.
    #[derive(Default)]
    struct Knobs {
        /// Do not serve the control queue.
        ctrl_paused: AtomicBool,
        /// Consume transmit chains without writing their completion.
        tx_silent: AtomicBool,
        stop: AtomicBool,
        /// Records the device saw: (addr, data).
        seen: Mutex<Vec<(u64, Vec<u8>)>>,
    }

    struct Rig {
        adapter: Adapter<FakeTransport>,
        knobs: Arc<Knobs>,
        kicks: Arc<[AtomicUsize; 3]>,
        device: Option<std::thread::JoinHandle<()>>,
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            self.knobs.stop.store(true, Ordering::Relaxed);
            if let Some(d) = self.device.take() {
                let _ = d.join();
            }
        }
    }

    fn rig(opts: AdapterOptions) -> Rig {
        let ram = guest_ram(8 << 20, 0x2000_0000);
        let rings: Rings = Arc::new(Mutex::new(vec![None, None, None]));
        let kicks: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
        let t = FakeTransport {
            dma: ram.dma.clone(),
            rings: rings.clone(),
            kicks: kicks.clone(),
        };
        let adapter = Adapter::new(t, opts).unwrap();
        let knobs = Arc::new(Knobs::default());
        let k = knobs.clone();
        let queues: Vec<_> = rings.lock().unwrap().iter().flatten().cloned().collect();
        let mem = ram.mem.clone();
        let device = std::thread::spawn(move || device(mem, queues, k));
        Rig {
            adapter,
            knobs,
            kicks,
            device: Some(device),
        }
    }

    fn device(mem: Arc<GuestMemoryMmap>, queues: Vec<(RingLayout, u16)>, k: Arc<Knobs>) {
        let mut tx = DeviceQueue::new(&mem, &queues[0].0, queues[0].1, true);
        let mut ctrl = DeviceQueue::new(&mem, &queues[1].0, queues[1].1, true);
        while !k.stop.load(Ordering::Relaxed) {
            let mut idle = true;
            if !k.ctrl_paused.load(Ordering::Relaxed) {
                if let Some(chain) = ctrl.pop_chain() {
                    idle = false;
                    let head = chain.head_index();
                    let mut req = Vec::new();
                    chain
                        .clone()
                        .reader(&mem)
                        .unwrap()
                        .read_to_end(&mut req)
                        .unwrap();
                    let resp = match CtrlRequest::decode(&req) {
                        Ok(CtrlRequest::GetStatus) => CtrlResponse::ok(42, 7),
                        Ok(_) => CtrlResponse::ok(0, 0),
                        Err(s) => CtrlResponse::error(s, 0),
                    };
                    let mut w = chain.writer(&mem).unwrap();
                    w.write_all(&resp.to_bytes()).unwrap();
                    ctrl.add_used(head, w.bytes_written() as u32);
                }
            }
            if let Some(chain) = tx.pop_chain() {
                idle = false;
                let head = chain.head_index();
                let mut recs = Vec::new();
                chain
                    .clone()
                    .reader(&mem)
                    .unwrap()
                    .read_to_end(&mut recs)
                    .unwrap();
                let mut off = 0;
                let mut n = 0;
                while off < recs.len() {
                    let h = TxRecordHeader::from_bytes(&recs[off..]).unwrap();
                    let s = off + TX_RECORD_HEADER_SIZE;
                    k.seen
                        .lock()
                        .unwrap()
                        .push((h.addr, recs[s..s + h.len as usize].to_vec()));
                    off += TxRecordHeader::record_size(h.len) as usize;
                    n += 1;
                }
                if k.tx_silent.load(Ordering::Relaxed) {
                    tx.add_used(head, 0);
                } else {
                    let c = TxCompletion {
                        status: 0,
                        records_done: n,
                    };
                    let mut w = chain.writer(&mem).unwrap();
                    w.write_all(&c.to_bytes()).unwrap();
                    tx.add_used(head, w.bytes_written() as u32);
                }
            }
            if idle {
                std::thread::yield_now();
            }
        }
    }

    fn fast() -> AdapterOptions {
        AdapterOptions {
            queue_size: 64,
            tx_buffers: 4,
            tx_buffer_size: 4096,
            event_buffers: 8,
            timeout: Duration::from_millis(200),
            spin: 100,
        }
    }

    #[test]
    fn control_requests_round_trip_and_kick_every_time() {
        let mut r = rig(fast());
        for _ in 0..10 {
            assert_eq!(r.adapter.get_status().unwrap(), (42, 7));
        }
        assert_eq!(
            r.kicks[abi::CTRL_QUEUE as usize].load(Ordering::Relaxed),
            10
        );
        // Event buffers were posted and the device told.
        assert_eq!(
            r.kicks[abi::EVENT_QUEUE as usize].load(Ordering::Relaxed),
            1
        );
    }

    #[test]
    fn a_control_timeout_is_reported_and_recovered() {
        let mut r = rig(fast());
        r.knobs.ctrl_paused.store(true, Ordering::Relaxed);
        assert!(matches!(r.adapter.get_status(), Err(Error::Timeout { .. })));
        assert!(matches!(r.adapter.get_status(), Err(Error::Busy(_))));
        r.knobs.ctrl_paused.store(false, Ordering::Relaxed);
        // The late answer is reaped, then the new request goes through.
        let start = Instant::now();
        loop {
            match r.adapter.get_status() {
                Ok(v) => {
                    assert_eq!(v, (42, 7));
                    break;
                }
                Err(Error::Busy(_)) if start.elapsed() < Duration::from_secs(5) => {
                    std::thread::yield_now()
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn transmit_streams_and_kicks_only_when_asked() {
        let mut r = rig(fast());
        let mut tickets = Vec::new();
        for i in 0..50u64 {
            let v = i.to_le_bytes();
            tickets.push(
                r.adapter
                    .post_transmit(&[(i * 8, &v), (1, b"abc")])
                    .unwrap(),
            );
        }
        let mut done = r.adapter.drain_transmit().unwrap();
        // Completions reaped while waiting for buffers are kept too.
        done.sort_by_key(|d| d.0);
        assert_eq!(done.len(), 50);
        for (t, c) in &done {
            assert_eq!((c.status, c.records_done), (0, 2), "{t:?}");
        }
        assert_eq!(done.iter().map(|d| d.0).collect::<Vec<_>>(), tickets);
        let seen = r.knobs.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 100);
        for i in 0..50u64 {
            assert_eq!(seen[2 * i as usize], (i * 8, i.to_le_bytes().to_vec()));
            assert_eq!(seen[2 * i as usize + 1], (1, b"abc".to_vec()));
        }
        // The fake device never arms avail_event: one kick (crossing 0), no more.
        assert_eq!(r.kicks[abi::TX_QUEUE as usize].load(Ordering::Relaxed), 1);
        assert!(matches!(
            r.adapter.wait_transmit(tickets[0]),
            Err(Error::NotInFlight(t)) if t == tickets[0]
        ));
        let c = r.adapter.transmit(&[(0, b"x")]).unwrap();
        assert_eq!(c.records_done, 1);
    }

    #[test]
    fn transmit_limits_and_missing_completions() {
        let mut r = rig(fast());
        assert!(matches!(r.adapter.transmit(&[]), Err(Error::EmptyTransmit)));
        let big = vec![0u8; 5000];
        assert!(matches!(
            r.adapter.transmit(&[(0, &big)]),
            Err(Error::RecordsTooLarge {
                size: 5016,
                capacity: 4096
            })
        ));
        assert_eq!(r.adapter.tx_capacity(), 4096);
        r.knobs.tx_silent.store(true, Ordering::Relaxed);
        let c = r.adapter.transmit(&[(0, b"lost")]).unwrap();
        assert_eq!(c.status, Status::DeviceError as u32);
        r.knobs.tx_silent.store(false, Ordering::Relaxed);
        assert_eq!(r.adapter.transmit(&[(0, b"ok")]).unwrap().status, 0);
    }

    #[test]
    fn receive_memory_is_frames_of_whole_pages() {
        let mut r = rig(fast());
        let rx = r.adapter.alloc_receive(3).unwrap();
        assert_eq!(rx.pages(), 3);
        let f = rx.frames();
        assert_eq!(f.len(), 6);
        assert_eq!(f[0] % 8192, 0);
        assert!(f.windows(2).all(|w| w[1] == w[0] + 4096));
        assert!(r.adapter.alloc_receive(0).is_err());
        assert!(matches!(
            r.adapter.alloc_receive(100_000),
            Err(Error::Dma(crate::dma::DmaError::OutOfMemory { .. }))
        ));
        // The "device" writes into a frame; the driver sees it.
        rx.region().write(8192 + 5, b"dma").unwrap();
        rx.wait_for(8192 + 5, b"dma", Duration::from_secs(1))
            .unwrap();
        assert!(rx
            .wait_for(0, b"nothing", Duration::from_millis(10))
            .is_err());
        assert!(matches!(r.adapter.status(), Err(Error::NoStatusPage)));
    }
}
