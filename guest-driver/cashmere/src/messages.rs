//! Request/reply through the nodes' mailboxes (seed 002 s.5), the one
//! message layer every variant uses: a request is one 8-byte word
//! (`seq << 32 | page`) in the receiver's request page, posted after the
//! message's body if it has one (a diff, CSM-MS); a reply is the data, then
//! a 16-byte header (sequence, page, checksum) in the requester's mailbox.
//! Per-source FIFO and packet-by-packet delivery make a receiver that sees
//! the word or the header see everything posted before it; the checksum
//! catches a reply whose packets were lost, and the requester asks again.

use std::sync::Arc;

use super::mailbox::Mailboxes;
use super::CsmError;

/// What a request asks for: its word's low 32 bits (`seq << 32 | word`).
/// Pages are fewer than 2^28; the kind is in the top bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Nothing: the Table II null message.
    Null,
    /// Empty your write-notice bins (the sender's is full; seed 002 s.4.3).
    Drain,
    /// The page (the home's master copy).
    Page(u32),
    /// Apply the diff whose body is in the sender's message slot (CSM-MS),
    /// then acknowledge.
    Diff(u32),
    /// Become the page's home (CSM-MS-Mg, seed 000 s.2.3.2).
    Migrate(u32),
    /// To the page's directory manager (message-based metadata, CSM-S):
    /// the page's home, which becomes the asker if the page has none
    /// (first touch). The reply carries the home (8 bytes).
    Home(u32),
    /// To the page's home (message-based metadata): the asker no longer
    /// holds a copy (seed 000 s.2.3.1.3: "an explicit directory message is
    /// needed only when a page is invalidated").
    Invalid(u32),
    /// Take the write notices in the sender's message slot: this many
    /// pages (message-based metadata, seed 002 s.4.3's Flush).
    Notices(u32),
}

const NULL: u32 = u32::MAX;
const DRAIN: u32 = u32::MAX - 1;
const DIFF: u32 = 1 << 31;
const MIGRATE: u32 = 1 << 30;
/// The kinds in the top four bits below `MIGRATE` (the page field is 28 bits).
const HOME: u32 = 1 << 28;
const INVALID: u32 = 2 << 28;
const NOTICES: u32 = 3 << 28;
/// In a reply to `Migrate`: refused (the home is writing the page).
pub const DENIED: u32 = 1 << 29;
/// In a `Migrate` request, bits 28-29: which try of the same request (the
/// same sequence number) this is, 0 for the first. A migration request is
/// asked again under its own sequence number, so the node asked can tell
/// it from a new one and give the same answer again (`requests`).
const TRY_SHIFT: u32 = 28;
/// In a reply to `Migrate`: granted, and the reply carries the page (the
/// home's Stale vector says the new home's copy is out of date).
pub const WITH_PAGE: u32 = 1 << 28;
/// The largest page number a request can carry.
pub const MAX_PAGE: u32 = (1 << 28) - 1;
/// A reply word saying "not the home here; ask node n" (low bits).
const MOVED: u32 = 0xfffe_0000;

impl Request {
    pub fn word(self) -> u32 {
        match self {
            Request::Null => NULL,
            Request::Drain => DRAIN,
            Request::Page(p) => p,
            Request::Diff(p) => DIFF | p,
            Request::Migrate(p) => MIGRATE | p,
            Request::Home(p) => HOME | p,
            Request::Invalid(p) => INVALID | p,
            Request::Notices(n) => NOTICES | n,
        }
    }

    pub fn decode(w: u32) -> Request {
        match w {
            NULL => Request::Null,
            DRAIN => Request::Drain,
            w if w & DIFF != 0 => Request::Diff(w & MAX_PAGE),
            w if w & MIGRATE != 0 => Request::Migrate(w & MAX_PAGE),
            w => match w & !MAX_PAGE {
                HOME => Request::Home(w & MAX_PAGE),
                INVALID => Request::Invalid(w & MAX_PAGE),
                NOTICES => Request::Notices(w & MAX_PAGE),
                _ => Request::Page(w),
            },
        }
    }

    /// Whether a try that got no whole answer is made again under the same
    /// sequence number (a migration request: its answer moves the home, so
    /// it must be given once, and again the same), or as a new request.
    pub fn retried_in_place(self) -> bool {
        matches!(self, Request::Migrate(_))
    }

    /// The word of try `n` (0 the first) of a request retried in place:
    /// the try bits change, so the node asked sees a new request word.
    pub fn try_word(self, n: u32) -> u32 {
        match self {
            Request::Migrate(_) if n > 0 => self.word() | ((n - 1) % 3 + 1) << TRY_SHIFT,
            _ => self.word(),
        }
    }

    /// The page it is about, if any.
    pub fn page(self) -> Option<u32> {
        match self {
            Request::Null | Request::Drain | Request::Notices(_) => None,
            Request::Page(p)
            | Request::Diff(p)
            | Request::Migrate(p)
            | Request::Home(p)
            | Request::Invalid(p) => Some(p),
        }
    }

    /// Whether the request is about the page at its home (a node that is
    /// no longer the home sends the asker on): all but the question to the
    /// page's directory manager, which answers wherever the home is.
    pub fn for_home(self) -> bool {
        !matches!(self, Request::Home(_))
    }

    /// Whether the reply `reply` carries data: the page, the home (a
    /// `Home` reply), or what the variant's metadata piggybacks on a diff's
    /// acknowledgement (the sharing set with message-based metadata,
    /// nothing in CSM-MS: the requester's buffer is then empty).
    pub fn reply_has_data(self, reply: u32) -> bool {
        match self {
            Request::Diff(_) | Request::Home(_) => true,
            _ => self.reply_has_page(reply),
        }
    }

    /// Whether the reply word `reply` comes with the page's data.
    pub fn reply_has_page(self, reply: u32) -> bool {
        match self {
            Request::Page(_) => true,
            Request::Migrate(_) => reply & WITH_PAGE != 0 && reply & DENIED == 0,
            _ => false,
        }
    }
}

/// The reply word that sends the requester to node `home`.
pub fn moved(home: u32) -> u32 {
    MOVED | home
}

/// The node a reply word sends the requester to, if it is a "moved" reply.
pub fn moved_to(reply: u32) -> Option<u32> {
    (reply & 0xffff_0000 == MOVED && reply & 0xffff < 64).then_some(reply & 0xffff)
}

/// Where a reply lands in the requester's mailbox: the one reply area (page
/// replies and every other answer), or the replier's acknowledgement slot
/// (answers to diff messages, several of which may be in flight to
/// different homes at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplySlot {
    Reply,
    /// The acknowledgement slot of this node (the replier's own).
    Ack(u32),
}

impl ReplySlot {
    /// Where a reply to `req` from node `replier` goes.
    pub fn for_request(req: Request, replier: u32) -> ReplySlot {
        match req {
            Request::Diff(_) => ReplySlot::Ack(replier),
            _ => ReplySlot::Reply,
        }
    }

    /// (data, header) offsets in a mailbox.
    /// Offset of the slot's header (sequence and word) in a mailbox.
    pub(crate) fn header_offset(self, at: &crate::space::MailboxLayout) -> usize {
        self.at(at).1
    }

    fn at(self, at: &crate::space::MailboxLayout) -> (usize, usize) {
        match self {
            ReplySlot::Reply => (at.reply_data(), at.reply_header()),
            ReplySlot::Ack(n) => (at.ack(n) + 16, at.ack(n)),
        }
    }
}

pub struct MailRequests {
    me: u32,
    mail: Arc<Mailboxes>,
}

impl MailRequests {
    pub fn new(me: u32, mail: Arc<Mailboxes>) -> MailRequests {
        MailRequests { me, mail }
    }

    /// Ask node `home` for `page` (or a null, drain or diff request).
    pub fn send_request(&self, home: u32, seq: u32, page: u32) -> Result<(), CsmError> {
        let w = (u64::from(seq) << 32) | u64::from(page);
        // One aligned 8-byte store: one packet, whole or not at all.
        self.mail.post_u64(home, self.mail.at().request(self.me), w)
    }

    /// The newest request from node `from`: (sequence, page).
    pub fn poll_request(&self, from: u32) -> (u32, u32) {
        let w = self.mail.load_u64(self.mail.at().request(from));
        #[allow(
            clippy::cast_possible_truncation,
            reason = "the word's two halves: sequence above, page below"
        )]
        let halves = ((w >> 32) as u32, w as u32);
        halves
    }

    /// Answer request `seq` of node `to`, with data or none, into `slot`
    /// of its mailbox.
    pub fn send_reply(
        &self,
        to: u32,
        slot: ReplySlot,
        seq: u32,
        page: u32,
        data: Option<&[u8]>,
    ) -> Result<(), CsmError> {
        let d = data.unwrap_or(&[]);
        debug_assert!(slot == ReplySlot::Reply || d.len() <= crate::space::ACK_DATA);
        let (data_at, header_at) = slot.at(self.mail.at());
        let header = ReplyHeader {
            seq,
            page,
            checksum: checksum(seq, page, d),
        }
        .encode();
        // Data first, then the header: a requester that sees the header has
        // every earlier packet of this node's (per-source FIFO, packet by
        // packet). The header is one aligned 16-byte store, one packet.
        if !d.is_empty() {
            self.mail.post(to, data_at, d)?;
        }
        self.mail.post(to, header_at, &header)
    }

    /// Sequence number of the newest reply to this node in `slot`.
    pub fn reply_seq(&self, slot: ReplySlot) -> u32 {
        self.mail.load_u32(slot.at(self.mail.at()).1)
    }

    /// The word the newest reply in `slot` answers (its request's, or a
    /// "moved" or migration answer).
    pub fn reply_word(&self, slot: ReplySlot) -> u32 {
        self.mail.load_u32(slot.at(self.mail.at()).1 + 4)
    }

    /// Copy out the newest reply's data in `slot` and say whether it is
    /// reply `seq` for `page`, whole.
    pub fn read_reply(
        &self,
        slot: ReplySlot,
        seq: u32,
        page: u32,
        out: &mut [u8],
    ) -> Result<bool, CsmError> {
        let (data_at, header_at) = slot.at(self.mail.at());
        // Data before header: a stray late reply landing in between makes
        // the checksum disagree, never passes for this one.
        self.mail.read(data_at, out)?;
        let mut h = [0u8; 16];
        self.mail.read(header_at, &mut h)?;
        let h = ReplyHeader::decode(&h);
        Ok(h.seq == seq && h.page == page && h.checksum == checksum(seq, page, out))
    }
}

/// The first 16 bytes of a reply buffer.
struct ReplyHeader {
    seq: u32,
    page: u32,
    checksum: u64,
}

impl ReplyHeader {
    fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&self.seq.to_le_bytes());
        b[4..8].copy_from_slice(&self.page.to_le_bytes());
        b[8..].copy_from_slice(&self.checksum.to_le_bytes());
        b
    }

    fn decode(b: &[u8; 16]) -> ReplyHeader {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        ReplyHeader {
            seq: u32_at(0),
            page: u32_at(4),
            checksum: u64::from(u32_at(8)) | u64::from(u32_at(12)) << 32,
        }
    }
}

/// End-to-end check of a reply: the Memory Channel delivers a packet whole
/// or not at all (a corrupted one is discarded by the CRC), so what a lost
/// packet leaves behind is stale bytes from an earlier reply. Any
/// well-mixed hash over the sequence, the page and the data tells them apart.
pub(crate) fn checksum(seq: u32, page: u32, data: &[u8]) -> u64 {
    let mix = |h: u64, w: u64| {
        let h = (h ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 32)
    };
    let mut h = mix(
        0x9e37_79b9_7f4a_7c15,
        u64::from(seq) << 32 | u64::from(page),
    );
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        h = mix(
            h,
            u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]),
        );
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(b) ^ (rest.len() as u64) << 56);
    }
    mix(h, data.len() as u64)
}

/// The request/reply and echo methods of `DataPropagation` for a variant
/// whose requests and replies go through a [`MailRequests`] field and whose
/// echo through its `Mailboxes` field: CSM-DMS and CSM-MS differ in how
/// diffs and master copies move, not in these.
macro_rules! mail_request_methods {
    ($requests:ident, $mail:ident) => {
        fn send_request(&self, home: u32, seq: u32, page: u32) -> Result<(), CsmError> {
            self.$requests.send_request(home, seq, page)
        }

        fn poll_request(&self, from: u32) -> (u32, u32) {
            self.$requests.poll_request(from)
        }

        fn send_reply(
            &self,
            to: u32,
            slot: ReplySlot,
            seq: u32,
            page: u32,
            data: Option<&[u8]>,
        ) -> Result<(), CsmError> {
            self.$requests.send_reply(to, slot, seq, page, data)
        }

        fn reply_seq(&self, slot: ReplySlot) -> u32 {
            self.$requests.reply_seq(slot)
        }

        fn reply_word(&self, slot: ReplySlot) -> u32 {
            self.$requests.reply_word(slot)
        }

        fn read_reply(
            &self,
            slot: ReplySlot,
            seq: u32,
            page: u32,
            out: &mut [u8],
        ) -> Result<bool, CsmError> {
            self.$requests.read_reply(slot, seq, page, out)
        }

        fn post_echo(&self) -> Result<u64, CsmError> {
            self.$mail.post_echo()
        }

        fn echo_seen(&self) -> u64 {
            self.$mail.echo_seen()
        }

        fn echo_posted(&self) -> u64 {
            self.$mail.echo_posted()
        }
    };
}
pub(crate) use mail_request_methods;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_words_round_trip_and_moved_replies_are_apart() {
        for r in [
            Request::Null,
            Request::Drain,
            Request::Page(0),
            Request::Page(MAX_PAGE),
            Request::Diff(7),
            Request::Migrate(MAX_PAGE),
            Request::Home(0),
            Request::Home(MAX_PAGE),
            Request::Invalid(9),
            Request::Notices(1),
            Request::Notices(MAX_PAGE),
        ] {
            assert_eq!(Request::decode(r.word()), r);
            assert_eq!(moved_to(r.word()), None);
            for n in 0..7 {
                assert_eq!(Request::decode(r.try_word(n)), r);
                // Each try's word differs from the one before.
                if n > 0 && r.retried_in_place() {
                    assert_ne!(r.try_word(n), r.try_word(n - 1));
                }
            }
        }
        assert_eq!(moved_to(moved(3)), Some(3));
        let m = Request::Migrate(5);
        assert!(m.reply_has_page(m.word() | WITH_PAGE));
        assert!(!m.reply_has_page(m.word()));
        assert!(!m.reply_has_page(m.word() | DENIED));
    }

    #[test]
    fn the_checksum_tells_stale_data_and_other_requests_apart() {
        let page: Vec<u8> = (0..8192u32).map(|i| (i * 7).to_le_bytes()[0]).collect();
        let c = checksum(5, 3, &page);
        assert_eq!(c, checksum(5, 3, &page));
        assert_ne!(c, checksum(6, 3, &page), "another request");
        assert_ne!(c, checksum(5, 4, &page), "another page");
        for lost in [0usize, 32, 8160] {
            let mut stale = page.clone();
            stale[lost..lost + 32].fill(0);
            assert_ne!(c, checksum(5, 3, &stale), "packet at {lost} lost");
        }
        assert_ne!(checksum(1, 0, &[]), checksum(1, 0, &[0]));
    }

    #[test]
    fn a_reply_header_round_trips() {
        let h = ReplyHeader {
            seq: 0xdead_beef,
            page: 42,
            checksum: 0x0123_4567_89ab_cdef,
        };
        let d = ReplyHeader::decode(&h.encode());
        assert_eq!((d.seq, d.page, d.checksum), (h.seq, h.page, h.checksum));
    }
}
