//! Completions of an endpoint's operations, pushed to its bound queues:
//! a receive's (its length, tag, CQ data, source; FI_ETRUNC when it did
//! not fit), a send's, and those that failed.

use firmware_model::to_usize;

use super::{Ep, Recv, SendSpec, State, FI_ADDR_UNSPEC};
use crate::cq::{McComp, K_DATA, K_MSG, K_RECV, K_SEND, K_TAGGED};
use crate::wire::{Header, F_DATA};

impl Ep {
    pub(super) fn complete_recv(st: &State, r: &Recv, from: u64, h: &Header, err: i64) {
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

    pub(super) fn fail_recv(st: &State, r: &Recv, err: i64) {
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

    pub(super) fn complete_send(st: &State, s: &SendSpec, err: i64) {
        // An injected send has no context to complete, not even with an
        // error: Open MPI's MTL takes an error entry's op_context for its
        // request, and a null one crashed the rank (seen under drops). The
        // failure shows in the endpoint's later operations and on stderr.
        if s.inject {
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
    pub(super) fn deliver(st: &State, r: &Recv, from: u64, h: &Header, data: &[u8]) {
        let n = data.len().min(to_usize(r.spec.cap));
        if n > 0 {
            // SAFETY: the receive's owner gave `cap` writable bytes at
            // `buf`, valid until the receive completes (fi_recv's contract).
            let dst = unsafe { std::slice::from_raw_parts_mut(r.spec.buf as *mut u8, n) };
            dst.copy_from_slice(&data[..n]);
        }
        Self::complete_recv(st, r, from, h, 0);
    }
}
