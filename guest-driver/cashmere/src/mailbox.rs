//! The nodes' mailboxes: one Memory Channel region per node that only that
//! node receives, attached with an interrupt on every store (seed 004's
//! interrupt-on-receive regions), which every node transmits into. Whatever
//! a node waits for from the network lands there: its page replies, page
//! requests to it, barrier arrivals and the barrier sense, and the echo of
//! its own stores. So the node can sleep while it waits: the store's
//! interrupt wakes its protocol thread, which rings the node's doorbell
//! (`wait`).
//!
//! Every other node transmits to a mailbox point-to-point (Memory Channel
//! 2's point-to-point mode: the packets go to the owner only, not through
//! every adapter), and only its owner has a receive mapping. The owner
//! transmits to its own mailbox with loopback: its echo.
//!
//! The echo is how a node learns that its own earlier stores have arrived:
//! it posts an increasing number to its echo word after them and waits
//! until the number comes back. Loopback is delivered in the one global
//! order, packet by packet (docs/device.md s.19), so when the echo is back,
//! every store the node posted before it has reached the node itself, and
//! so has every packet from anyone ordered before it: the node's copy of
//! broadcast data (the directory, its own master copies) is current up to
//! that point.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mc_api::{MemoryChannel, RxRegion, TxRegion};

use crate::site::Site;
use crate::space::{CsmSpace, MailboxLayout, KEY_MAILBOX};
use crate::CsmError;

pub struct Mailboxes {
    me: u32,
    at: MailboxLayout,
    /// This node's mailbox.
    own: Arc<RxRegion>,
    /// Transmit mappings of every node's mailbox (point-to-point to the
    /// others' adapters, with loopback to this node's own and, in 1L, to
    /// those of its machine's other processors).
    to: Vec<Arc<TxRegion>>,
    /// The last echo number posted. Taken with the post, so echoes go out in
    /// increasing order.
    echo: Mutex<u64>,
    /// The last ring value written (its value does not matter, only the
    /// store's interrupt).
    ring: Mutex<u64>,
    /// Bytes stored into other nodes' mailboxes: this node's explicit
    /// message traffic (`Stats::message_bytes`).
    sent_bytes: AtomicU64,
}

impl Mailboxes {
    /// Allocate (or find) every node's mailbox, attach this node's for
    /// receive with interrupts and every one for transmit. Must happen before
    /// any other node can write to this node's mailbox (before the start
    /// barrier): a store into a region nobody receives is not kept.
    pub fn new(mc: &MemoryChannel, space: CsmSpace, site: &Site) -> Result<Mailboxes, CsmError> {
        let me = site.me;
        let at = space.mailbox(mc.layout().page_size);
        let mut to = Vec::with_capacity(space.nodes as usize);
        let mut own = None;
        for n in 0..space.nodes {
            let id = mc.region_alloc(KEY_MAILBOX + n, at.bytes(), false)?;
            if n == me {
                own = Some(site.receive(mc, id, true)?);
            }
            to.push(site.transmit_to(mc, id, n)?);
        }
        let own = own.expect("this node is one of the nodes");
        // A mailbox found from an earlier run may hold its echo: go on from it.
        let echo = own.load_u64(at.echo())?;
        Ok(Mailboxes {
            me,
            at,
            own,
            to,
            echo: Mutex::new(echo),
            ring: Mutex::new(0),
            sent_bytes: AtomicU64::new(0),
        })
    }

    /// This node's mailbox, for taking its notifications.
    pub fn own(&self) -> &RxRegion {
        &self.own
    }

    /// Where things are in a mailbox.
    pub fn at(&self) -> &MailboxLayout {
        &self.at
    }

    /// Whether a notification for global page `page` says a request came
    /// (and nothing else: requests have a page of their own).
    pub fn is_request(&self, page: u32) -> bool {
        let (first, _) = self.own.pages();
        self.at.is_request_page(page.wrapping_sub(first))
    }

    /// One store into node `to`'s mailbox, without allocating.
    pub fn post(&self, to: u32, offset: usize, data: &[u8]) -> Result<(), CsmError> {
        self.to[to as usize].post(offset, data)?;
        if to != self.me {
            self.sent_bytes
                .fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Bytes stored into other nodes' mailboxes so far.
    pub fn sent_bytes(&self) -> u64 {
        self.sent_bytes.load(Ordering::Relaxed)
    }

    pub fn post_u64(&self, to: u32, offset: usize, v: u64) -> Result<(), CsmError> {
        self.post(to, offset, &v.to_le_bytes())
    }

    /// The virtual arrival of what landed last in `[offset, offset + len)`
    /// of this node's mailbox (virtual time on; docs/virtual-time.md).
    pub fn arrival(&self, offset: usize, len: usize) -> Option<u64> {
        self.own.arrival_range(offset, len)
    }

    pub fn load_u32(&self, offset: usize) -> u32 {
        self.own.load_u32(offset).unwrap_or(0)
    }

    pub fn load_u64(&self, offset: usize) -> u64 {
        self.own.load_u64(offset).unwrap_or(0)
    }

    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), CsmError> {
        self.own.read(offset, out)?;
        Ok(())
    }

    /// Post the next echo number after everything this node has posted so
    /// far; returns it.
    pub fn post_echo(&self) -> Result<u64, CsmError> {
        let mut e = self.echo.lock().unwrap_or_else(|p| p.into_inner());
        *e += 1;
        self.post_u64(self.me, self.at.echo(), *e)?;
        Ok(*e)
    }

    /// The last echo number posted.
    pub fn echo_posted(&self) -> u64 {
        *self.echo.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The highest echo number back so far.
    pub fn echo_seen(&self) -> u64 {
        self.load_u64(self.at.echo())
    }

    /// Wake node `to` (its waiters look again at what they wait for).
    pub fn ring(&self, to: u32) -> Result<(), CsmError> {
        let mut r = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        *r += 1;
        self.post_u64(to, self.at.ring(), *r)
    }
}
