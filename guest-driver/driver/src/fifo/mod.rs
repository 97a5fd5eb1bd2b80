//! The transmit FIFO, driver side: posted stores (docs/device.md section 14,
//! "Transmit FIFO"; the layout is `firmware_model::abi::fifo`).
//!
//! On the real adapter a store to a transmit region is a posted PIO write:
//! "All I/O operations are fully pipelined" (seed 000 s.2.2), and the
//! processor goes on at once. Here a store claims slots in a ring in DMA
//! memory with one compare-and-swap (every thread of the node may post at
//! once; no lock), writes its record, commits it by writing the tag of its
//! first slot, and returns. The hub takes records in position order, so a
//! node's stores reach the network in FIFO order: one thread's in program
//! order, and a store made after another thread's store was seen (any
//! happens-before) after it.
//!
//! Waiting is explicit: [`TxFifo::flush`] waits until everything posted
//! before it has been handed to the hub; only an ACK-page check proves that
//! it arrived anywhere.
//!
//! The parts: this module (the ring, waiting for room, flush and
//! refusals), `post` (claiming slots and writing records) and `stamp` (the
//! virtual time a record carries in a predicted-time run).

mod post;
mod stamp;
#[cfg(test)]
mod tests;

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use firmware_model::abi::{fifo, Status};

use crate::backoff::{poll_until_with, BackoffPolicy};
use crate::dma::DmaRegion;
use crate::error::{Error, Result};
use crate::transport::Doorbell;
use crate::vclock;

/// One store: a global address and the bytes to write there.
pub type Store<'a> = (u64, &'a [u8]);

/// What the device says about stores it refused or a FIFO it stopped taking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Stores refused since the FIFO was registered.
    pub count: u64,
    pub status: u32,
    pub detail: u32,
    /// Position of the last refused record.
    pub position: u64,
}

/// How long a poster waits for the device before it calls it stuck.
const WAIT_POLICY: BackoffPolicy = BackoffPolicy::DEFAULT;

/// The driver's side of the ring. Share it between threads (`Arc`).
#[derive(Debug)]
pub struct TxFifo {
    mem: DmaRegion,
    slots: u32,
    /// Where each slot and tag is (firmware_model::abi owns the arithmetic).
    layout: fifo::Layout,
    /// Next free position: the reservation counter the node's threads share.
    reserved: AtomicU64,
    /// Refusals already reported by [`TxFifo::flush`].
    refusals_seen: AtomicU64,
    doorbell: Arc<dyn Doorbell>,
    timeout: Duration,
}

impl TxFifo {
    /// A FIFO over `mem` (at least `fifo::bytes(slots)`, zeroed, registered
    /// with the device by the caller). `timeout`: how long a post waits for
    /// room, and a flush for the device, before giving up.
    pub fn new(
        mem: DmaRegion,
        slots: u32,
        doorbell: Arc<dyn Doorbell>,
        timeout: Duration,
    ) -> Result<TxFifo> {
        let Some(layout) = fifo::Layout::new(slots) else {
            return Err(Error::FifoSize { slots });
        };
        let mem = mem.sub(0, fifo::bytes(slots))?;
        Ok(TxFifo {
            mem,
            slots,
            layout,
            reserved: AtomicU64::new(0),
            refusals_seen: AtomicU64::new(0),
            doorbell,
            timeout,
        })
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Guest-physical address of the FIFO (what SET_TX_FIFO names).
    pub fn gpa(&self) -> u64 {
        self.mem.gpa()
    }

    /// Positions the device has taken: stores before it are handed to the hub.
    pub fn consumed(&self) -> u64 {
        self.header_u64(fifo::header::CONSUMED)
    }

    /// Positions claimed so far (posted, or being written).
    pub fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Acquire)
    }

    /// The device's state of this FIFO.
    pub fn state(&self) -> Option<fifo::State> {
        fifo::State::from_u32(self.header_u32(fifo::header::STATE))
    }

    /// What the device has refused so far.
    pub fn refusals(&self) -> Refusal {
        Refusal {
            count: self.header_u64(fifo::header::REFUSED),
            status: self.header_u32(fifo::header::LAST_STATUS),
            detail: self.header_u32(fifo::header::LAST_DETAIL),
            position: self.header_u64(fifo::header::LAST_POSITION),
        }
    }

    fn header_u64(&self, off: usize) -> u64 {
        self.mem
            .atomic_u64(off)
            .map(|a| u64::from_le(a.load(Ordering::Acquire)))
            .unwrap_or(0)
    }

    fn header_u32(&self, off: usize) -> u32 {
        self.mem
            .atomic_u32(off)
            .map(|a| u32::from_le(a.load(Ordering::Acquire)))
            .unwrap_or(0)
    }

    /// Write the tag that commits the record at `position`.
    fn commit(&self, position: u64) -> Result<()> {
        let tag = self.layout.tag(position);
        self.mem
            .atomic_u32(self.layout.tag_offset(position))?
            .store(tag.to_le(), Ordering::Release);
        Ok(())
    }

    /// Wait until the ring has room up to position `end` (the hub drains it).
    fn wait_for_room(&self, end: u64) -> Result<()> {
        let ring = u64::from(self.slots);
        if end.saturating_sub(self.consumed()) <= ring {
            return Ok(());
        }
        // The hub may be asleep behind records that other threads posted
        // before it armed the doorbell: make sure it looks.
        self.ring_if_asked()?;
        vclock::wait_begin();
        let room = poll_until_with(WAIT_POLICY, self.timeout, || -> Result<Option<()>> {
            self.check_running()?;
            Ok((end.saturating_sub(self.consumed()) <= ring).then_some(()))
        });
        vclock::wait_end_quiet();
        room?.ok_or(Error::Timeout {
            what: "room in the transmit FIFO",
            after: self.timeout,
        })
    }

    /// After a commit: if the hub armed the doorbell (it is going to sleep),
    /// take it and kick. The full fence pairs with the hub's (it writes the
    /// doorbell, fences, looks at the tag): one of the two sees the other.
    fn ring_if_asked(&self) -> Result<()> {
        fence(Ordering::SeqCst);
        let bell = self.mem.atomic_u32(fifo::header::DOORBELL)?;
        if bell.load(Ordering::Relaxed) != 0 && bell.swap(0, Ordering::AcqRel) != 0 {
            self.doorbell.ring()?;
        }
        Ok(())
    }

    fn check_running(&self) -> Result<()> {
        match self.state() {
            Some(fifo::State::Broken) => {
                let r = self.refusals();
                Err(Error::FifoBroken {
                    status: r.status,
                    detail: r.detail,
                    position: r.position,
                })
            }
            _ => Ok(()),
        }
    }

    /// Wait until every store posted before this call has been handed to
    /// the hub (not: delivered; an ACK-page check proves that). Reports the
    /// first refusal the device made since the last flush, as
    /// [`Error::Refused`].
    pub fn flush(&self) -> Result<()> {
        let target = self.reserved();
        if self.consumed() < target {
            self.ring_if_asked()?;
            // The hub draining the ring is the emulator's own work: the
            // wait costs no virtual time (posted writes do not wait).
            vclock::wait_begin();
            let drained = poll_until_with(WAIT_POLICY, self.timeout, || -> Result<Option<()>> {
                self.check_running()?;
                Ok((self.consumed() >= target).then_some(()))
            });
            vclock::wait_end_quiet();
            drained?.ok_or(Error::Timeout {
                what: "the transmit FIFO to drain",
                after: self.timeout,
            })?;
        }
        self.check_running()?;
        self.take_refusal()
    }

    /// A refusal not reported yet, as an error (once).
    pub fn take_refusal(&self) -> Result<()> {
        let r = self.refusals();
        let seen = self.refusals_seen.load(Ordering::Acquire);
        if r.count > seen
            && self
                .refusals_seen
                .compare_exchange(seen, r.count, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            return Err(Error::Refused {
                request: "store",
                status: if r.status == 0 {
                    Status::DeviceError as u32
                } else {
                    r.status
                },
                detail: r.detail,
            });
        }
        Ok(())
    }
}
