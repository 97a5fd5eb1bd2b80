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
//!
//! This module holds the endpoint's state and its set-up (open, bind,
//! enable, the channel to each peer); `send` writes messages, `matching`
//! matches them against receives, `progress` reads the channels,
//! `complete` pushes completions, `failure` fails what a loss broke.

mod complete;
mod failure;
mod matching;
mod progress;
mod send;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use ump::{ChannelId, PendingWrite, Transport, Ump};

use crate::av::{Av, AvUser};
use crate::cq::{Cq, CqUser};
use crate::domain::Domain;
use crate::wire::Header;

pub const FI_ADDR_UNSPEC: u64 = u64::MAX;
/// The largest message: a bound on what an unexpected message may make
/// the receiver allocate.
pub const MAX_MSG: u64 = 1 << 32;

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
    /// Packets lost on this node's link when the endpoint opened (mc-api's
    /// `losses`: drops, which no error count shows, and errors).
    loss_base: u64,
    /// When a stalled endpoint last read the status page for losses.
    loss_checked: Option<Instant>,
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
        let loss_base = dom.memory_channel().losses();
        Arc::new_cyclic(|me| Ep {
            ump,
            addr,
            me: me.clone(),
            st: Mutex::new(State {
                err_base,
                loss_base,
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

/// The address vector tells its endpoints of new addresses.
impl AvUser for Ep {
    fn connect_all(&self, addrs: &[u64]) {
        Ep::connect_all(self, addrs);
    }
}

/// Reading a completion queue drives its endpoints.
impl CqUser for Ep {
    fn progress(&self) -> bool {
        Ep::progress(self)
    }
}
