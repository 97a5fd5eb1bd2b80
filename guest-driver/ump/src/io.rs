//! The message calls of a task: `ump_read`, `ump_write`, `ump_nbread`,
//! `ump_nbwrite`, `ump_mcast` (seed 004, Table 3: "Three functions
//! establish the channel connection, and three functions perform all
//! message communications"), and `ump_info`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::channel::{
    failure_error, Chan, Payload, PendingWrite, Queued, WriteFailure, WriteStatus,
};
use crate::error::{Damage, Transport, UmpError};
use crate::link::Link;
use crate::outbuf::{self, Ref, OUTBUF_MAX_PAYLOAD, OUTBUF_MIN_LIST, OUTBUF_MIN_PAYLOAD, REF_LEN};
use crate::stream::{Reader, Step};
use crate::task::Ump;
use crate::wire::to_usize;
use crate::ChannelId;

/// What a non-blocking read got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadProgress {
    /// Bytes copied into the buffer by this call.
    pub copied: usize,
    /// The message's whole length.
    pub len: u64,
    /// Bytes of it still to read (0: the message is complete and checked).
    pub remaining: u64,
}

/// One channel's state, as `ump_info` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelInfo {
    pub id: ChannelId,
    pub local: u64,
    pub remote: u64,
    /// None while the peer has not opened its end.
    pub transport: Option<Transport>,
    pub peer_closed: bool,
    pub failed: bool,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub writes_queued: usize,
}

/// `ump_info`: the configuration and the state of a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    pub node: u8,
    pub nodes: u32,
    pub task: u32,
    pub config: crate::Config,
    /// Bytes of this node's UMP region in use, and in all.
    pub region_used: u64,
    pub region_bytes: u64,
    /// The Memory Channel error count now (imc_rderrcnt).
    pub error_count: u64,
    /// Multicasts of this node's tasks written once, through the outbuf.
    pub outbuf_multicasts: u64,
    pub channels: Vec<ChannelInfo>,
}

impl Ump {
    fn deadline(&self) -> Instant {
        Instant::now() + self.inner.node.config.timeout
    }

    /// Wait until `chan` is open (the peer opened its end).
    fn until_open(&self, chan: &Chan, deadline: Instant) -> Result<(), UmpError> {
        self.wait_until("the peer to open the channel", deadline, || {
            if chan.is_open() {
                Ok(true)
            } else if chan.peer_closed() {
                Err(UmpError::Closed(chan.id))
            } else {
                Ok(false)
            }
        })
    }

    /// `ump_read`: read the next message of `ch` into `buf`, waiting for
    /// it; returns its length. A message longer than `buf` is left in the
    /// channel ([`UmpError::BufferTooSmall`] says how long it is). A
    /// message damaged or lost on the way is reported, never returned.
    pub fn read(&self, ch: ChannelId, buf: &mut [u8]) -> Result<usize, UmpError> {
        let chan = self.chan(ch)?;
        let deadline = self.deadline();
        self.until_open(&chan, deadline)?;
        let link = chan.link().expect("open");
        let mut rx = chan.rx();
        let damaged = |d| UmpError::Damaged {
            channel: ch,
            damage: d,
        };
        let mut p = None;
        self.wait_until("a message", deadline, || {
            p = rx.peek(link).map_err(damaged)?;
            if p.is_none() && chan.peer_closed() {
                // Everything the peer wrote arrived before its close did.
                p = rx.peek(link).map_err(damaged)?;
                if p.is_none() {
                    return Err(UmpError::Closed(ch));
                }
            }
            Ok(p.is_some())
        })?;
        let p = p.expect("waited for it");
        if p.reference {
            return self.take_reference(&chan, link, &mut rx, buf, deadline);
        }
        let left = p.len - p.got;
        if (buf.len() as u64) < left {
            return Err(UmpError::BufferTooSmall {
                channel: ch,
                len: left,
                have: buf.len(),
            });
        }
        let mut got = 0usize;
        let left = to_usize(left);
        self.wait_until("the rest of a message", deadline, || {
            got += rx.read_some(link, &mut buf[got..left]);
            rx.release(link, false)?;
            if got < left {
                return Ok(false);
            }
            rx.finish(link).map_err(damaged)
        })?;
        // The consumer index goes back only every quarter ring: a writer
        // always has three quarters free once this end caught up, and a
        // short message costs one store each way, not two.
        rx.release(link, false)?;
        chan.received.fetch_add(1, Ordering::Relaxed);
        Ok(to_usize(p.len))
    }

    /// `ump_nbread`: start reading the next message of `ch`: returns once
    /// at least `min` bytes of it (or all of it, if shorter) are copied
    /// into `buf`, with what has arrived so far. Call again for the rest;
    /// `remaining == 0` means the message is complete and checked. With
    /// `min == 0` it never waits: no message gives `Ok(None)`.
    pub fn nbread(
        &self,
        ch: ChannelId,
        buf: &mut [u8],
        min: usize,
    ) -> Result<Option<ReadProgress>, UmpError> {
        let chan = self.chan(ch)?;
        let deadline = self.deadline();
        if min == 0 {
            self.refresh()?;
            if !chan.is_open() {
                return Ok(None);
            }
        } else {
            self.until_open(&chan, deadline)?;
        }
        let link = chan.link().expect("open");
        let mut rx = chan.rx();
        let damaged = |d| UmpError::Damaged {
            channel: ch,
            damage: d,
        };
        let mut copied = 0usize;
        let mut out = None;
        let mut step = || -> Result<bool, UmpError> {
            let Some(p) = rx.peek(link).map_err(damaged)? else {
                if chan.peer_closed() && rx.peek(link).map_err(damaged)?.is_none() {
                    return Err(UmpError::Closed(ch));
                }
                return Ok(min == 0);
            };
            if p.reference {
                // A multicast through an outbuf: taken whole (it is there
                // whole once its reference is).
                let len = self.take_reference(&chan, link, &mut rx, buf, deadline)?;
                out = Some(ReadProgress {
                    copied: len,
                    len: len as u64,
                    remaining: 0,
                });
                return Ok(true);
            }
            let want = to_usize((p.len - p.got).min(buf.len() as u64));
            copied += rx.read_some(link, &mut buf[copied..want.max(copied)]);
            rx.release(link, false)?;
            let now = rx.peek(link).map_err(damaged)?.unwrap_or(p);
            let mut remaining = now.len - now.got;
            if remaining == 0 {
                if !rx.finish(link).map_err(damaged)? {
                    // The trailer is right behind the payload.
                    return Ok(false);
                }
                rx.release(link, false)?;
                chan.received.fetch_add(1, Ordering::Relaxed);
                remaining = 0;
                out = Some(ReadProgress {
                    copied,
                    len: p.len,
                    remaining,
                });
                return Ok(true);
            }
            out = Some(ReadProgress {
                copied,
                len: p.len,
                remaining,
            });
            Ok(copied >= min.min(to_usize(p.len)) || copied == buf.len() || min == 0)
        };
        self.wait_until("part of a message", deadline, &mut step)?;
        Ok(out)
    }

    /// The length of the next message of `ch` and how much of it was read
    /// already, if its header has arrived (never waits).
    pub fn peek(&self, ch: ChannelId) -> Result<Option<(u64, u64)>, UmpError> {
        let chan = self.chan(ch)?;
        let Some(link) = chan.link() else {
            return Ok(None);
        };
        let mut rx = chan.rx();
        let p = rx.peek(link).map_err(|d| UmpError::Damaged {
            channel: ch,
            damage: d,
        })?;
        match p {
            Some(p) if p.reference => {
                let mut b = [0u8; REF_LEN];
                // The real message's length, once its reference is whole.
                Ok(rx
                    .look(link, &mut b)
                    .then(|| Ref::decode(&b))
                    .flatten()
                    .map(|r| (r.len, 0)))
            }
            p => Ok(p.map(|p| (p.len, p.got))),
        }
    }

    /// The message at the head of `chan` is a reference into the peer's
    /// outbuf: copy the message from this node's copy of the outbuf into
    /// `buf` and check it, then consume the reference and send the consumer
    /// index back at once (the writer reuses the outbuf slot only then).
    fn take_reference(
        &self,
        chan: &Chan,
        link: &dyn Link,
        rx: &mut Reader,
        buf: &mut [u8],
        deadline: Instant,
    ) -> Result<usize, UmpError> {
        let ch = chan.id;
        let damaged = |d| UmpError::Damaged {
            channel: ch,
            damage: d,
        };
        let mut b = [0u8; REF_LEN];
        // A reference is one store: whole once its header is seen.
        self.wait_until(
            "an outbuf reference",
            deadline,
            || Ok(rx.look(link, &mut b)),
        )?;
        let node = &self.inner.node;
        let r = Ref::decode(&b)
            .filter(|r| link.peer_node() == Some(r.node))
            .and_then(|r| {
                let rx = node.outbufs.get(usize::from(r.node))?.as_ref()?;
                Some((r, rx))
            });
        let got = match r {
            None => Err(Damage::Framing { at: 0 }),
            Some((r, _)) if (buf.len() as u64) < r.len => {
                return Err(UmpError::BufferTooSmall {
                    channel: ch,
                    len: r.len,
                    have: buf.len(),
                })
            }
            Some((r, orx)) => {
                let count = link.error_count().filter(|_| node.config.receiver_check);
                outbuf::take(orx, &r, buf, count).map(|()| to_usize(r.len))
            }
        };
        // Consume the reference (its own checks too), then say so.
        let mut scratch = [0u8; REF_LEN];
        rx.read_some(link, &mut scratch);
        let finished = rx.finish(link).map_err(damaged)?;
        let len = match got {
            Ok(len) if finished => len,
            Ok(_) => return Err(damaged(rx.fail_with(Damage::Framing { at: 0 }))),
            Err(d) => return Err(damaged(rx.fail_with(d))),
        };
        rx.release(link, true)?;
        chan.received.fetch_add(1, Ordering::Relaxed);
        Ok(len)
    }

    /// `ump_write`: write `data` as one message to `ch`, returning when all
    /// of it is in the peer's ring (the message streams through a ring
    /// smaller than itself while the peer reads). Messages started earlier
    /// with [`Ump::nbwrite`] go first.
    pub fn write(&self, ch: ChannelId, data: &[u8]) -> Result<(), UmpError> {
        let chan = self.chan(ch)?;
        let deadline = self.deadline();
        self.until_open(&chan, deadline)?;
        // Behind the queued non-blocking writes.
        self.wait_until("earlier non-blocking writes", deadline, || {
            let tx = chan.tx();
            if let Some(f) = &tx.failed {
                return Err(failure_error(ch, f));
            }
            Ok(tx.queue.is_empty())
        })?;
        let link = chan.link().expect("open");
        let mut tx = chan.tx();
        let mut m = tx.writer.start(data.len() as u64);
        let r = self.wait_until("room in the peer's ring", deadline, || {
            if chan.peer_closed() {
                return Err(UmpError::Closed(ch));
            }
            Ok(tx.writer.step(link, &mut m, data)? == Step::Done)
        });
        if let Err(e) = r {
            return Err(self.broke(ch, &mut tx, e));
        }
        chan.sent.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A write that failed half-way leaves the stream broken: fail the
    /// channel's writing end for good.
    fn broke(&self, ch: ChannelId, tx: &mut crate::channel::TxSide, e: UmpError) -> UmpError {
        let f = match &e {
            UmpError::Damaged { damage, .. } => WriteFailure::Damaged(*damage),
            UmpError::Closed(_) => WriteFailure::Closed,
            other => WriteFailure::Other(mc_api::ErrorChain(other).to_string()),
        };
        tx.fail_all(f.clone());
        match e {
            UmpError::Damaged { damage, .. } => UmpError::Damaged {
                channel: ch,
                damage,
            },
            e => e,
        }
    }

    /// `ump_nbwrite`: start writing `data` as one message to `ch`: writes
    /// what fits now and returns; the task's background thread writes the
    /// rest (seed 004: "A background thread will continue writing the
    /// message until it is completely transmitted"). Messages keep their
    /// order with the channel's other writes.
    pub fn nbwrite(&self, ch: ChannelId, data: Payload) -> Result<PendingWrite, UmpError> {
        let chan = self.chan(ch)?;
        let status = Arc::new(WriteStatus::default());
        let handle = PendingWrite {
            channel: ch,
            status: status.clone(),
        };
        let mut tx = chan.tx();
        if let Some(f) = &tx.failed {
            return Err(failure_error(ch, f));
        }
        let mut q = Queued {
            data,
            msg: None,
            status,
        };
        if tx.queue.is_empty() {
            if let Some(link) = chan.link() {
                let bytes = (*q.data).as_ref();
                let mut m = tx.writer.start(bytes.len() as u64);
                match tx.writer.step(link, &mut m, bytes) {
                    Ok(Step::Done) => {
                        chan.sent.fetch_add(1, Ordering::Relaxed);
                        q.status.complete(Ok(()));
                        return Ok(handle);
                    }
                    Ok(_) => q.msg = Some(m),
                    Err(e) => return Err(self.broke(ch, &mut tx, e)),
                }
            }
        }
        tx.queue.push_back(q);
        drop(tx);
        self.start_writer()?;
        self.inner.wake_writer();
        Ok(handle)
    }

    /// `ump_mcast`: write `data` as one message to every channel of `to`.
    /// To two or more channels on other nodes, a message of
    /// [`crate::OUTBUF_MIN_PAYLOAD`] to [`crate::OUTBUF_MAX_PAYLOAD`] bytes
    /// is written once, into this node's outbuf, and each of those channels
    /// gets a reference to it; otherwise each channel gets its own copy.
    pub fn mcast(&self, to: &[ChannelId], data: &[u8]) -> Result<(), UmpError> {
        let deadline = self.deadline();
        let mut chans = Vec::with_capacity(to.len());
        for &ch in to {
            if chans.iter().any(|c: &Arc<Chan>| c.id == ch) {
                return Err(UmpError::Config(format!(
                    "channel {ch} is in the multicast list twice"
                )));
            }
            chans.push(self.chan(ch)?);
        }
        for c in &chans {
            self.until_open(c, deadline)?;
            self.wait_until("earlier non-blocking writes", deadline, || {
                let tx = c.tx();
                if let Some(f) = &tx.failed {
                    return Err(failure_error(c.id, f));
                }
                Ok(tx.queue.is_empty())
            })?;
        }
        // Channels to other nodes over Memory Channel can take the message
        // from this node's outbuf; the rest (shared memory, this node over
        // Memory Channel) get their own copy.
        let (remote, local): (Vec<_>, Vec<_>) = chans
            .into_iter()
            .partition(|c| c.link().and_then(|l| l.peer_node()).is_some());
        let through_outbuf = self.inner.node.outbuf_on.load(Ordering::Relaxed)
            && remote.len() >= OUTBUF_MIN_LIST
            && (OUTBUF_MIN_PAYLOAD..=OUTBUF_MAX_PAYLOAD).contains(&data.len());
        if !through_outbuf {
            let all: Vec<_> = remote.into_iter().chain(local).collect();
            return self.mcast_each(&all, data, deadline);
        }
        let r = self.mcast_outbuf(&remote, data, deadline);
        let l = self.mcast_each(&local, data, deadline);
        r.and(l)
    }

    /// A multicast with one copy per channel, streamed side by side, so one
    /// slow reader does not hold the others back more than its ring's worth.
    fn mcast_each(
        &self,
        chans: &[Arc<Chan>],
        data: &[u8],
        deadline: Instant,
    ) -> Result<(), UmpError> {
        if chans.is_empty() {
            return Ok(());
        }
        let mut txs: Vec<_> = chans.iter().map(|c| c.tx()).collect();
        let mut msgs: Vec<_> = txs
            .iter_mut()
            .map(|t| Some(t.writer.start(data.len() as u64)))
            .collect();
        let r = self.wait_until("room in the peers' rings", deadline, || {
            for (i, c) in chans.iter().enumerate() {
                let Some(m) = &mut msgs[i] else {
                    continue;
                };
                if c.peer_closed() {
                    return Err(UmpError::Closed(c.id));
                }
                let link = c.link().expect("open");
                match txs[i].writer.step(link, m, data) {
                    Ok(Step::Done) => {
                        c.sent.fetch_add(1, Ordering::Relaxed);
                        msgs[i] = None;
                    }
                    Ok(_) => {}
                    Err(e) => return Err(self.broke(c.id, &mut txs[i], e)),
                }
            }
            Ok(msgs.iter().all(Option::is_none))
        });
        if let Err(e) = r {
            for (i, t) in txs.iter_mut().enumerate() {
                if msgs[i].is_some() {
                    t.fail_all(WriteFailure::Other(format!(
                        "a multicast broke: {}",
                        mc_api::ErrorChain(&e)
                    )));
                }
            }
            return Err(e);
        }
        Ok(())
    }

    /// A multicast through this node's outbuf: the message once into the
    /// outbuf, then a reference to it down each channel (see `outbuf`).
    fn mcast_outbuf(
        &self,
        chans: &[Arc<Chan>],
        data: &[u8],
        deadline: Instant,
    ) -> Result<(), UmpError> {
        let node = &self.inner.node;
        // The seed's lock: one multicast at a time in this node's outbuf.
        let mut ob = node.outbuf.lock().unwrap_or_else(|p| p.into_inner());
        let mut pos = 0;
        self.wait_until("the readers to free the outbuf", deadline, || {
            for c in chans {
                if c.peer_closed() {
                    return Err(UmpError::Closed(c.id));
                }
            }
            Ok(ob.room(data.len()).map(|p| pos = p).is_some())
        })?;
        let mut r = ob.put(pos, data, node.mc.error_count())?;
        r.node = node.me();
        let payload = r.encode();
        let mut readers = Vec::with_capacity(chans.len());
        let mut failed = None;
        for c in chans {
            let link = c.link().expect("open");
            let mut tx = c.tx();
            let mut m = tx.writer.start_reference(REF_LEN as u64);
            let res = self.wait_until("room in the peer's ring", deadline, || {
                if c.peer_closed() {
                    return Err(UmpError::Closed(c.id));
                }
                Ok(tx.writer.step(link, &mut m, &payload)? == Step::Done)
            });
            match res {
                Ok(()) => {
                    c.sent.fetch_add(1, Ordering::Relaxed);
                    readers.push((Arc::downgrade(c), tx.writer.position()));
                }
                Err(e) => {
                    let e = self.broke(c.id, &mut tx, e);
                    failed.get_or_insert(e);
                }
            }
        }
        ob.hold(&r, readers);
        node.outbuf_sent.fetch_add(1, Ordering::Relaxed);
        failed.map_or(Ok(()), Err)
    }

    /// `ump_info`: the configuration and the state of this task.
    pub fn info(&self) -> Info {
        let node = &self.inner.node;
        let (used, bytes) = node.region_usage();
        let mut chans: Vec<_> = self
            .inner
            .channels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        chans.sort_by_key(|c| c.id);
        Info {
            node: node.me(),
            nodes: node.mc.nodes(),
            task: self.inner.id,
            config: node.config.clone(),
            region_used: used,
            region_bytes: bytes,
            error_count: node.mc.error_count(),
            outbuf_multicasts: node.outbuf_sent.load(Ordering::Relaxed),
            channels: chans
                .iter()
                .map(|c| {
                    let tx = c.tx();
                    ChannelInfo {
                        id: c.id,
                        local: c.local,
                        remote: c.remote,
                        transport: c.link.get().map(|(_, t)| *t),
                        peer_closed: c.peer_closed(),
                        failed: tx.failed.is_some() || c.rx().failed().is_some(),
                        messages_sent: c.sent.load(Ordering::Relaxed),
                        messages_received: c.received.load(Ordering::Relaxed),
                        writes_queued: tx.queue.len(),
                    }
                })
                .collect(),
        }
    }
}
