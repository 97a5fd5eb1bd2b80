//! The control queue (docs/device.md section 14): one request at a time,
//! answered in a 16-byte response, and the requests built on it: the page
//! control table (SET_PCT, GET_PCT), GET_STATUS and RESET.

use firmware_model::abi::{
    self, CtrlRequest, CtrlResponse, Status, CTRL_RESPONSE_SIZE, FRAME_SIZE,
    MAX_PCT_PAGES_PER_REQUEST,
};
use log::{trace, warn};

use super::{wait, Adapter};
use crate::error::{Error, Result};
use crate::transport::Transport;
use crate::virtqueue::Buffer;

impl<T: Transport> Adapter<T> {
    /// Send a control request and wait for the answer. A status other than OK
    /// is returned in the response, not as an error.
    pub fn ctrl(&mut self, req: &CtrlRequest) -> Result<CtrlResponse> {
        if let Some(t) = self.ctrl_pending {
            match self.ctrl.poll_used()? {
                Some(u) if u.token == t => {
                    warn!("control: a request that timed out completed late");
                    self.ctrl_pending = None;
                }
                Some(u) => {
                    return Err(Error::StrayCompletion {
                        queue: "control",
                        chain: u.token.index(),
                    })
                }
                None => return Err(Error::Busy("the control queue")),
            }
        }
        let bytes = req.encode();
        if bytes.len() > self.ctrl_req.len() {
            return Err(Error::RequestTooLarge {
                len: bytes.len(),
                max: self.ctrl_req.len(),
            });
        }
        self.ctrl_req.write(0, &bytes)?;
        self.ctrl_resp.fill(0, CTRL_RESPONSE_SIZE, 0xff)?;
        let token = self.ctrl.add(
            &[Buffer::prefix(&self.ctrl_req, bytes.len())?],
            &[Buffer::of(&self.ctrl_resp)?],
        )?;
        self.ctrl.kick_prepare()?;
        self.transport.notify(abi::CTRL_QUEUE)?;
        let ctrl = &mut self.ctrl;
        let used = match wait(self.opts.spin, self.opts.timeout, "control request", || {
            Ok(ctrl.poll_used()?)
        }) {
            Ok(u) => u,
            Err(e) => {
                if matches!(e, Error::Timeout { .. }) {
                    self.ctrl_pending = Some(token);
                }
                return Err(e);
            }
        };
        if used.token != token {
            return Err(Error::StrayCompletion {
                queue: "control",
                chain: used.token.index(),
            });
        }
        if (used.len as usize) < CTRL_RESPONSE_SIZE {
            return Err(Error::ShortAnswer {
                what: "control request",
                len: used.len,
                need: CTRL_RESPONSE_SIZE,
            });
        }
        let mut b = [0u8; CTRL_RESPONSE_SIZE];
        self.ctrl_resp.read(0, &mut b)?;
        let resp = CtrlResponse::from_bytes(&b).ok_or(Error::ShortAnswer {
            what: "control request",
            len: used.len,
            need: CTRL_RESPONSE_SIZE,
        })?;
        trace!("control {req:?} -> {resp:?}");
        Ok(resp)
    }

    /// A control request that must succeed: a refusal is an error.
    pub(super) fn ctrl_ok(
        &mut self,
        request: &'static str,
        req: &CtrlRequest,
    ) -> Result<CtrlResponse> {
        let r = self.ctrl(req)?;
        if r.status != Status::Ok as u32 {
            return Err(Error::Refused {
                request,
                status: r.status,
                detail: r.detail,
            });
        }
        Ok(r)
    }

    /// Program `count` PCT entries from `first_page` with the entry word
    /// `entry` (`firmware_model::PctEntry::to_bits`). With receive enabled,
    /// `frames` holds `count * page_size / 4096` frame addresses (see
    /// [`ReceiveFrames::frames`]); otherwise it is empty.
    ///
    /// More than `MAX_PCT_PAGES_PER_REQUEST` pages go as several requests,
    /// in order; if the device refuses one, the pages before it stay
    /// programmed and the error names the first page of the refused piece.
    pub fn set_pct(
        &mut self,
        first_page: u32,
        count: u32,
        entry: u32,
        frames: &[u64],
    ) -> Result<()> {
        let per_page = (self.regs.page_size / FRAME_SIZE).max(1) as usize;
        let mismatched = !frames.is_empty() && frames.len() != count as usize * per_page;
        // A wrong frame count goes as one request: the device judges it
        // (Malformed, nothing changed).
        let step = if mismatched {
            count.max(1)
        } else {
            MAX_PCT_PAGES_PER_REQUEST
        };
        let mut done = 0u32;
        loop {
            let n = (count - done).min(step);
            let piece = if frames.is_empty() || mismatched {
                frames.to_vec()
            } else {
                frames[done as usize * per_page..(done + n) as usize * per_page].to_vec()
            };
            let first = first_page
                .checked_add(done)
                .ok_or(Error::PageRange { first_page, count })?;
            self.ctrl_ok(
                "SET_PCT",
                &CtrlRequest::SetPct {
                    first_page: first,
                    count: n,
                    entry,
                    frames: piece,
                },
            )?;
            done += n;
            if done >= count {
                return Ok(());
            }
        }
    }

    /// A PCT entry word, and whether receive frames are bound to the page.
    pub fn get_pct(&mut self, page: u32) -> Result<(u32, bool)> {
        let r = self.ctrl_ok("GET_PCT", &CtrlRequest::GetPct { page })?;
        let word = u32::try_from(r.value).map_err(|_| Error::BadAnswer {
            what: "GET_PCT",
            value: r.value,
        })?;
        Ok((word, r.detail != 0))
    }

    /// The cluster error count and this adapter's error status word, asked of
    /// the device (the status page is cheaper).
    pub fn get_status(&mut self) -> Result<(u64, u32)> {
        let r = self.ctrl_ok("GET_STATUS", &CtrlRequest::GetStatus)?;
        Ok((r.value, r.detail))
    }

    /// Disable every PCT entry, unbind every frame, clear the error status.
    pub fn reset(&mut self) -> Result<()> {
        self.ctrl_ok("RESET", &CtrlRequest::Reset)?;
        Ok(())
    }
}
