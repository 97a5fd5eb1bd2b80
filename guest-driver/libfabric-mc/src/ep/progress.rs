//! Manual progress (FI_PROGRESS_MANUAL): what a read of a completion
//! queue does for each endpoint bound to it: UMP's channel events, the
//! messages arriving on each peer's channel (a header, matched; a payload
//! streamed out of the ring into its buffer), and sends finished.

use std::time::Duration;

use firmware_model::to_usize;
use ump::{ChannelId, Event, UmpError};

use super::{Ep, Incoming, State, Target, MAX_MSG};
use crate::wire::{Header, HEADER, INLINE};

/// Progress calls between looks at UMP's channel events once every
/// channel is open (a look costs a directory check and a peek of every
/// channel).
const EVENTS_EVERY: u32 = 64;

impl Ep {
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
    pub(super) fn drain_peer(&self, st: &mut State, from: u64) -> bool {
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
            let n = match self.ump.read(ch, &mut b[..to_usize(len)]) {
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
                    if u.data.try_reserve_exact(to_usize(h.len)).is_err() {
                        let e = format!("no memory for an unexpected message of {} bytes", h.len);
                        self.peer_failed(st, from, e);
                        return true;
                    }
                    u.data.resize(to_usize(h.len), 0);
                }
                if let Some(p) = st.peers.get_mut(&from) {
                    p.incoming = Some(inc);
                }
            }
        }
    }

    /// Move more of a separate payload out of the ring; true when whole.
    pub(super) fn stream_payload(
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
                            to_usize(end - inc.got),
                        )
                    }
                }
                Target::Recv(_) => {
                    // Truncated: the rest goes nowhere.
                    scratch = vec![0u8; to_usize(len - inc.got).min(64 << 10)];
                    &mut scratch[..]
                }
                Target::Unexp(id) => {
                    let Some(u) = st.unexpected.iter_mut().find(|u| u.id == *id) else {
                        return Ok(true);
                    };
                    &mut u.data[to_usize(inc.got)..]
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

    pub(super) fn payload_done(&self, st: &mut State, from: u64, inc: Incoming) {
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

    pub(super) fn reap_sends(&self, st: &mut State) -> bool {
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
}
