//! Tagged matching with MPI's rules (seed 004, "Digital MPI": the device
//! matches in the order messages arrive on each channel, so MPI's order per
//! sender holds): an arriving header against the posted receives in the
//! order they were posted; a new receive against the unexpected messages,
//! oldest first; FI_PEEK, FI_CLAIM and FI_DISCARD.

use super::{Ep, Incoming, Recv, RecvSpec, State, Target, Unexp, FI_ADDR_UNSPEC};
use crate::cq::{McComp, K_DATA, K_MSG, K_RECV, K_TAGGED};
use crate::wire::{Header, F_DATA};

impl Recv {
    fn matches(&self, from: u64, h: &Header) -> bool {
        self.from.is_none_or(|f| f == from)
            && self.spec.tagged == h.tagged()
            && (!h.tagged() || (h.tag ^ self.spec.tag) & !self.spec.ignore == 0)
    }
}

impl Ep {
    /// A message arrived (its header, and the payload if inline) from
    /// `from`: match it or keep it.
    pub(super) fn arrived(st: &mut State, from: u64, h: Header, inline: &[u8]) -> Option<Incoming> {
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
}
