//! A reliable-datagram endpoint (FI_EP_RDM) on UMP: one UMP task, one
//! channel to each peer endpoint in its address vector, tagged and
//! untagged messages with MPI's matching rules.
//!
//! Matching (seed 004, "Digital MPI": the device matches in the order
//! messages arrive on each channel, so MPI's ordering per sender holds):
//! an arriving header is matched against the posted receives in the order
//! they were posted; a match gets the payload straight from the ring into
//! its buffer. Otherwise the message is unexpected: its payload is drained
//! into a buffer of its own (the one extra copy), so the channel keeps
//! moving, and a receive posted later takes the oldest unexpected message
//! it matches.
//!
//! Errors: UMP detects a damaged or lost message and never hands it over
//! (seed 004, "Error Management"). The channel is then failed: every
//! receive that could have matched the lost message and every send to the
//! peer complete in error (fi_cq_readerr), and the cause is printed once.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use ump::{ChannelId, Event, PendingWrite, Transport, Ump, UmpError};

use crate::av::Av;
use crate::cq::{Cq, McComp, K_DATA, K_MSG, K_RECV, K_SEND, K_TAGGED};
use crate::domain::Domain;
use crate::wire::{Header, F_DATA, F_SEPARATE, F_TAGGED, HEADER, INLINE};

pub const FI_ADDR_UNSPEC: u64 = u64::MAX;
/// The largest message: a bound on what an unexpected message may make
/// the receiver allocate.
pub const MAX_MSG: u64 = 1 << 32;
/// How long pending work may see no data at all, with the node's network
/// error count moved, before the endpoint gives up (a lost packet that
/// left a message unfinished, which no message boundary will reveal).
const STALL: Duration = Duration::from_secs(2);
/// How long a message that has begun to arrive may stop before the
/// endpoint gives up (a dropped packet is counted nowhere).
const STALL_PARTIAL: Duration = Duration::from_secs(5);
/// Progress calls between looks at UMP's channel events once every
/// channel is open (a look costs a directory check and a peek of every
/// channel).
const EVENTS_EVERY: u32 = 64;

/// A user buffer handed to UMP's background writer; the libfabric contract
/// keeps it valid until the send completes.
struct UserBuf(*const u8, usize);

// SAFETY: the bytes are only read, and the owner keeps them valid and
// unchanged until the operation completes (fi_send's contract).
unsafe impl Send for UserBuf {}
// SAFETY: as above: shared reads of memory that does not change.
unsafe impl Sync for UserBuf {}

impl AsRef<[u8]> for UserBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the caller of send passed `len` readable bytes at `ptr`,
        // valid until the send completes (UMP drops this before that).
        unsafe { std::slice::from_raw_parts(self.0, self.1) }
    }
}

/// What a receive asks for.
#[derive(Clone, Copy, Debug)]
pub struct RecvSpec {
    pub ctx: u64,
    pub buf: u64,
    pub cap: u64,
    /// The sender's fi_addr, or FI_ADDR_UNSPEC.
    pub src: u64,
    pub tagged: bool,
    pub tag: u64,
    pub ignore: u64,
    pub completion: bool,
}

/// What a send asks for.
#[derive(Clone, Copy, Debug)]
pub struct SendSpec {
    pub ctx: u64,
    pub buf: u64,
    pub len: u64,
    pub dest: u64,
    pub tagged: bool,
    pub tag: u64,
    pub data: Option<u64>,
    pub completion: bool,
    pub inject: bool,
}

/// A posted receive, with the sender's address it wants (None: any).
#[derive(Clone, Copy, Debug)]
struct Recv {
    spec: RecvSpec,
    from: Option<u64>,
}

impl Recv {
    fn matches(&self, from: u64, h: &Header) -> bool {
        self.from.is_none_or(|f| f == from)
            && self.spec.tagged == h.tagged()
            && (!h.tagged() || (h.tag ^ self.spec.tag) & !self.spec.ignore == 0)
    }
}

struct Unexp {
    id: u64,
    from: u64,
    hdr: Header,
    data: Vec<u8>,
    complete: bool,
    /// A receive that took it while its payload still streamed in, or a
    /// claim (FI_PEEK | FI_CLAIM) by context.
    taken: Option<Recv>,
    claimed: Option<u64>,
}

enum Target {
    Recv(Recv),
    Unexp(u64),
}

struct Incoming {
    hdr: Header,
    got: u64,
    to: Target,
}

struct Peer {
    ch: Option<ChannelId>,
    failed: Option<String>,
    incoming: Option<Incoming>,
}

struct Sent {
    spec: SendSpec,
    to: u64,
    pending: PendingWrite,
}

#[derive(Default)]
struct State {
    av: Option<Arc<Av>>,
    tx_cq: Option<Arc<Cq>>,
    rx_cq: Option<Arc<Cq>>,
    enabled: bool,
    peers: HashMap<u64, Peer>,
    /// The peers' addresses, in the order their channels were opened: the
    /// progress loop walks this without allocating.
    order: Vec<u64>,
    by_chan: HashMap<ChannelId, u64>,
    /// Channels opened here whose other end has not opened yet: while any
    /// is, every progress call looks at UMP's directory.
    opening: usize,
    /// Progress calls since UMP's events were last looked at.
    since_events: u32,
    posted: VecDeque<Recv>,
    unexpected: VecDeque<Unexp>,
    sends: VecDeque<Sent>,
    next_unexp: u64,
    failed: Option<String>,
    last_data: Option<Instant>,
    err_base: u64,
}

pub struct Ep {
    dom: Arc<Domain>,
    ump: Ump,
    pub addr: u64,
    me: Weak<Ep>,
    st: Mutex<State>,
}

fn say(node: u8, msg: &str) {
    crate::record_failure(msg);
    eprintln!("libfabric-mc (node{node}): {msg}");
}

impl Ep {
    pub fn open(dom: Arc<Domain>) -> Arc<Ep> {
        let ump = Ump::init(&dom.node);
        let addr = dom.new_address();
        let err_base = dom.memory_channel().error_count();
        Arc::new_cyclic(|me| Ep {
            ump,
            addr,
            me: me.clone(),
            st: Mutex::new(State {
                err_base,
                ..State::default()
            }),
            dom,
        })
    }

    fn st(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn bind_av(&self, av: &Arc<Av>) {
        av.bind(self.me.clone());
        self.st().av = Some(av.clone());
    }

    pub fn bind_cq(&self, cq: &Arc<Cq>, transmit: bool, recv: bool) {
        cq.bind(self.me.clone());
        let mut st = self.st();
        if transmit {
            st.tx_cq = Some(cq.clone());
        }
        if recv {
            st.rx_cq = Some(cq.clone());
        }
    }

    /// FI_ENABLE: open the channels to the addresses known so far.
    pub fn enable(&self) -> Result<(), i64> {
        let av = {
            let mut st = self.st();
            if st.tx_cq.is_none() && st.rx_cq.is_none() {
                return Err(crate::FI_ENOCQ);
            }
            st.enabled = true;
            st.av.clone()
        };
        if let Some(av) = av {
            self.connect_all(&av.all());
        }
        Ok(())
    }

    /// Open a channel to each of `addrs` not open yet (not to itself).
    pub fn connect_all(&self, addrs: &[u64]) {
        let mut st = self.st();
        if !st.enabled {
            return;
        }
        for &a in addrs {
            if a != self.addr {
                self.peer(&mut st, a);
            }
        }
    }

    /// The peer at `addr`, its channel opened on first use.
    fn peer<'s>(&self, st: &'s mut State, addr: u64) -> &'s mut Peer {
        if !st.peers.contains_key(&addr) {
            let (ch, failed) = match self.ump.open(self.addr, addr, Transport::Auto) {
                Ok(ch) => (Some(ch), None),
                Err(e) => {
                    let why = format!(
                        "cannot open a UMP channel to endpoint {addr:#x}: {}",
                        crate::domain::blame_lost_packets(self.dom.memory_channel(), &e)
                    );
                    say(self.dom.me, &why);
                    (None, Some(why))
                }
            };
            if let Some(ch) = ch {
                st.by_chan.insert(ch, addr);
                st.opening += 1;
            }
            st.order.push(addr);
            st.peers.insert(
                addr,
                Peer {
                    ch,
                    failed,
                    incoming: None,
                },
            );
        }
        st.peers.get_mut(&addr).expect("inserted")
    }

    fn src_fi(st: &State, from: u64) -> u64 {
        st.av
            .as_ref()
            .and_then(|av| av.reverse(from))
            .unwrap_or(FI_ADDR_UNSPEC)
    }

    fn complete_recv(st: &State, r: &Recv, from: u64, h: &Header, err: i64) {
        let Some(cq) = &st.rx_cq else { return };
        if err == 0 && !r.spec.completion {
            return;
        }
        let len = h.len.min(r.spec.cap);
        cq.push(McComp {
            context: r.spec.ctx,
            kind: K_RECV
                | if h.tagged() { K_TAGGED } else { K_MSG }
                | if h.flags & F_DATA != 0 { K_DATA } else { 0 },
            len,
            buf: r.spec.buf,
            data: h.data,
            tag: h.tag,
            src: Self::src_fi(st, from),
            err: if err == 0 && h.len > r.spec.cap {
                crate::FI_ETRUNC
            } else {
                err
            },
            olen: h.len - len,
        });
    }

    fn fail_recv(st: &State, r: &Recv, err: i64) {
        if let Some(cq) = &st.rx_cq {
            cq.push(McComp {
                context: r.spec.ctx,
                kind: K_RECV | if r.spec.tagged { K_TAGGED } else { K_MSG },
                buf: r.spec.buf,
                tag: r.spec.tag,
                src: FI_ADDR_UNSPEC,
                err,
                ..McComp::default()
            });
        }
    }

    fn complete_send(st: &State, s: &SendSpec, err: i64) {
        if s.inject && err == 0 {
            return;
        }
        let Some(cq) = &st.tx_cq else { return };
        if err == 0 && !s.completion {
            return;
        }
        cq.push(McComp {
            context: s.ctx,
            kind: K_SEND | if s.tagged { K_TAGGED } else { K_MSG },
            len: s.len,
            src: FI_ADDR_UNSPEC,
            err,
            ..McComp::default()
        });
    }

    /// Copy `data` into the receive's buffer and complete it.
    fn deliver(st: &State, r: &Recv, from: u64, h: &Header, data: &[u8]) {
        let n = data.len().min(r.spec.cap as usize);
        if n > 0 {
            // SAFETY: the receive's owner gave `cap` writable bytes at
            // `buf`, valid until the receive completes (fi_recv's contract).
            let dst = unsafe { std::slice::from_raw_parts_mut(r.spec.buf as *mut u8, n) };
            dst.copy_from_slice(&data[..n]);
        }
        Self::complete_recv(st, r, from, h, 0);
    }

    /// A message arrived (its header, and the payload if inline) from
    /// `from`: match it or keep it.
    fn arrived(st: &mut State, from: u64, h: Header, inline: &[u8]) -> Option<Incoming> {
        let pos = st.posted.iter().position(|r| r.matches(from, &h));
        if !h.separate() {
            match pos {
                Some(i) => {
                    let r = st.posted.remove(i).expect("found");
                    Self::deliver(st, &r, from, &h, inline);
                }
                None => {
                    let id = st.next_unexp;
                    st.next_unexp += 1;
                    st.unexpected.push_back(Unexp {
                        id,
                        from,
                        hdr: h,
                        data: inline.to_vec(),
                        complete: true,
                        taken: None,
                        claimed: None,
                    });
                }
            }
            return None;
        }
        let to = match pos {
            Some(i) => Target::Recv(st.posted.remove(i).expect("found")),
            None => {
                let id = st.next_unexp;
                st.next_unexp += 1;
                st.unexpected.push_back(Unexp {
                    id,
                    from,
                    hdr: h,
                    data: Vec::new(),
                    complete: false,
                    taken: None,
                    claimed: None,
                });
                Target::Unexp(id)
            }
        };
        Some(Incoming { hdr: h, got: 0, to })
    }

    /// Mark the peer failed, fail what depended on it, say why once.
    fn peer_failed(&self, st: &mut State, from: u64, why: String) {
        let first = match st.peers.get_mut(&from) {
            Some(p) if p.failed.is_none() => {
                p.failed = Some(why.clone());
                if let Some(inc) = p.incoming.take() {
                    if let Target::Recv(r) = inc.to {
                        Self::fail_recv(st, &r, libc::EIO as i64);
                    }
                }
                if let Some(ch) = st.peers.get_mut(&from).and_then(|p| p.ch.take()) {
                    let _ = self.ump.close(ch);
                }
                true
            }
            _ => false,
        };
        if !first {
            return;
        }
        say(self.dom.me, &why);
        // A receive from this peer, or from anyone, may have wanted the
        // lost message.
        let (dead, live): (Vec<Recv>, Vec<Recv>) = st
            .posted
            .drain(..)
            .partition(|r| r.from.is_none_or(|f| f == from));
        st.posted = live.into();
        for r in &dead {
            Self::fail_recv(st, r, libc::EIO as i64);
        }
        let (dead, live): (Vec<Sent>, Vec<Sent>) = st.sends.drain(..).partition(|s| s.to == from);
        st.sends = live.into();
        for s in &dead {
            Self::complete_send(st, &s.spec, libc::EIO as i64);
        }
    }

    /// Fail everything: the endpoint cannot go on.
    fn fail_all(&self, st: &mut State, why: String) {
        if st.failed.is_some() {
            return;
        }
        say(self.dom.me, &why);
        st.failed = Some(why.clone());
        let peers: Vec<u64> = st.peers.keys().copied().collect();
        for p in peers {
            self.peer_failed(st, p, why.clone());
        }
        let dead: Vec<Recv> = st.posted.drain(..).collect();
        for r in &dead {
            Self::fail_recv(st, r, libc::EIO as i64);
        }
        let dead: Vec<Sent> = st.sends.drain(..).collect();
        for s in &dead {
            Self::complete_send(st, &s.spec, libc::EIO as i64);
        }
    }

    fn damaged(&self, st: &mut State, from: u64, e: &UmpError) {
        let why = format!(
            "the message stream from node{} is broken, the run cannot go on: {e}",
            crate::domain::node_of(from).unwrap_or(0)
        );
        self.peer_failed(st, from, why);
    }

    /// Drive the endpoint: channel events, arriving messages, finished
    /// sends. True if anything moved.
    pub fn progress(&self) -> bool {
        let mut st = self.st();
        if !st.enabled {
            return false;
        }
        let mut moved = false;
        // Channel events (a channel opened at the other end, a close, a
        // damaged message): each look at them reads UMP's directory
        // version and peeks every channel, which the reads below do again,
        // so once every channel is open they are looked at only every
        // EVENTS_EVERY calls. Data and damage on an open channel are seen
        // by drain_peer's peek at once.
        st.since_events += 1;
        let look = st.opening > 0 || st.since_events >= EVENTS_EVERY;
        for _ in 0..if look { 64 } else { 0 } {
            st.since_events = 0;
            match self.ump.poll(None) {
                Ok(Some(Event::Opened(ch))) => {
                    if st.by_chan.contains_key(&ch) {
                        st.opening = st.opening.saturating_sub(1);
                    }
                }
                Ok(Some(Event::Closed(_))) => continue,
                Ok(_) => break,
                Err(UmpError::Damaged { channel, damage }) => {
                    if let Some(&from) = st.by_chan.get(&channel) {
                        let e = UmpError::Damaged { channel, damage };
                        self.damaged(&mut st, from, &e);
                        moved = true;
                    } else {
                        break;
                    }
                }
                Err(e) => {
                    let why = crate::domain::blame_lost_packets(self.dom.memory_channel(), &e);
                    self.fail_all(&mut st, format!("UMP failed: {why}"));
                    return true;
                }
            }
        }
        for i in 0..st.order.len() {
            let from = st.order[i];
            moved |= self.drain_peer(&mut st, from);
        }
        moved |= self.reap_sends(&mut st);
        if moved {
            st.last_data = None;
        } else {
            self.watch_stall(&mut st);
        }
        moved
    }

    /// Read what peer `from` has sent, as far as it goes without waiting.
    fn drain_peer(&self, st: &mut State, from: u64) -> bool {
        let mut moved = false;
        loop {
            let Some(p) = st.peers.get_mut(&from) else {
                return moved;
            };
            let (Some(ch), None) = (p.ch, &p.failed) else {
                return moved;
            };
            if let Some(mut inc) = p.incoming.take() {
                match self.stream_payload(st, ch, &mut inc) {
                    Ok(true) => {
                        moved = true;
                        self.payload_done(st, from, inc);
                        continue;
                    }
                    Ok(false) => {
                        if let Some(p) = st.peers.get_mut(&from) {
                            p.incoming = Some(inc);
                        }
                        return moved;
                    }
                    Err(e) => {
                        if let Some(p) = st.peers.get_mut(&from) {
                            p.incoming = Some(inc);
                        }
                        self.damaged(st, from, &e);
                        return true;
                    }
                }
            }
            let next = match self.ump.peek(ch) {
                Ok(n) => n,
                Err(e) => {
                    self.damaged(st, from, &e);
                    return true;
                }
            };
            let Some((len, got)) = next else {
                return moved;
            };
            if got != 0 || len < HEADER as u64 || len > (HEADER + INLINE) as u64 {
                let e = format!(
                    "a message of {len} bytes from endpoint {from:#x} is not one of this provider's"
                );
                self.peer_failed(st, from, e);
                return true;
            }
            let mut b = [0u8; HEADER + INLINE];
            let n = match self.ump.read(ch, &mut b[..len as usize]) {
                Ok(n) => n,
                Err(e) => {
                    self.damaged(st, from, &e);
                    return true;
                }
            };
            moved = true;
            let Some(h) = Header::decode(&b[..n], n).filter(|h| h.len <= MAX_MSG) else {
                let e = format!("a malformed message header from endpoint {from:#x}");
                self.peer_failed(st, from, e);
                return true;
            };
            if let Some(inc) = Self::arrived(st, from, h, &b[HEADER..n]) {
                if let Target::Unexp(id) = inc.to {
                    let u = st
                        .unexpected
                        .iter_mut()
                        .find(|u| u.id == id)
                        .expect("just added");
                    if u.data.try_reserve_exact(h.len as usize).is_err() {
                        let e = format!("no memory for an unexpected message of {} bytes", h.len);
                        self.peer_failed(st, from, e);
                        return true;
                    }
                    u.data.resize(h.len as usize, 0);
                }
                if let Some(p) = st.peers.get_mut(&from) {
                    p.incoming = Some(inc);
                }
            }
        }
    }

    /// Move more of a separate payload out of the ring; true when whole.
    fn stream_payload(
        &self,
        st: &mut State,
        ch: ChannelId,
        inc: &mut Incoming,
    ) -> Result<bool, UmpError> {
        let len = inc.hdr.len;
        loop {
            if inc.got >= len {
                return Ok(true);
            }
            let mut scratch;
            let dst: &mut [u8] = match &inc.to {
                Target::Recv(r) if inc.got < r.spec.cap.min(len) => {
                    let end = r.spec.cap.min(len);
                    // SAFETY: the receive's buffer has `cap` writable
                    // bytes, valid until it completes (fi_recv's contract).
                    unsafe {
                        std::slice::from_raw_parts_mut(
                            (r.spec.buf + inc.got) as *mut u8,
                            (end - inc.got) as usize,
                        )
                    }
                }
                Target::Recv(_) => {
                    // Truncated: the rest goes nowhere.
                    scratch = vec![0u8; ((len - inc.got) as usize).min(64 << 10)];
                    &mut scratch[..]
                }
                Target::Unexp(id) => {
                    let Some(u) = st.unexpected.iter_mut().find(|u| u.id == *id) else {
                        return Ok(true);
                    };
                    &mut u.data[inc.got as usize..]
                }
            };
            let Some(p) = self.ump.nbread(ch, dst, 0)? else {
                return Ok(false);
            };
            inc.got += p.copied as u64;
            if p.remaining == 0 {
                inc.got = len;
                return Ok(true);
            }
            if p.copied == 0 {
                return Ok(false);
            }
        }
    }

    fn payload_done(&self, st: &mut State, from: u64, inc: Incoming) {
        match inc.to {
            Target::Recv(r) => Self::complete_recv(st, &r, from, &inc.hdr, 0),
            Target::Unexp(id) => {
                let Some(i) = st.unexpected.iter().position(|u| u.id == id) else {
                    return;
                };
                st.unexpected[i].complete = true;
                if let Some(r) = st.unexpected[i].taken {
                    let u = st.unexpected.remove(i).expect("found");
                    Self::deliver(st, &r, u.from, &u.hdr, &u.data);
                }
            }
        }
    }

    fn reap_sends(&self, st: &mut State) -> bool {
        let mut moved = false;
        let mut i = 0;
        while i < st.sends.len() {
            if !st.sends[i].pending.is_done() {
                i += 1;
                continue;
            }
            let s = st.sends.remove(i).expect("in range");
            moved = true;
            match s.pending.wait(Duration::ZERO) {
                Ok(_) => Self::complete_send(st, &s.spec, 0),
                Err(e) => {
                    let to = s.to;
                    Self::complete_send(st, &s.spec, libc::EIO as i64);
                    self.damaged(st, to, &e);
                }
            }
        }
        moved
    }

    /// Pending work that has seen nothing for STALL while this node's
    /// network error count moved: a packet was lost where no message
    /// boundary will show it. Give up, naming the cause.
    fn watch_stall(&self, st: &mut State) {
        let busy = !st.posted.is_empty()
            || !st.sends.is_empty()
            || st.peers.values().any(|p| p.incoming.is_some());
        if !busy {
            st.last_data = None;
            return;
        }
        let since = *st.last_data.get_or_insert_with(Instant::now);
        if since.elapsed() < STALL {
            return;
        }
        // A message whose header came, with its payload stopped for
        // STALL_PARTIAL: the writer streams a message without pausing while
        // this end reads, so a packet of it (a producer index) was dropped,
        // which no error count sees.
        if since.elapsed() >= STALL_PARTIAL {
            let partial = st
                .peers
                .iter()
                .find_map(|(&from, p)| p.incoming.as_ref().map(|i| (from, i.got, i.hdr.len)));
            if let Some((from, got, len)) = partial {
                let why = format!(
                    "a message of {len} bytes from node{} stopped arriving after {got} bytes and nothing has moved for {} s: a packet was lost on the network (Memory Channel does not retransmit), the run cannot go on",
                    crate::domain::node_of(from).unwrap_or(0),
                    STALL_PARTIAL.as_secs()
                );
                self.fail_all(st, why);
                return;
            }
        }
        let now = self.dom.memory_channel().error_count();
        if now != st.err_base {
            st.last_data = Some(Instant::now());
            let why = format!(
                "the Memory Channel error count at node{} went from {} to {} and no data has moved for {} s: a packet was lost on the network, the run cannot go on",
                self.dom.me,
                st.err_base,
                now,
                STALL.as_secs()
            );
            self.fail_all(st, why);
        }
    }

    fn failure(&self, st: &State, to: Option<u64>) -> Option<String> {
        st.failed
            .clone()
            .or_else(|| to.and_then(|t| st.peers.get(&t).and_then(|p| p.failed.clone())))
    }

    /// fi_send and its kin. Returns 0 or a negative FI_E* code.
    pub fn send(&self, s: SendSpec) -> i64 {
        let mut st = self.st();
        if !st.enabled {
            return -crate::FI_EOPBADSTATE;
        }
        if s.inject && s.len > INLINE as u64 {
            return -(libc::EMSGSIZE as i64);
        }
        if s.len > MAX_MSG {
            return -(libc::EMSGSIZE as i64);
        }
        let Some(to) = st.av.as_ref().and_then(|av| av.lookup(s.dest)) else {
            return -(libc::EINVAL as i64);
        };
        if self.failure(&st, Some(to)).is_some() {
            return -(libc::EIO as i64);
        }
        let h = Header {
            flags: if s.tagged { F_TAGGED } else { 0 }
                | if s.data.is_some() { F_DATA } else { 0 }
                | if s.len > INLINE as u64 { F_SEPARATE } else { 0 },
            len: s.len,
            tag: s.tag,
            data: s.data.unwrap_or(0),
        };
        let payload: &[u8] = if s.len == 0 {
            &[]
        } else {
            // SAFETY: the caller passed `len` readable bytes at `buf`,
            // valid until the send completes (fi_send's contract).
            unsafe { std::slice::from_raw_parts(s.buf as *const u8, s.len as usize) }
        };
        if to == self.addr {
            // To itself: matched here, no channel.
            if let Some(mut inc) =
                Self::arrived(&mut st, to, h, if h.separate() { &[] } else { payload })
            {
                match &inc.to {
                    Target::Recv(r) => Self::deliver(&st, r, to, &h, payload),
                    Target::Unexp(id) => {
                        if let Some(u) = st.unexpected.iter_mut().find(|u| u.id == *id) {
                            u.data = payload.to_vec();
                        }
                        inc.got = h.len;
                        self.payload_done(&mut st, to, inc);
                    }
                }
            }
            Self::complete_send(&st, &s, 0);
            return 0;
        }
        let Some(ch) = self.peer(&mut st, to).ch else {
            return -(libc::EHOSTUNREACH as i64);
        };
        let r = if h.separate() {
            self.ump
                .nbwrite(ch, Arc::new(h.encode().to_vec()))
                .and_then(|_| {
                    self.ump
                        .nbwrite(ch, Arc::new(UserBuf(s.buf as *const u8, s.len as usize)))
                })
        } else {
            let mut m = Vec::with_capacity(HEADER + payload.len());
            m.extend_from_slice(&h.encode());
            m.extend_from_slice(payload);
            self.ump.nbwrite(ch, Arc::new(m))
        };
        match r {
            Ok(pending) => {
                if pending.is_done() && pending.wait(Duration::ZERO).is_ok() {
                    Self::complete_send(&st, &s, 0);
                } else {
                    st.sends.push_back(Sent {
                        spec: s,
                        to,
                        pending,
                    });
                }
                0
            }
            Err(e) => {
                self.damaged(&mut st, to, &e);
                -(libc::EIO as i64)
            }
        }
    }

    /// fi_recv and its kin, FI_PEEK / FI_CLAIM / FI_DISCARD included.
    pub fn recv(&self, spec: RecvSpec, peek: bool, claim: bool, discard: bool) -> i64 {
        let mut st = self.st();
        if !st.enabled {
            return -crate::FI_EOPBADSTATE;
        }
        let from = if spec.src == FI_ADDR_UNSPEC {
            None
        } else {
            match st.av.as_ref().and_then(|av| av.lookup(spec.src)) {
                Some(a) => Some(a),
                None => return -(libc::EINVAL as i64),
            }
        };
        if self.failure(&st, from).is_some() {
            return -(libc::EIO as i64);
        }
        let r = Recv { spec, from };
        let free = |u: &Unexp| u.taken.is_none() && u.claimed.is_none();
        if peek {
            let found = st
                .unexpected
                .iter()
                .position(|u| free(u) && r.matches(u.from, &u.hdr));
            match found {
                None => Self::fail_recv(&st, &r, libc::ENOMSG as i64),
                Some(i) => {
                    let (from, hdr) = (st.unexpected[i].from, st.unexpected[i].hdr);
                    if claim {
                        st.unexpected[i].claimed = Some(spec.ctx);
                    } else if discard {
                        st.unexpected.remove(i);
                    }
                    // A peek reports the message (its whole length), and
                    // copies nothing.
                    if let Some(cq) = &st.rx_cq {
                        cq.push(McComp {
                            context: spec.ctx,
                            kind: K_RECV
                                | if hdr.tagged() { K_TAGGED } else { K_MSG }
                                | if hdr.flags & F_DATA != 0 { K_DATA } else { 0 },
                            len: hdr.len,
                            data: hdr.data,
                            tag: hdr.tag,
                            src: Self::src_fi(&st, from),
                            ..McComp::default()
                        });
                    }
                }
            }
            return 0;
        }
        let found = if claim {
            st.unexpected
                .iter()
                .position(|u| u.claimed == Some(spec.ctx))
        } else {
            st.unexpected
                .iter()
                .position(|u| free(u) && r.matches(u.from, &u.hdr))
        };
        match found {
            None if claim => -(libc::ENOMSG as i64),
            None => {
                st.posted.push_back(r);
                0
            }
            Some(i) => {
                if discard {
                    let u = st.unexpected.remove(i).expect("found");
                    let mut c = r;
                    c.spec.cap = 0;
                    if u.complete {
                        Self::complete_recv(&st, &c, u.from, &u.hdr, 0);
                    }
                    return 0;
                }
                if st.unexpected[i].complete {
                    let u = st.unexpected.remove(i).expect("found");
                    Self::deliver(&st, &r, u.from, &u.hdr, &u.data);
                } else {
                    st.unexpected[i].taken = Some(r);
                    st.unexpected[i].claimed = None;
                }
                0
            }
        }
    }

    /// fi_cancel: a posted receive not matched yet completes with
    /// FI_ECANCELED.
    pub fn cancel(&self, ctx: u64) -> i64 {
        let mut st = self.st();
        if let Some(i) = st.posted.iter().position(|r| r.spec.ctx == ctx) {
            let r = st.posted.remove(i).expect("found");
            Self::fail_recv(&st, &r, libc::ECANCELED as i64);
            return 0;
        }
        -(libc::ENOENT as i64)
    }

    /// fi_close: close the channels (the peers read what was written).
    pub fn close(&self) {
        let chans: Vec<ChannelId> = self.st().peers.values().filter_map(|p| p.ch).collect();
        for ch in chans {
            // Let queued writes reach the ring before the close does.
            let _ = self.ump.close(ch);
        }
        let _ = self.dom.memory_channel().flush();
    }
}
