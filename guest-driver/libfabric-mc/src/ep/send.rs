//! fi_send and its kin: a header and a payload inline up to 1 KiB in one
//! UMP message, or the header and then the user's buffer as a UMP message
//! of its own, written by UMP's background writer straight from it (one
//! copy, into the receiver's ring). A send to the endpoint itself is
//! matched here, without a channel.

use std::sync::Arc;
use std::time::Duration;

use firmware_model::to_usize;

use super::{Ep, SendSpec, Sent, Target, MAX_MSG};
use crate::wire::{Header, F_DATA, F_SEPARATE, F_TAGGED, HEADER, INLINE};

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

impl Ep {
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
            unsafe { std::slice::from_raw_parts(s.buf as *const u8, to_usize(s.len)) }
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
                        .nbwrite(ch, Arc::new(UserBuf(s.buf as *const u8, to_usize(s.len))))
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
}
