//! Messages through a channel's rings: the writer's and the reader's state
//! machines, over any [`Link`].
//!
//! A message of any size is streamed through the ring in fragments (seed
//! 004, UMP: "Instead of writing the message as a single operation, the
//! message is streamed through the buffer in a series of fragments. Not
//! only does this approach support arbitrarily large messages, but it also
//! improves message bandwidth by allowing ... the overlapped writing and
//! reading of the message"). The writer publishes its producer index after
//! each fragment; the reader copies what has arrived straight into the
//! caller's buffer and publishes its consumer index every quarter ring.
//! Both state machines only ever do what is possible now and say so, so a
//! blocking call, a non-blocking one and the background writer all drive
//! the same code.
//!
//! A short message over Memory Channel is one store: header, payload and
//! trailer, without the producer index. Its reader polls the message's slot
//! itself: a header of this channel with the expected number, then the
//! trailer's last word tagged with the same number. The hub delivers a
//! sender's stores in order, so once that last word is seen, every earlier
//! word of the message has landed or was lost, and a loss is caught by the
//! checks as before. The producer index still goes with a short message
//! once a quarter ring has passed since it last went, so a reader that
//! waits on a lost header learns that something should be there and
//! reports it.

use crate::error::{Damage, UmpError};
use crate::link::{Link, STREAM_LIMIT};
use crate::wire::{
    framed, low32, padded, ring_at, to_usize, Header, Trailer, HEADER, OVERHEAD, TRAILER,
    VERDICT_BAD, VERDICT_GOOD,
};

/// Messages up to this many framed bytes go as one store (the short path
/// for latency).
const SHORT: usize = 512;

/// Store `data` at stream position `pos` of the outgoing ring, wrapping at
/// its end, then the producer index `prod` if given.
fn put_wrapped(link: &dyn Link, pos: u64, data: &[u8], prod: Option<u64>) -> Result<(), UmpError> {
    let size = link.out_size();
    let at = ring_at(pos, size);
    let first = data.len().min(size - at);
    if first == data.len() {
        return link.put(at, data, prod);
    }
    link.put(at, &data[..first], None)?;
    link.put(0, &data[first..], prod)
}

/// Load `buf.len()` bytes at stream position `pos` of the incoming ring.
fn get_wrapped(link: &dyn Link, pos: u64, buf: &mut [u8]) {
    let size = link.in_size();
    let at = ring_at(pos, size);
    let first = buf.len().min(size - at);
    let (a, b) = buf.split_at_mut(first);
    link.get(at, a);
    if !b.is_empty() {
        link.get(0, b);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Header,
    Payload,
    Pad,
    Trailer,
    Done,
}

/// One outgoing message in progress.
pub(crate) struct OutMsg {
    len: u64,
    /// An outbuf reference (always short).
    reference: bool,
    seq: u32,
    phase: Phase,
    sent: u64,
    saved: u64,
    crc: crc32fast::Hasher,
}

/// What a step of the writer achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The message is completely in the ring.
    Done,
    /// Wrote something; more to do.
    Progress,
    /// The ring is full: the reader must consume first.
    Blocked,
}

/// The writing end of one direction.
pub(crate) struct Writer {
    /// Stream position of the next byte (the producer index).
    pos: u64,
    /// The producer index the reader was last told.
    prod_sent: u64,
    next_seq: u32,
    fragment: usize,
    checksum: bool,
    writer_check: bool,
}

impl Writer {
    pub(crate) fn new(fragment: usize, checksum: bool, writer_check: bool) -> Writer {
        Writer {
            pos: 0,
            prod_sent: 0,
            next_seq: 0,
            fragment: fragment.max(8),
            checksum,
            writer_check,
        }
    }

    /// Start a message of `len` bytes (its number is taken now, so
    /// messages keep the order they were started in).
    pub(crate) fn start(&mut self, len: u64) -> OutMsg {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        OutMsg {
            len,
            reference: false,
            seq,
            phase: Phase::Header,
            sent: 0,
            saved: 0,
            crc: crc32fast::Hasher::new(),
        }
    }

    /// Start an outbuf reference message (its payload is `outbuf::Ref`).
    pub(crate) fn start_reference(&mut self, len: u64) -> OutMsg {
        OutMsg {
            reference: true,
            ..self.start(len)
        }
    }

    /// Stream position of the next byte: once the reader's consumer index
    /// has passed it, it has taken every message written before.
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    fn free(&self, link: &dyn Link) -> usize {
        let used = self.pos.saturating_sub(link.out_cons());
        link.out_size().saturating_sub(to_usize(used))
    }

    /// Write as much of `m` (whose payload is `data`) as the ring takes now.
    pub(crate) fn step(
        &mut self,
        link: &dyn Link,
        m: &mut OutMsg,
        data: &[u8],
    ) -> Result<Step, UmpError> {
        debug_assert_eq!(data.len() as u64, m.len);
        let mut progressed = false;
        loop {
            let free = self.free(link);
            match m.phase {
                Phase::Header => {
                    let framed = OVERHEAD + to_usize(padded(m.len));
                    if self.pos + framed as u64 >= STREAM_LIMIT {
                        return Err(UmpError::NoSpace("the channel's 1 TiB stream limit"));
                    }
                    m.saved = link.error_count().unwrap_or(0);
                    // Short only if it fits what a caught-up reader always
                    // leaves free (it holds back up to a quarter ring of
                    // consumer index): else it streams like a long one.
                    let short_ok = framed <= SHORT && framed <= link.out_size() * 3 / 4;
                    if m.reference && !short_ok {
                        return Err(UmpError::Config(
                            "an outbuf reference does not fit the channel's ring".into(),
                        ));
                    }
                    if short_ok && (!self.writer_check || m.reference) {
                        if free < framed {
                            return Ok(if progressed {
                                Step::Progress
                            } else {
                                Step::Blocked
                            });
                        }
                        self.short(link, m, data, framed)?;
                        m.phase = Phase::Done;
                        return Ok(Step::Done);
                    }
                    if free < HEADER {
                        return Ok(if progressed {
                            Step::Progress
                        } else {
                            Step::Blocked
                        });
                    }
                    let h = Header {
                        seq: m.seq,
                        len: m.len,
                        short: false,
                        reference: false,
                    };
                    self.pos += HEADER as u64;
                    self.prod_sent = self.pos;
                    let at = self.pos - HEADER as u64;
                    put_wrapped(link, at, &h.encode(link.uid()), Some(self.pos))?;
                    m.phase = Phase::Payload;
                }
                Phase::Payload => {
                    let left = to_usize(m.len - m.sent);
                    if left == 0 {
                        m.phase = Phase::Pad;
                        continue;
                    }
                    // Whole 8-byte words, except for the message's end.
                    let mut n = left.min(free).min(self.fragment);
                    if n < left {
                        n &= !7;
                    }
                    if n == 0 {
                        return Ok(if progressed {
                            Step::Progress
                        } else {
                            Step::Blocked
                        });
                    }
                    let sent = to_usize(m.sent);
                    let chunk = &data[sent..sent + n];
                    if self.checksum {
                        m.crc.update(chunk);
                    }
                    let at = self.pos;
                    self.pos += n as u64;
                    self.prod_sent = self.pos;
                    m.sent += n as u64;
                    put_wrapped(link, at, chunk, Some(self.pos))?;
                    progressed = true;
                }
                Phase::Pad => {
                    let pad = to_usize(padded(m.len) - m.len);
                    if pad > 0 {
                        if free < pad {
                            return Ok(if progressed {
                                Step::Progress
                            } else {
                                Step::Blocked
                            });
                        }
                        let at = self.pos;
                        self.pos += pad as u64;
                        put_wrapped(link, at, &[0u8; 8][..pad], None)?;
                    }
                    m.phase = Phase::Trailer;
                }
                Phase::Trailer => {
                    if free < TRAILER {
                        return Ok(if progressed {
                            Step::Progress
                        } else {
                            Step::Blocked
                        });
                    }
                    let verdict = if self.writer_check {
                        // Save the count, write, check (seed 004, Error
                        // Management): the check proves the header and the
                        // payload arrived, or counts what was lost.
                        match link.check_errors()? {
                            Some(c) if c != m.saved => VERDICT_BAD,
                            _ => VERDICT_GOOD,
                        }
                    } else {
                        VERDICT_GOOD
                    };
                    let t = self.trailer(m, verdict);
                    let at = self.pos;
                    self.pos += TRAILER as u64;
                    self.prod_sent = self.pos;
                    put_wrapped(link, at, &t.encode(link.uid()), Some(self.pos))?;
                    m.phase = Phase::Done;
                    if verdict == VERDICT_BAD {
                        return Err(UmpError::Damaged {
                            channel: crate::ChannelId(u32::MAX),
                            damage: Damage::WriterCheck,
                        });
                    }
                    return Ok(Step::Done);
                }
                Phase::Done => return Ok(Step::Done),
            }
        }
    }

    fn trailer(&self, m: &OutMsg, verdict: u32) -> Trailer {
        Trailer {
            seq: m.seq,
            crc: if self.checksum {
                m.crc.clone().finalize()
            } else {
                0
            },
            verdict,
            saved_count: low32(m.saved),
        }
    }

    /// A short message: header, payload, padding and trailer as one store
    /// into the reader's memory; the producer index with it only where the
    /// reader polls it (shared memory) or once a quarter ring has passed.
    fn short(
        &mut self,
        link: &dyn Link,
        m: &mut OutMsg,
        data: &[u8],
        framed: usize,
    ) -> Result<(), UmpError> {
        let mut buf = [0u8; SHORT];
        let h = Header {
            seq: m.seq,
            len: m.len,
            short: true,
            reference: m.reference,
        };
        let uid = link.uid();
        buf[..HEADER].copy_from_slice(&h.encode(uid));
        buf[HEADER..HEADER + data.len()].copy_from_slice(data);
        if self.checksum {
            m.crc.update(data);
        }
        m.sent = m.len;
        let t = self.trailer(m, VERDICT_GOOD);
        buf[framed - TRAILER..framed].copy_from_slice(&t.encode(uid));
        let at = self.pos;
        self.pos += framed as u64;
        let prod = (!link.polled() || self.pos - self.prod_sent >= (link.out_size() / 4) as u64)
            .then_some(self.pos);
        if let Some(p) = prod {
            self.prod_sent = p;
        }
        put_wrapped(link, at, &buf[..framed], prod)
    }
}

/// One incoming message being read.
struct InMsg {
    len: u64,
    reference: bool,
    got: u64,
    seq: u32,
    crc: crc32fast::Hasher,
}

/// The reading end of one direction.
pub(crate) struct Reader {
    /// Stream position of the next byte to read (the consumer index).
    pos: u64,
    published: u64,
    /// The end of the last short message seen whole by polling its slot:
    /// bytes up to here have arrived, as if the producer index said so.
    landed: u64,
    next_seq: u32,
    cur: Option<InMsg>,
    checksum: bool,
    receiver_check: bool,
    /// Set once a damaged message was detected: UMP does not recover.
    failed: Option<Damage>,
}

/// What the reader holds now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    /// The message's payload bytes.
    pub(crate) len: u64,
    /// Bytes of it already handed to the caller.
    pub(crate) got: u64,
    /// Its payload is an outbuf reference.
    pub(crate) reference: bool,
}

impl Reader {
    pub(crate) fn new(checksum: bool, receiver_check: bool) -> Reader {
        Reader {
            pos: 0,
            published: 0,
            landed: 0,
            next_seq: 0,
            cur: None,
            checksum,
            receiver_check,
            failed: None,
        }
    }

    pub(crate) fn failed(&self) -> Option<Damage> {
        self.failed
    }

    fn fail(&mut self, d: Damage) -> Damage {
        self.failed = Some(d);
        d
    }

    fn avail(&self, link: &dyn Link) -> u64 {
        link.in_prod().max(self.landed).saturating_sub(self.pos)
    }

    /// Poll the slot at the head of the stream for a short message that
    /// has landed whole (see the module's doc); true if one has. Anything
    /// else there (an older message, a torn or lost header) is "not yet":
    /// the producer index says when something should be there.
    fn poll_slot(&mut self, link: &dyn Link) -> bool {
        let mut b = [0u8; HEADER];
        get_wrapped(link, self.pos, &mut b);
        let uid = link.uid();
        let Some(h) = Header::decode(&b, uid) else {
            return false;
        };
        if !h.short || h.seq != self.next_seq {
            return false;
        }
        let framed = framed(h.len);
        if framed > SHORT as u64 || framed > link.in_size() as u64 {
            // Not what a writer of this channel sends as one store.
            return false;
        }
        let last = (self.pos + framed - 8) % link.in_size() as u64;
        if Trailer::landed(link.in_word(to_usize(last)), h.seq, uid) {
            self.landed = self.pos + framed;
            return true;
        }
        false
    }

    /// The message at the head of the stream, if its header has arrived.
    pub(crate) fn peek(&mut self, link: &dyn Link) -> Result<Option<Pending>, Damage> {
        if let Some(d) = self.failed {
            return Err(d);
        }
        if let Some(m) = &self.cur {
            return Ok(Some(Pending {
                len: m.len,
                got: m.got,
                reference: m.reference,
            }));
        }
        if self.avail(link) < HEADER as u64 && !(link.polled() && self.poll_slot(link)) {
            return Ok(None);
        }
        let mut b = [0u8; HEADER];
        get_wrapped(link, self.pos, &mut b);
        let Some(h) = Header::decode(&b, link.uid()) else {
            return Err(self.fail(Damage::Framing { at: self.pos }));
        };
        if h.seq != self.next_seq {
            let d = Damage::Sequence {
                want: self.next_seq,
                got: h.seq,
            };
            return Err(self.fail(d));
        }
        self.pos += HEADER as u64;
        self.cur = Some(InMsg {
            len: h.len,
            reference: h.reference,
            got: 0,
            seq: h.seq,
            crc: crc32fast::Hasher::new(),
        });
        Ok(Some(Pending {
            len: h.len,
            got: 0,
            reference: h.reference,
        }))
    }

    /// The current message's whole payload, if it has all arrived, without
    /// taking it (an outbuf reference is looked at before it is consumed).
    pub(crate) fn look(&self, link: &dyn Link, buf: &mut [u8]) -> bool {
        let Some(m) = &self.cur else {
            return false;
        };
        if m.got != 0 || m.len != buf.len() as u64 || self.avail(link) < m.len {
            return false;
        }
        get_wrapped(link, self.pos, buf);
        true
    }

    /// Fail the channel's reading end: what a reference pointed to was
    /// damaged or lost.
    pub(crate) fn fail_with(&mut self, d: Damage) -> Damage {
        self.fail(d)
    }

    /// Copy what has arrived of the current message into `buf` (at most
    /// its remaining bytes); returns how many. Call [`Reader::peek`] first.
    pub(crate) fn read_some(&mut self, link: &dyn Link, buf: &mut [u8]) -> usize {
        let avail = self.avail(link);
        let Some(m) = &mut self.cur else {
            return 0;
        };
        let n = to_usize((m.len - m.got).min(avail).min(buf.len() as u64));
        if n == 0 {
            return 0;
        }
        get_wrapped(link, self.pos, &mut buf[..n]);
        if self.checksum {
            m.crc.update(&buf[..n]);
        }
        m.got += n as u64;
        self.pos += n as u64;
        n
    }

    /// Once the whole payload is read: take the trailer and check the
    /// message. `Ok(false)`: the trailer has not arrived yet.
    pub(crate) fn finish(&mut self, link: &dyn Link) -> Result<bool, Damage> {
        if let Some(d) = self.failed {
            return Err(d);
        }
        let Some(m) = &self.cur else {
            return Ok(false);
        };
        if m.got < m.len {
            return Ok(false);
        }
        let pad = padded(m.len) - m.len;
        if self.avail(link) < pad + TRAILER as u64 {
            return Ok(false);
        }
        let mut b = [0u8; TRAILER];
        get_wrapped(link, self.pos + pad, &mut b);
        let m = self.cur.take().expect("checked above");
        self.pos += pad + TRAILER as u64;
        self.next_seq = self.next_seq.wrapping_add(1);
        let verdict = self.check(link, &m, &b);
        if let Err(d) = verdict {
            return Err(self.fail(d));
        }
        Ok(true)
    }

    fn check(&self, link: &dyn Link, m: &InMsg, b: &[u8; TRAILER]) -> Result<(), Damage> {
        let Some(t) = Trailer::decode(b, link.uid()) else {
            return Err(Damage::Framing {
                at: self.pos - TRAILER as u64,
            });
        };
        if t.seq != m.seq {
            return Err(Damage::Sequence {
                want: m.seq,
                got: t.seq,
            });
        }
        // Receiver-only detection (seed 004): the count the writer saved
        // before the message against this node's count after it.
        if let Some(now) = link.error_count().filter(|_| self.receiver_check) {
            // The low 32 bits: the trailer's last word also carries the
            // landing tag.
            if low32(now) != t.saved_count {
                return Err(Damage::CountMoved {
                    saved: u64::from(t.saved_count),
                    now,
                });
            }
        }
        match t.verdict {
            VERDICT_GOOD => {}
            VERDICT_BAD => return Err(Damage::WriterCheck),
            _ => return Err(Damage::WriterFailed),
        }
        if self.checksum {
            let got = m.crc.clone().finalize();
            if got != t.crc {
                return Err(Damage::Checksum { want: t.crc, got });
            }
        }
        Ok(())
    }

    /// Tell the writer what has been consumed, when a quarter of the ring
    /// was, or `now`. (A writer then always finds three quarters of the
    /// ring free once the reader has caught up, so it never waits on a
    /// consumer index held back.)
    pub(crate) fn release(&mut self, link: &dyn Link, now: bool) -> Result<(), UmpError> {
        if self.pos != self.published
            && (now || self.pos - self.published >= (link.in_size() / 4) as u64)
        {
            link.publish_cons(self.pos)?;
            self.published = self.pos;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::link::{ShmLink, ShmPair, ShmRing};

    fn pair(size: usize) -> (ShmLink, ShmLink) {
        let p = Arc::new(ShmPair {
            a_to_b: ShmRing::new(size),
            b_to_a: ShmRing::new(size),
        });
        (ShmLink::new(p.clone(), true), ShmLink::new(p, false))
    }

    /// Write `msgs` from a to b through a ring of `size` bytes, one thread
    /// writing while the other reads, and return what was read.
    fn through(size: usize, fragment: usize, msgs: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let (a, b) = pair(size);
        let n = msgs.len();
        let w = std::thread::spawn(move || {
            let mut wr = Writer::new(fragment, true, false);
            for m in &msgs {
                let mut om = wr.start(m.len() as u64);
                while wr.step(&a, &mut om, m).unwrap() != Step::Done {
                    std::thread::yield_now();
                }
            }
        });
        let mut rd = Reader::new(true, true);
        let mut out = Vec::new();
        while out.len() < n {
            let Some(p) = rd.peek(&b).unwrap() else {
                std::thread::yield_now();
                continue;
            };
            let mut buf = vec![0u8; to_usize(p.len)];
            let mut got = 0;
            while got < buf.len() {
                got += rd.read_some(&b, &mut buf[got..]);
                rd.release(&b, false).unwrap();
                std::thread::yield_now();
            }
            while !rd.finish(&b).unwrap() {
                std::thread::yield_now();
            }
            rd.release(&b, true).unwrap();
            out.push(buf);
        }
        w.join().unwrap();
        out
    }

    #[test]
    fn messages_larger_than_the_ring_stream_through_it() {
        let msgs = vec![
            vec![],
            vec![1],
            (0..1000).map(|i: i32| i.to_le_bytes()[0]).collect(),
            (0..100_000)
                .map(|i: i32| (i * 7).to_le_bytes()[0])
                .collect(),
            vec![9; 13],
        ];
        assert_eq!(through(64, 24, msgs.clone()), msgs);
        assert_eq!(through(4096, 1024, msgs.clone()), msgs);
    }

    #[test]
    fn stale_bytes_where_a_header_should_be_are_damage_not_a_message() {
        let (a, b) = pair(256);
        // A producer index with nothing written: the ring holds zeros.
        a.put(0, &[0u8; 8], Some(64)).unwrap();
        let mut rd = Reader::new(true, true);
        assert_eq!(rd.peek(&b), Err(Damage::Framing { at: 0 }));
        // Failed for good.
        assert!(rd.peek(&b).is_err());
    }

    /// One direction of a Memory Channel-like link in one buffer: short
    /// messages go without their producer index and the reader polls.
    pub(crate) struct Polled {
        ring: std::sync::Mutex<Vec<u8>>,
        prod: std::sync::atomic::AtomicU64,
        cons: std::sync::atomic::AtomicU64,
        uid: u32,
    }

    impl Polled {
        pub(crate) fn new(size: usize, uid: u32) -> Polled {
            Polled {
                ring: std::sync::Mutex::new(vec![0; size]),
                prod: Default::default(),
                cons: Default::default(),
                uid,
            }
        }
    }

    impl Link for Polled {
        fn out_size(&self) -> usize {
            self.ring.lock().unwrap().len()
        }
        fn put(&self, at: usize, data: &[u8], prod: Option<u64>) -> Result<(), UmpError> {
            self.ring.lock().unwrap()[at..at + data.len()].copy_from_slice(data);
            if let Some(p) = prod {
                self.prod.store(p, std::sync::atomic::Ordering::SeqCst);
            }
            Ok(())
        }
        fn out_cons(&self) -> u64 {
            self.cons.load(std::sync::atomic::Ordering::SeqCst)
        }
        fn in_size(&self) -> usize {
            self.out_size()
        }
        fn get(&self, at: usize, buf: &mut [u8]) {
            buf.copy_from_slice(&self.ring.lock().unwrap()[at..at + buf.len()]);
        }
        fn in_prod(&self) -> u64 {
            self.prod.load(std::sync::atomic::Ordering::SeqCst)
        }
        fn publish_cons(&self, c: u64) -> Result<(), UmpError> {
            self.cons.store(c, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        }
        fn error_count(&self) -> Option<u64> {
            Some(0)
        }
        fn check_errors(&self) -> Result<Option<u64>, UmpError> {
            Ok(Some(0))
        }
        fn uid(&self) -> u32 {
            self.uid
        }
        fn polled(&self) -> bool {
            true
        }
        fn in_word(&self, at: usize) -> u64 {
            let mut b = [0u8; 8];
            self.get(at, &mut b);
            u64::from_le_bytes(b)
        }
    }

    fn send(wr: &mut Writer, link: &dyn Link, data: &[u8]) {
        let mut om = wr.start(data.len() as u64);
        assert_eq!(wr.step(link, &mut om, data).unwrap(), Step::Done);
    }

    fn take(rd: &mut Reader, link: &dyn Link) -> Result<Option<Vec<u8>>, Damage> {
        let Some(p) = rd.peek(link)? else {
            return Ok(None);
        };
        let mut buf = vec![0u8; to_usize(p.len)];
        assert_eq!(rd.read_some(link, &mut buf), buf.len());
        assert!(rd.finish(link)?);
        rd.release(link, true).unwrap();
        Ok(Some(buf))
    }

    #[test]
    fn a_short_message_is_one_store_and_its_slot_is_polled() {
        let link = Polled::new(1024, 7);
        let (mut wr, mut rd) = (Writer::new(256, true, false), Reader::new(true, true));
        assert_eq!(take(&mut rd, &link), Ok(None));
        for i in 0..100u32 {
            let msg = vec![i.to_le_bytes()[0]; to_usize(u64::from(i % 40))];
            send(&mut wr, &link, &msg);
            // The producer index goes only once a quarter ring has passed.
            assert!(link.in_prod() <= wr.pos && wr.pos - link.in_prod() < 256 + 512);
            assert_eq!(take(&mut rd, &link), Ok(Some(msg)), "message {i}");
            // Nothing more: the older messages around the ring stay old.
            assert_eq!(take(&mut rd, &link), Ok(None));
        }
        // A long message still streams with its producer index.
        let long = vec![3u8; 600];
        send(&mut wr, &link, &long);
        assert_eq!(link.in_prod(), wr.pos);
        assert_eq!(take(&mut rd, &link), Ok(Some(long)));
    }

    #[test]
    fn a_reused_ring_shows_no_message_of_the_old_channel() {
        let link = Polled::new(1024, 1);
        let mut wr = Writer::new(256, true, false);
        send(&mut wr, &link, b"old channel");
        // A new channel in the same memory: same numbers, same places.
        let new = Polled {
            ring: std::sync::Mutex::new(link.ring.lock().unwrap().clone()),
            prod: Default::default(),
            cons: Default::default(),
            uid: 2,
        };
        let mut rd = Reader::new(true, true);
        assert_eq!(take(&mut rd, &new), Ok(None));
        send(&mut Writer::new(256, true, false), &new, b"new channel");
        assert_eq!(take(&mut rd, &new), Ok(Some(b"new channel".to_vec())));
    }

    #[test]
    fn a_short_message_not_landed_whole_is_not_taken_and_a_loss_is_reported() {
        let link = Polled::new(1024, 3);
        let mut wr = Writer::new(256, true, false);
        send(&mut wr, &link, &[1; 16]);
        // The trailer's last word has not arrived yet: not a message.
        let saved = link.in_word(64 - 8);
        link.put(64 - 8, &[0; 8], None).unwrap();
        let mut rd = Reader::new(true, true);
        assert_eq!(take(&mut rd, &link), Ok(None));
        link.put(64 - 8, &saved.to_le_bytes(), None).unwrap();
        assert_eq!(take(&mut rd, &link), Ok(Some(vec![1; 16])));
        // A payload word lost: the stale bytes fail the checksum.
        send(&mut wr, &link, &[2; 16]);
        link.put(64 + 24, &[9; 8], None).unwrap();
        assert!(matches!(take(&mut rd, &link), Err(Damage::Checksum { .. })));
        // A lost header: nothing is taken until the producer index (sent
        // once a quarter ring has passed) says a message is there.
        let link = Polled::new(1024, 3);
        let mut wr = Writer::new(256, true, false);
        let mut rd = Reader::new(true, true);
        send(&mut wr, &link, &[5; 8]);
        link.put(0, &[0; 8], None).unwrap();
        assert_eq!(take(&mut rd, &link), Ok(None));
        while link.in_prod() == 0 {
            send(&mut wr, &link, &[6; 8]);
        }
        assert_eq!(take(&mut rd, &link), Err(Damage::Framing { at: 0 }));
    }

    #[test]
    fn a_changed_payload_byte_fails_the_checksum() {
        let (a, b) = pair(4096);
        let mut wr = Writer::new(1024, true, false);
        let data = vec![5u8; 2000];
        let mut om = wr.start(2000);
        assert_eq!(wr.step(&a, &mut om, &data).unwrap(), Step::Done);
        // A packet lost on the way leaves other bytes behind.
        a.put(100, &[6], None).unwrap();
        let mut rd = Reader::new(true, true);
        rd.peek(&b).unwrap().unwrap();
        let mut buf = vec![0u8; 2000];
        assert_eq!(rd.read_some(&b, &mut buf), 2000);
        assert!(matches!(rd.finish(&b), Err(Damage::Checksum { .. })));
    }
}
