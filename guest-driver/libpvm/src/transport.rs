//! Messages between tasks, in-line over UMP (seed 004: "operations done
//! in-line wherever possible"): a channel per pair of tasks, opened by
//! the first to send; every message an `nbwrite`, so pvm_send returns
//! once the message is started and UMP's background writer streams the
//! rest; every arriving message read whole into the task's queue, where
//! the receive calls match source and tag.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pvm_relay::Notice;
use ump::{ChannelId, Event, Transport, UmpError};

use crate::task::{chain, handle, tid_of, Pvm};
use crate::wire::{self, Msg};

/// How long a receive waits with no data at all while the adapter has
/// counted lost packets before it blames them.
const LOSS_QUIET: Duration = Duration::from_secs(2);

/// One look at UMP per slice of a blocking wait, so notices and the loss
/// watchdog are seen.
const SLICE: Duration = Duration::from_millis(50);

impl Pvm {
    /// The channel to `dst`, opened if there is none.
    fn channel_to(&mut self, dst: i32) -> ChannelId {
        if let Some(c) = self.chans.get(&dst) {
            return *c;
        }
        let ch = match self
            .ump
            .open(handle(self.tid), handle(dst), Transport::Auto)
        {
            Ok(c) => c,
            Err(UmpError::ChannelExists { .. }) => match self.find_channel(dst) {
                Some(c) => c,
                None => self.fatal(&format!(
                    "UMP has a channel to t{dst:x} that this task cannot find"
                )),
            },
            Err(e) => self.fatal(&format!("cannot open a channel to t{dst:x}: {}", chain(&e))),
        };
        self.chans.insert(dst, ch);
        self.peers.insert(ch, dst);
        ch
    }

    fn find_channel(&self, dst: i32) -> Option<ChannelId> {
        self.ump
            .info()
            .channels
            .iter()
            .find(|c| c.remote == handle(dst))
            .map(|c| c.id)
    }

    /// Send `body` to `dst` as a message of `kind` and `tag`.
    pub fn send_to(&mut self, dst: i32, kind: u32, tag: i32, encoding: i32, body: &[u8]) {
        if dst == self.tid {
            self.queue.push_back(Msg {
                kind,
                src: self.tid,
                tag,
                encoding,
                data: body.to_vec(),
            });
            return;
        }
        self.reap_sends();
        let ch = self.channel_to(dst);
        let frame = wire::frame(kind, self.tid, tag, encoding, body);
        match self.ump.nbwrite(ch, Arc::new(frame)) {
            Ok(w) => {
                if !w.is_done() {
                    self.pending.push((dst, w));
                }
            }
            Err(e) => self.fatal(&format!(
                "the message with tag {tag} to t{dst:x} was not sent: {}",
                chain(&e)
            )),
        }
    }

    /// Forget the sends that are done; a failed one ends the task.
    pub(crate) fn reap_sends(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut failed = None;
        self.pending.retain(|(dst, w)| {
            if !w.is_done() {
                return true;
            }
            match w.wait(Duration::ZERO) {
                // The peer ended and closed: PVM drops messages to a task
                // that is gone, and so does this library.
                Err(UmpError::Closed(_)) => {}
                Err(e) => {
                    failed.get_or_insert((*dst, e));
                }
                Ok(_) => {}
            }
            false
        });
        if let Some((dst, e)) = failed {
            self.fatal(&format!("a message to t{dst:x} was lost: {}", chain(&e)));
        }
    }

    fn peer_name(&self, ch: ChannelId) -> String {
        match self.peers.get(&ch) {
            Some(t) => format!("t{t:x}"),
            None => format!("the peer of UMP channel {}", ch.0),
        }
    }

    /// Take one UMP event (waiting at most `timeout`): a message goes to
    /// the queue. True if something happened.
    pub(crate) fn step(&mut self, timeout: Duration) -> bool {
        let ev = match self.ump.wait(None, timeout) {
            Ok(ev) => ev,
            Err(UmpError::Damaged { channel, damage }) => self.fatal(&format!(
                "the next message from {} was lost or damaged on the network ({damage})",
                self.peer_name(channel)
            )),
            Err(e) => self.fatal(&format!("waiting for messages: {}", chain(&e))),
        };
        match ev {
            None => false,
            Some(Event::Opened(ch)) => {
                self.learn_peer(ch);
                true
            }
            Some(Event::Message(ch)) => {
                self.learn_peer(ch);
                self.read_one(ch);
                true
            }
            Some(Event::Closed(ch)) => {
                // What the peer wrote before it closed is still in the
                // ring: read it before giving the ring back.
                self.learn_peer(ch);
                while matches!(self.ump.peek(ch), Ok(Some(_))) {
                    self.read_one(ch);
                }
                if let Some(t) = self.peers.remove(&ch) {
                    self.chans.remove(&t);
                }
                let _ = self.ump.close(ch);
                true
            }
        }
    }

    fn learn_peer(&mut self, ch: ChannelId) {
        if self.peers.contains_key(&ch) {
            return;
        }
        let remote = self
            .ump
            .info()
            .channels
            .iter()
            .find(|c| c.id == ch)
            .and_then(|c| tid_of(c.remote));
        if let Some(t) = remote {
            self.peers.insert(ch, t);
            self.chans.entry(t).or_insert(ch);
        }
    }

    fn read_one(&mut self, ch: ChannelId) {
        let len = match self.ump.peek(ch) {
            Ok(Some((len, _))) => match usize::try_from(len) {
                Ok(l) => l,
                Err(_) => self.fatal(&format!(
                    "a message of {len} bytes from {} is larger than this host's memory",
                    self.peer_name(ch)
                )),
            },
            Ok(None) => return,
            Err(e) => self.fatal(&format!(
                "the next message from {} was lost or damaged on the network: {}",
                self.peer_name(ch),
                chain(&e)
            )),
        };
        let mut buf = vec![0u8; len];
        if let Err(e) = self.ump.read(ch, &mut buf) {
            self.fatal(&format!(
                "a message of {len} bytes from {} was lost or damaged on the network: {}",
                self.peer_name(ch),
                chain(&e)
            ))
        }
        match wire::parse(buf) {
            Some(m) => self.queue.push_back(m),
            None => self.fatal(&format!(
                "a message of {len} bytes from {} is not a PVM message",
                self.peer_name(ch)
            )),
        }
    }

    /// Notices from the relay become messages (pvm_notify).
    fn take_notices(&mut self) {
        for n in self.relay.take_notices() {
            match n {
                Notice::TaskExit { tag, tid, host } => self.queue.push_back(Msg {
                    kind: wire::USER,
                    src: host,
                    tag,
                    encoding: 0,
                    data: tid.to_ne_bytes().to_vec(),
                }),
            }
        }
    }

    /// Read whatever has arrived, without waiting.
    pub fn drain(&mut self) {
        if self.relay.has_notices() {
            self.take_notices();
        }
        while self.step(Duration::ZERO) {}
    }

    /// The oldest queued message `want` accepts, waiting for one until
    /// `deadline` (None: for ever; a deadline already past: no wait).
    pub fn take(&mut self, want: &dyn Fn(&Msg) -> bool, deadline: Option<Instant>) -> Option<Msg> {
        let started = Instant::now();
        let losses = self.mc.losses();
        let errors = self.mc.error_count();
        let mut last_data = Instant::now();
        loop {
            crate::task::end_if_killed();
            if self.relay.has_notices() {
                self.take_notices();
            }
            if let Some(i) = self.queue.iter().position(want) {
                return self.queue.remove(i);
            }
            let left = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        // One last look at what has arrived.
                        let before = self.queue.len();
                        self.drain();
                        if self.queue.len() == before {
                            return None;
                        }
                        continue;
                    }
                    left.min(SLICE)
                }
                None => SLICE,
            };
            if self.step(left) {
                last_data = Instant::now();
                continue;
            }
            self.watchdog(started, last_data, losses, errors);
        }
    }

    /// A receive that has seen nothing for a while when the adapter has
    /// counted packets lost (or CRC errors) since the wait began, or long
    /// after losses before it, names the loss and ends the task: the
    /// message it waits for may be the one lost.
    fn watchdog(&self, started: Instant, last_data: Instant, losses: u64, errors: u64) {
        let quiet = last_data.elapsed();
        let (l, e) = (self.mc.losses(), self.mc.error_count());
        let now_lost = l > losses || e > errors;
        let lost_before = l > self.losses_at_start || e > self.errors_at_start;
        if (now_lost && quiet >= LOSS_QUIET)
            || (lost_before && quiet >= LOSS_QUIET * 5 && started.elapsed() >= LOSS_QUIET * 5)
        {
            self.fatal(&format!(
                "nothing has arrived for {:.0} s while this task waits for a message, and packets were lost on the network (this node's adapter counted {} lost on its link since the task enrolled, {} while it waited; the error count went from {} to {}): the message waited for, or part of it, was lost",
                quiet.as_secs_f64(),
                l - self.losses_at_start,
                l - losses,
                self.errors_at_start,
                e
            ));
        }
    }
}
