//! A UMP task (`ump_init` .. `ump_exit`): its channels, how they are
//! opened, accepted and closed through the directory, and the events a
//! wait reports. Messages are in `io`; the background writer in `writer`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::channel::{Chan, WriteFailure};
use crate::directory::{
    Record, Snapshot, A_CLOSED, A_OPEN, B_CLOSED, B_OPEN, KIND_CHANNEL, KIND_DAMAGED, KIND_FREE,
    KIND_LISTEN, NO_BUFFER, VIA_LISTEN,
};
use crate::error::{Transport, UmpError};
use crate::link::{Link, McLink, ShmLink, ShmPair, ShmRing};
use crate::node::Node;
use crate::shm_file::{self, FileLink};
use crate::ChannelId;

/// Something a wait reports (seed 004, Table 3: "Waits for a UMP event to
/// occur, either on one specified channel to this task or on all channels
/// to this task").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The channel's peer opened its end: messages may flow.
    Opened(ChannelId),
    /// A message (at least its header) is there to read.
    Message(ChannelId),
    /// The peer closed its end; messages it wrote before are still read.
    Closed(ChannelId),
}

impl Event {
    pub fn channel(&self) -> ChannelId {
        match *self {
            Event::Opened(c) | Event::Message(c) | Event::Closed(c) => c,
        }
    }
}

/// What a task's threads and its background writer share.
pub(crate) struct TaskInner {
    pub(crate) node: Arc<Node>,
    pub(crate) id: u32,
    pub(crate) channels: Mutex<HashMap<ChannelId, Arc<Chan>>>,
    next_channel: AtomicU32,
    listening: Mutex<HashSet<u64>>,
    events: Mutex<VecDeque<Event>>,
    seen_version: AtomicU64,
    /// Set when a channel or an endpoint was added after a refresh may
    /// have listed them: the next refresh reads the directory even if its
    /// version has not moved (it may already show the peer's half).
    rescan: AtomicBool,
    /// Serialises directory refreshes of this task.
    refresh: Mutex<()>,
    /// The background writer's doorbell.
    pub(crate) work: Mutex<bool>,
    pub(crate) work_cv: Condvar,
    pub(crate) writer_started: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(crate) stop: std::sync::atomic::AtomicBool,
}

/// A UMP task: the handle every UMP call goes through. One per thread that
/// passes messages (a task of seed 004); cheap to share between threads.
pub struct Ump {
    pub(crate) inner: Arc<TaskInner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Ump {
    /// `ump_init`: a new task on this node.
    pub fn init(node: &Arc<Node>) -> Ump {
        Ump {
            inner: Arc::new(TaskInner {
                node: node.clone(),
                id: node.new_task_id(),
                channels: Mutex::new(HashMap::new()),
                next_channel: AtomicU32::new(1),
                listening: Mutex::new(HashSet::new()),
                events: Mutex::new(VecDeque::new()),
                seen_version: AtomicU64::new(u64::MAX),
                rescan: AtomicBool::new(false),
                refresh: Mutex::new(()),
                work: Mutex::new(false),
                work_cv: Condvar::new(),
                writer_started: Mutex::new(None),
                stop: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    pub fn node(&self) -> &Arc<Node> {
        &self.inner.node
    }

    /// This task's number on its node.
    pub fn task_id(&self) -> u32 {
        self.inner.id
    }

    pub(crate) fn chan(&self, ch: ChannelId) -> Result<Arc<Chan>, UmpError> {
        lock(&self.inner.channels)
            .get(&ch)
            .cloned()
            .ok_or(UmpError::NoSuchChannel(ch))
    }

    fn new_channel_id(&self) -> ChannelId {
        ChannelId(self.inner.next_channel.fetch_add(1, Ordering::Relaxed))
    }

    /// `ump_open`: open a duplex channel between this task's endpoint
    /// `local` and endpoint `remote`, over `transport`. Returns at once:
    /// the first of the two to open allocates its ring and waits for the
    /// other ([`Event::Opened`]); the second completes the channel. Either
    /// side may open first, and an endpoint registered with
    /// [`Ump::listen`] completes it by itself.
    pub fn open(
        &self,
        local: u64,
        remote: u64,
        transport: Transport,
    ) -> Result<ChannelId, UmpError> {
        if local == remote {
            return Err(UmpError::SameEndpoint(local));
        }
        if lock(&self.inner.channels)
            .values()
            .any(|c| c.local == local && c.remote == remote)
        {
            return Err(UmpError::ChannelExists { local, remote });
        }
        let node = &self.inner.node;
        let me = node.me();
        let task = self.inner.id;
        let ring = node.config.ring_bytes;
        // The first opener's Memory Channel ring, allocated up front (seed
        // 004: "the resources are allocated by the first task to open the
        // channel"); given back if the channel turns out local.
        let my_off = if transport == Transport::SharedMemory {
            None
        } else {
            Some(node.alloc_ring(ring)?)
        };
        let r = node.dir.update(|s| {
            if let Some(i) = pending_for(s, local, remote) {
                let rec = s.records[i];
                if rec.a == remote && rec.flags & B_OPEN == 0 {
                    let (rec, made) = self.complete(s, i, transport, my_off)?;
                    return Ok((rec, false, made));
                }
                return Err(UmpError::ChannelExists { local, remote });
            }
            let slot = s.free_slot()?;
            let uid = s.take_uid();
            let mut rec = Record {
                kind: KIND_CHANNEL,
                uid,
                a: local,
                b: remote,
                a_node: me,
                transport: transport.code(),
                flags: A_OPEN,
                a_task: task,
                a_off: my_off.unwrap_or(NO_BUFFER),
                b_off: NO_BUFFER,
                ring: u32::try_from(ring).expect("Config::validate: a ring is at most 1 GiB"),
                ..Record::default()
            };
            if let Some(l) = s
                .records
                .iter()
                .find(|r| r.kind == KIND_LISTEN && r.a == remote)
            {
                rec.flags |= VIA_LISTEN;
                rec.b_node = l.a_node;
                rec.b_task = l.a_task;
            }
            s.records[slot] = rec;
            Ok((rec, true, None))
        });
        let (rec, first, made) = match r {
            Ok(v) => v,
            Err(e) => {
                if let Some(o) = my_off {
                    node.free_ring(o);
                }
                return Err(e);
            }
        };
        let id = self.new_channel_id();
        let chan = Arc::new(Chan::new(id, local, remote, rec.uid, first, &node.config));
        if first {
            *lock(&chan.my_off) = my_off;
        } else {
            self.connect(&chan, &rec, my_off, made)?;
            lock(&self.inner.events).push_back(Event::Opened(id));
        }
        lock(&self.inner.channels).insert(id, chan);
        if first {
            self.inner.rescan.store(true, Ordering::Release);
        }
        Ok(id)
    }

    /// Complete record `i` as its B end (in a directory update): decide
    /// the transport, make the rings (shared memory: B's end of them),
    /// fill in B's half.
    fn complete(
        &self,
        s: &mut Snapshot,
        i: usize,
        transport: Transport,
        my_off: Option<u32>,
    ) -> Result<(Record, Option<Arc<dyn Link>>), UmpError> {
        let node = &self.inner.node;
        let me = node.me();
        let mut rec = s.records[i];
        let mut made: Option<Arc<dyn Link>> = None;
        let theirs = Transport::from_code(rec.transport);
        // Another process of this host: shared memory through a file.
        let host_dir = shm_file::shared_with(node.config.host_shm.as_ref(), me, rec.a_node);
        let local = rec.a_node == me || host_dir.is_some();
        let wants = |t| transport == t || theirs == t;
        if wants(Transport::SharedMemory) && wants(Transport::MemoryChannel) {
            return Err(UmpError::Config(format!(
                "the two ends of the channel between {:#x} and {:#x} asked for different transports",
                rec.a, rec.b
            )));
        }
        let resolved = if wants(Transport::MemoryChannel) || !local {
            if wants(Transport::SharedMemory) {
                return Err(UmpError::Unreachable {
                    transport: Transport::SharedMemory,
                    remote: rec.a,
                    node: rec.a_node,
                });
            }
            if rec.a_off == NO_BUFFER {
                return Err(UmpError::Unreachable {
                    transport: Transport::MemoryChannel,
                    remote: rec.a,
                    node: rec.a_node,
                });
            }
            let Some(off) = my_off else {
                return Err(UmpError::Unreachable {
                    transport: Transport::SharedMemory,
                    remote: rec.a,
                    node: rec.a_node,
                });
            };
            // The peer's ring size rules the channel: this end's ring
            // must be as large (ours was carved for our own size).
            if rec.ring as usize > node.config.ring_bytes {
                return Err(UmpError::Config(format!(
                    "the peer's rings are {} bytes, larger than this node's {} (ring_bytes)",
                    rec.ring, node.config.ring_bytes
                )));
            }
            rec.b_off = off;
            Transport::MemoryChannel
        } else {
            let size = node.config.shm_ring_bytes;
            if let Some(dir) = host_dir {
                // Made before the directory says the channel is open, so
                // A finds it when it looks.
                made = Some(Arc::new(FileLink::create(dir, rec.uid, size)?));
            } else {
                let p = Arc::new(ShmPair {
                    a_to_b: ShmRing::new(size),
                    b_to_a: ShmRing::new(size),
                });
                // A takes it from the node once it sees the record complete.
                node.put_shm(rec.uid, p.clone());
                made = Some(Arc::new(ShmLink::new(p, false)));
            }
            rec.b_off = NO_BUFFER;
            Transport::SharedMemory
        };
        rec.transport = resolved.code();
        rec.b_node = me;
        rec.b_task = self.inner.id;
        rec.flags |= B_OPEN;
        s.records[i] = rec;
        Ok((rec, made))
    }

    /// Set up `chan`'s link from its completed record.
    /// `made`: B's end of the shared-memory rings it made (A takes them
    /// from the node, or maps the file of another process of this host).
    fn connect(
        &self,
        chan: &Chan,
        rec: &Record,
        my_off: Option<u32>,
        made: Option<Arc<dyn Link>>,
    ) -> Result<(), UmpError> {
        let node = &self.inner.node;
        let transport = Transport::from_code(rec.transport);
        let link: Arc<dyn Link> = match transport {
            Transport::SharedMemory => {
                let link: Arc<dyn Link> = match (made, self.shm_dir_to(rec.b_node)) {
                    (Some(l), _) => l,
                    (None, Some(dir)) => Arc::new(FileLink::open(dir, rec.uid)?),
                    (None, None) => Arc::new(ShmLink::new(
                        node.take_shm(rec.uid)
                            .ok_or(UmpError::Directory("a shared-memory channel without rings"))?,
                        chan.side_a,
                    )),
                };
                if let Some(o) = my_off {
                    node.free_ring(o);
                }
                *lock(&chan.my_off) = None;
                link
            }
            _ => {
                let (peer, peer_off) = if chan.side_a {
                    (rec.b_node, rec.b_off)
                } else {
                    (rec.a_node, rec.a_off)
                };
                let off = my_off.ok_or(UmpError::Directory("a channel end without its ring"))?;
                *lock(&chan.my_off) = Some(off);
                let tx = node.transmit_to(peer)?;
                let ring = rec.ring as usize;
                let fits = |off: u32, len: usize| {
                    off != NO_BUFFER && off as usize + crate::link::CTRL + ring <= len
                };
                if !fits(off, node.region.len()) || !fits(peer_off, tx.len()) {
                    return Err(UmpError::Directory("a ring outside its node's UMP region"));
                }
                Arc::new(McLink {
                    mc: node.mc.clone(),
                    rx: node.region.clone(),
                    my_off: off as usize,
                    my_size: rec.ring as usize,
                    tx,
                    peer_off: peer_off as usize,
                    peer_size: rec.ring as usize,
                    uid: rec.uid,
                    peer: (peer != node.me()).then_some(peer),
                })
            }
        };
        let _ = chan.link.set((link, transport));
        Ok(())
    }

    /// The directory of the file of a shared-memory channel to node
    /// `peer`, if `peer` is another process of this host.
    fn shm_dir_to(&self, peer: u8) -> Option<&std::path::Path> {
        let node = &self.inner.node;
        shm_file::shared_with(node.config.host_shm.as_ref(), node.me(), peer)
    }

    /// The directory of this host's shared files, if it has processes
    /// other than this one.
    fn shm_dir_to_any(&self) -> Option<&std::path::Path> {
        let node = &self.inner.node;
        node.config
            .host_shm
            .as_ref()
            .filter(|s| s.holds(node.me()))
            .map(|s| s.dir.as_path())
    }

    /// `ump_listen`: register endpoint `local` to accept channels from
    /// peers whose handles this task does not know. Returns at once; each
    /// channel opened to it shows up as [`Event::Opened`] in a wait.
    pub fn listen(&self, local: u64, transport: Transport) -> Result<(), UmpError> {
        let node = &self.inner.node;
        let (me, task) = (node.me(), self.inner.id);
        node.dir.update(|s| {
            if s.records
                .iter()
                .any(|r| r.kind == KIND_LISTEN && r.a == local)
            {
                return Err(UmpError::AlreadyListening(local));
            }
            let slot = s.free_slot()?;
            s.records[slot] = Record {
                kind: KIND_LISTEN,
                a: local,
                a_node: me,
                a_task: task,
                transport: transport.code(),
                ..Record::default()
            };
            Ok(())
        })?;
        lock(&self.inner.listening).insert(local);
        self.inner.rescan.store(true, Ordering::Release);
        Ok(())
    }

    /// Stop accepting channels on `local`.
    pub fn unlisten(&self, local: u64) -> Result<(), UmpError> {
        let (me, task) = (self.inner.node.me(), self.inner.id);
        self.inner.node.dir.update(|s| {
            for r in s.records.iter_mut() {
                if r.kind == KIND_LISTEN && r.a == local && r.a_node == me && r.a_task == task {
                    *r = Record::default();
                }
            }
            Ok(())
        })?;
        lock(&self.inner.listening).remove(&local);
        Ok(())
    }

    /// Look at the directory if it changed: channels this task opened that
    /// the peer completed, channels to its registered endpoints, peers that
    /// closed.
    pub(crate) fn refresh(&self) -> Result<(), UmpError> {
        let dir = &self.inner.node.dir;
        let v = dir.version();
        if v == self.inner.seen_version.load(Ordering::Relaxed)
            && !self.inner.rescan.load(Ordering::Acquire)
        {
            return Ok(());
        }
        let _one = lock(&self.inner.refresh);
        self.inner.rescan.store(false, Ordering::Release);
        // The channels first, then the copy: open() adds a channel only
        // once this node's copy shows its record, so every channel listed
        // has its record in a copy read after, and one missing there is
        // gone. Read the other way round, a channel opened between the two
        // (by another thread of the task) looked closed by its peer, and
        // was closed with its queued writes (issue 41, docs/pvm.md).
        let chans: Vec<Arc<Chan>> = lock(&self.inner.channels).values().cloned().collect();
        let Some(s) = dir.try_snapshot() else {
            self.inner.rescan.store(true, Ordering::Release);
            return Ok(());
        };
        // With a damaged record in this copy, a missing one may be it.
        let intact = !s.records.iter().any(|r| r.kind == KIND_DAMAGED);
        for c in &chans {
            let rec = s
                .records
                .iter()
                .find(|r| r.kind == KIND_CHANNEL && r.uid == c.uid);
            if !c.is_open() {
                if let Some(rec) = rec.filter(|r| r.flags & B_OPEN != 0) {
                    let off = *lock(&c.my_off);
                    self.connect(c, rec, off, None)?;
                    lock(&self.inner.events).push_back(Event::Opened(c.id));
                    self.inner.wake_writer();
                }
            }
            let peer_gone = match rec {
                None => intact,
                Some(r) => r.flags & if c.side_a { B_CLOSED } else { A_CLOSED } != 0,
            };
            // (Not one this task closed since it was listed.)
            let listed = || lock(&self.inner.channels).contains_key(&c.id);
            if peer_gone && !c.peer_closed() && listed() {
                c.peer_closed.store(true, Ordering::Release);
                lock(&self.inner.events).push_back(Event::Closed(c.id));
                self.inner.wake_writer();
            }
        }
        self.accept(&s)?;
        self.inner.node.reap_in(&s);
        self.inner.seen_version.store(s.version, Ordering::Relaxed);
        Ok(())
    }

    /// Complete the channels opened to this task's registered endpoints.
    fn accept(&self, s: &Snapshot) -> Result<(), UmpError> {
        let listening = lock(&self.inner.listening).clone();
        if listening.is_empty() {
            return Ok(());
        }
        let (me, task) = (self.inner.node.me(), self.inner.id);
        let mine = |r: &Record| {
            r.kind == KIND_CHANNEL
                && listening.contains(&r.b)
                && r.flags & (B_OPEN | A_CLOSED) == 0
                && (r.flags & VIA_LISTEN == 0 || (r.b_node == me && r.b_task == task))
        };
        for rec in s.records.iter().filter(|r| mine(r)) {
            let listen_transport = s
                .records
                .iter()
                .find(|l| l.kind == KIND_LISTEN && l.a == rec.b)
                .map_or(Transport::Auto, |l| Transport::from_code(l.transport));
            match self.open(rec.b, rec.a, listen_transport) {
                Ok(_) | Err(UmpError::ChannelExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `ump_close`: close this end of a channel. Non-blocking writes still
    /// queued fail with [`UmpError::Closed`]; the peer sees
    /// [`Event::Closed`] after every message written before.
    pub fn close(&self, ch: ChannelId) -> Result<(), UmpError> {
        let chan = lock(&self.inner.channels)
            .remove(&ch)
            .ok_or(UmpError::NoSuchChannel(ch))?;
        chan.tx().fail_all(WriteFailure::Closed);
        let node = &self.inner.node;
        let (mine, theirs) = if chan.side_a {
            (A_CLOSED, B_CLOSED)
        } else {
            (B_CLOSED, A_CLOSED)
        };
        let freed = node.dir.update(|s| {
            let Some(r) = s
                .records
                .iter_mut()
                .find(|r| r.kind == KIND_CHANNEL && r.uid == chan.uid)
            else {
                return Ok(true);
            };
            let peer_never_opened = chan.side_a && r.flags & B_OPEN == 0;
            if r.flags & theirs != 0 || peer_never_opened {
                *r = Record::default();
                return Ok(true);
            }
            r.flags |= mine;
            Ok(false)
        })?;
        node.take_shm(chan.uid);
        // An A end that never mapped its file (another process of this
        // host made it): nobody else will remove it.
        if chan.side_a && !chan.is_open() {
            if let Some(dir) = self.shm_dir_to_any() {
                let _ = std::fs::remove_file(shm_file::path_of(dir, chan.uid));
            }
        }
        if let Some(off) = lock(&chan.my_off).take() {
            if freed {
                node.free_ring(off);
            } else {
                // The peer may still be writing into it: it is given back
                // when the peer closes too (it then frees the record).
                node.keep_until_closed(chan.uid, off);
            }
        }
        node.reap();
        Ok(())
    }

    /// The channels this task has, open or being opened.
    pub fn channels(&self) -> Vec<ChannelId> {
        let mut v: Vec<_> = lock(&self.inner.channels).keys().copied().collect();
        v.sort();
        v
    }

    /// `ump_wait`: wait for an event on channel `on` (or on any channel of
    /// this task), at most `timeout`. `Ok(None)`: nothing happened in time.
    /// A damaged message is reported here as [`UmpError::Damaged`]. The
    /// wait spins briefly ([`Config::spins`](crate::Config::spins)), then
    /// yields, then sleeps in growing steps (up to 50 us), so a waiting
    /// task leaves the cores to others.
    pub fn wait(
        &self,
        on: Option<ChannelId>,
        timeout: Duration,
    ) -> Result<Option<Event>, UmpError> {
        if let Some(ch) = on {
            self.chan(ch)?;
        }
        let mut b = self.inner.node.config.backoff();
        loop {
            if let Some(e) = self.poll(on)? {
                return Ok(Some(e));
            }
            if b.elapsed() >= timeout {
                return Ok(None);
            }
            b.snooze();
        }
    }

    /// One look for an event, without waiting.
    pub fn poll(&self, on: Option<ChannelId>) -> Result<Option<Event>, UmpError> {
        self.refresh()?;
        {
            let mut ev = lock(&self.inner.events);
            if let Some(i) = ev.iter().position(|e| on.is_none_or(|c| e.channel() == c)) {
                return Ok(ev.remove(i));
            }
        }
        let chans: Vec<Arc<Chan>> = match on {
            Some(c) => vec![self.chan(c)?],
            None => {
                let mut v: Vec<_> = lock(&self.inner.channels).values().cloned().collect();
                v.sort_by_key(|c| c.id);
                v
            }
        };
        for c in chans {
            let Some(link) = c.link() else {
                continue;
            };
            match c.rx().peek(link) {
                Ok(Some(_)) => return Ok(Some(Event::Message(c.id))),
                Ok(None) => {}
                Err(damage) => {
                    return Err(UmpError::Damaged {
                        channel: c.id,
                        damage,
                    })
                }
            }
        }
        Ok(None)
    }

    /// `ump_exit`: close every channel and stop the background writer.
    pub fn exit(self) -> Result<(), UmpError> {
        let mut first = Ok(());
        for ch in self.channels() {
            if let Err(e) = self.close(ch) {
                log::warn!("ump_exit: closing channel {ch}: {}", mc_api::ErrorChain(&e));
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        let listening: Vec<u64> = lock(&self.inner.listening).iter().copied().collect();
        for l in listening {
            self.unlisten(l)?;
        }
        self.inner.stop.store(true, Ordering::Release);
        self.inner.wake_writer();
        first
    }

    /// Wait until `f` is true, driving the directory, or the timeout.
    pub(crate) fn wait_until(
        &self,
        what: &'static str,
        deadline: Instant,
        mut f: impl FnMut() -> Result<bool, UmpError>,
    ) -> Result<(), UmpError> {
        let mut b = self.inner.node.config.backoff();
        loop {
            if f()? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(UmpError::Timeout {
                    after: self.inner.node.config.timeout,
                    what,
                });
            }
            b.snooze();
            self.refresh()?;
        }
    }
}

/// The open or half-open channel record between `x` and `y` (closed ones
/// are on their way out).
fn pending_for(s: &Snapshot, x: u64, y: u64) -> Option<usize> {
    s.records
        .iter()
        .position(|r| r.joins(x, y) && r.flags & (A_CLOSED | B_CLOSED) == 0 && r.kind != KIND_FREE)
}
