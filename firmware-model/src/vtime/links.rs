//! The network's links in virtual time: where each stamped packet waits for
//! a busy link (docs/virtual-time.md s.3). Memory Channel 2's crossbar hub
//! is described first; seed 001's cLAN switch ([`VirtualLink::Clan`]) is
//! the same uplinks and downlinks without the broadcast (at the end).
//!
//! Seed 000 s.2.2: "Memory Channel II's hub is cross-bar based with higher
//! cross-sectional bandwidth", and a broadcast "must 'take over' the
//! crossbar-based central network hub". So:
//! - each node's link to the hub (its uplink) carries that node's packets one
//!   at a time at 75 MB/s; each node's link from the hub (its downlink)
//!   likewise;
//! - a point-to-point packet needs its sender's uplink and its receivers'
//!   downlinks (the destination's, and the sender's own for loopback): pairs
//!   of nodes that share no link go through the crossbar at once;
//! - a broadcast takes over the crossbar: EVERY downlink (not only its
//!   receivers'; the seed says the whole hub is taken over) finishes the
//!   packet it is sending, at most one packet's serialisation, then carries
//!   the broadcast, and what it would have sent meanwhile goes after it
//!   (the hub holds it). Broadcasts do not take over from each other: they
//!   go one at a time, in their own calendar. The broadcast does not wait
//!   for the queues of point-to-point traffic behind those packets: a
//!   calendar holds a stream's whole span, and a flag broadcast behind three
//!   8 KiB page replies to three nodes would otherwise wait for the last of
//!   them, as the hub's arbitration at packet boundaries never makes it.
//!
//! The one-way latency (2.9 us, seed 004 Table 2) is split in two: the
//! sender's adapter, its uplink and the crossbar
//! ([`VirtualLink::hub_offset`]) before the
//! downlink, the downlink, receiving adapter and DMA after it. Every packet
//! crosses both halves, so the split shifts all downlink calendars alike and
//! changes no arrival.
//!
//! Cut-through: a packet's bytes go down as they come up, so an uncontended
//! packet arrives exactly as `vtime::arrival` says. Work is placed per page
//! of a store (the packets of one page have the same receivers), as a fluid
//! that uses free time in order (calendar.rs); a packet inside the page gets
//! the later of "packed from the page's first byte" and "packed up to its
//! last byte", which is exact for the last packet and for an uncontended
//! page.
//!
//! Bounded against any stamps: calendars keep at most `calendar::CAP`
//! intervals and forget those that ended [`HORIZON`] before the OLDEST of the
//! senders' newest stamps, so a node that stamps far in the future moves
//! nobody's horizon but its own and delays nobody's present-time packets.
//!
//! The cLAN (seed 001 s.2, Table 2) is a switch: each node's port has an
//! uplink and a downlink at 101 MB/s, pairs of ports that share none go
//! through at once, as in the crossbar. It has no broadcast, so a broadcast
//! page is sent as one copy per receiver, one after the other on the
//! sender's uplink (VIA's sends are point to point), each then going down
//! its receiver's downlink; the receivers nearer the end of the list see
//! the copies before theirs as queueing. The real switch had 8 ports; a
//! larger cluster is modelled as one switch with a port per node at the
//! same timing (a what-if: no cascade of 8-port switches is modelled).

use super::calendar::Calendar;
use super::VirtualLink;

/// How far behind the senders' clocks an interval is still kept, in ns:
/// 100 times the default quantum (threads run at most a quantum apart).
pub const HORIZON: u64 = 10_000_000;

/// One page of a store on one downlink: the span its bytes went down in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placed {
    /// When its first byte went down the downlink.
    start: u64,
    /// When its last byte had gone down.
    end: u64,
    /// Serialisation of the store's bytes before this page's.
    base: u64,
    /// Serialisation of this page's bytes (`ser(through) - base`).
    work: u64,
}

impl Placed {
    /// Arrival of the packet whose bytes up to its last take `through` ns
    /// to serialise, from the store's first; `below` is the part of the
    /// one-way latency after the downlink.
    fn arrival(&self, through: u64, below: u64) -> u64 {
        let done = through.saturating_sub(self.base).min(self.work);
        let packed_first = self.start.saturating_add(done);
        let packed_last = self.end.saturating_sub(self.work - done);
        packed_first.max(packed_last).saturating_add(below)
    }
}

/// The hub's virtual occupancy: every link's calendar.
#[derive(Clone, Debug)]
pub(crate) struct VirtualLinks {
    /// The network these links belong to.
    link: VirtualLink,
    uplinks: Vec<Calendar>,
    downlinks: Vec<Calendar>,
    /// The union of every downlink's busy time: where a broadcast finds
    /// packets in flight.
    crossbar: Calendar,
    /// The broadcasts' spans: one takeover at a time. A downlink is held
    /// during them; it learns of them when its own traffic meets them
    /// (`Calendar::fill_avoiding`), so a broadcast costs O(log n), not a
    /// write into every downlink.
    takeover: Calendar,
    /// Serialisation of a packet of the cluster's largest payload.
    packet: u64,
    /// Each sender's newest stamp (`None`: never stamped).
    newest: Vec<Option<u64>>,
    /// Intervals that ended at or before this are forgotten.
    horizon: u64,
    /// The current store: its send time and where its uplink got to.
    send: u64,
    cursor: u64,
    /// The current page's placement: the same at every receiver of a
    /// broadcast, or per receiver (at most two: the destination, and the
    /// sender for loopback).
    everywhere: Option<Placed>,
    placed: Vec<(usize, Placed)>,
}

impl VirtualLinks {
    /// `nodes` adapters on `link` whose packets carry at most `max_payload`
    /// bytes.
    pub(crate) fn new(link: VirtualLink, nodes: usize, max_payload: u32) -> Self {
        VirtualLinks {
            link,
            uplinks: vec![Calendar::default(); nodes],
            downlinks: vec![Calendar::default(); nodes],
            crossbar: Calendar::default(),
            takeover: Calendar::default(),
            packet: link.ser(u64::from(max_payload)),
            newest: vec![None; nodes],
            horizon: 0,
            send: 0,
            cursor: 0,
            everywhere: None,
            placed: Vec::new(),
        }
    }

    /// Serialisation of `bytes` of one store on this network, in ns.
    pub(crate) fn ser(&self, bytes: u64) -> u64 {
        self.link.ser(bytes)
    }

    /// A stamped store from `src` sent at `send` begins.
    pub(crate) fn begin_store(&mut self, src: usize, send: u64) {
        if let Some(n) = self.newest.get_mut(src) {
            *n = Some(n.map_or(send, |v| v.max(send)));
        }
        // Not kept monotone: a sender that starts stamping late (or one
        // that stamped far ahead first) brings it back.
        let oldest = self.newest.iter().flatten().min().copied().unwrap_or(0);
        self.horizon = oldest.saturating_sub(HORIZON);
        self.send = send;
        self.cursor = send;
        self.everywhere = None;
        self.placed.clear();
    }

    /// Place the store's bytes `before..through` (one page's packets) from
    /// `src` to `receivers`; `broadcast`: the page is a broadcast page
    /// (which arrives at the same time wherever it is received).
    /// Afterwards [`VirtualLinks::arrival`] answers for those receivers.
    pub(crate) fn place_page(
        &mut self,
        src: usize,
        before: u64,
        through: u64,
        broadcast: bool,
        receivers: impl Iterator<Item = usize>,
    ) {
        self.everywhere = None;
        self.placed.clear();
        let horizon = self.horizon;
        let base = self.link.ser(before);
        let work = self.link.ser(through).saturating_sub(base);
        let Some(up) = self.uplinks.get_mut(src) else {
            return;
        };
        up.forget_before(horizon);
        if broadcast && !self.link.broadcasts() {
            // One copy per receiver, one after the other up the uplink.
            for r in receivers {
                let ready = self.place_up(src, work);
                self.place_down(r, ready, base, work);
            }
            return;
        }
        let ready = self.place_up(src, work);
        self.crossbar.forget_before(horizon);
        self.takeover.forget_before(horizon);
        if broadcast {
            let in_flight = self
                .crossbar
                .busy_at(ready)
                .map_or(0, |end| (end - ready).min(self.packet));
            let (start, end) = self.takeover.fill(ready.saturating_add(in_flight), work);
            // Within its span, time that is not its own is other broadcasts'.
            let others = (end - start).saturating_sub(work);
            if self.crossbar.busy_within(start, end) > others {
                // Point-to-point traffic was placed in its span: each
                // downlink holds what it would have sent and sends it after.
                for d in &mut self.downlinks {
                    d.forget_before(horizon);
                    let held = d.busy_within(start, end).saturating_sub(others);
                    if held > 0 {
                        let (s, e) = d.fill_avoiding(&self.takeover, end, held);
                        self.crossbar.occupy(s, e);
                    }
                }
            }
            self.crossbar.occupy(start, end);
            self.everywhere = Some(Placed {
                start,
                end,
                base,
                work,
            });
        } else {
            for r in receivers {
                self.place_down(r, ready, base, work);
            }
        }
    }

    /// The page's `work` up `src`'s uplink after what the store sent
    /// before it; returns when it can start down a downlink.
    fn place_up(&mut self, src: usize, work: u64) -> u64 {
        let Some(up) = self.uplinks.get_mut(src) else {
            return self.cursor;
        };
        let (up_start, up_end) = up.fill(self.cursor, work);
        self.cursor = up_end;
        self.ready(up_start, up_end, work)
    }

    /// The page's `work` down receiver `r`'s downlink from `ready`, around
    /// the broadcasts' takeovers (none on a network without broadcast), and
    /// where it went for [`VirtualLinks::arrival`]. The one placement on a
    /// downlink of a point-to-point page and of each copy of a broadcast
    /// page on a network without broadcast.
    fn place_down(&mut self, r: usize, ready: u64, base: u64, work: u64) {
        let Some(d) = self.downlinks.get_mut(r) else {
            return;
        };
        d.forget_before(self.horizon);
        let (start, end) = d.fill_avoiding(&self.takeover, ready, work);
        self.crossbar.occupy(start, end);
        self.placed.push((
            r,
            Placed {
                start,
                end,
                base,
                work,
            },
        ));
    }

    /// When a page whose uplink span is `up_start..up_end` can start down a
    /// downlink: no faster than the uplink brought its bytes, so from as if
    /// they had all come up at the end of the uplink's span (the same when
    /// nothing was in the way; `max` for times that saturated).
    fn ready(&self, up_start: u64, up_end: u64, work: u64) -> u64 {
        up_end
            .saturating_sub(work)
            .max(up_start)
            .saturating_add(self.link.hub_offset())
    }

    /// The virtual arrival at `receiver` of the current page's packet whose
    /// bytes from the store's first to its last take `through` ns to
    /// serialise ([`VirtualLinks::ser`], computed once per packet), and how much of it
    /// is waiting for busy links.
    pub(crate) fn arrival(&self, receiver: usize, through: u64) -> Option<(u64, u64)> {
        let p = self.everywhere.or_else(|| {
            self.placed
                .iter()
                .find(|(r, _)| *r == receiver)
                .map(|&(_, p)| p)
        })?;
        // As `VirtualLink::arrival`.
        let latency = self.link.timing().one_way_latency.0;
        let alone = self.send.saturating_add(through).saturating_add(latency);
        let below = latency - self.link.hub_offset();
        // Never before it would arrive alone (only times that saturated at
        // u64::MAX could make it so).
        let at = p.arrival(through, below).max(alone);
        Some((at, at.saturating_sub(alone)))
    }

    /// Intervals kept over all calendars (tests, bounds).
    #[cfg(test)]
    pub(crate) fn intervals(&self) -> usize {
        self.uplinks
            .iter()
            .chain(&self.downlinks)
            .map(Calendar::len)
            .sum::<usize>()
            + self.crossbar.len()
            + self.takeover.len()
    }

    /// The most intervals all calendars together may keep.
    #[cfg(test)]
    pub(crate) fn max_intervals(&self) -> usize {
        (self.uplinks.len() + self.downlinks.len() + 2) * super::calendar::CAP
    }
}
