//! Message buffers: what pvm_mkbuf makes and pvm_pk*/pvm_upk* fill and
//! empty, by number, with the active send and receive buffers.
//!
//! All tasks run on one architecture, so every encoding packs the bytes
//! of the values as they are in memory (PvmDataDefault does not convert
//! to XDR: nothing needs converting). PvmDataInPlace keeps a pointer to
//! the data and copies it when the message is sent, as PVM does: changes
//! made to the data between packing and sending are sent.

use std::collections::HashMap;
use std::ffi::c_int;

use crate::codes::*;

/// Data packed in place: copied from `ptr` into `data[at..at + len]` at
/// send time.
struct InPlace {
    at: usize,
    ptr: *const u8,
    len: usize,
}

/// One buffer.
#[derive(Default)]
pub struct Buf {
    pub encoding: c_int,
    pub data: Vec<u8>,
    /// Where the next unpack reads.
    pub pos: usize,
    /// For a received message: its source and tag.
    pub src: c_int,
    pub tag: c_int,
    in_place: Vec<InPlace>,
}

// SAFETY: the raw pointers of in-place data are only read when the task
// that packed them sends the buffer, under the task's lock; PVM's contract
// keeps them valid until then.
unsafe impl Send for Buf {}

impl Buf {
    pub fn new(encoding: c_int) -> Buf {
        Buf {
            encoding,
            ..Buf::default()
        }
    }

    pub fn received(src: c_int, tag: c_int, encoding: c_int, data: Vec<u8>) -> Buf {
        Buf {
            encoding,
            data,
            src,
            tag,
            ..Buf::default()
        }
    }

    /// Pack `count` elements of `size` bytes from `ptr`, every `stride`-th.
    ///
    /// # Safety
    /// `ptr` points to at least `(count - 1) * stride + 1` elements of
    /// `size` bytes, which (for PvmDataInPlace) stay valid until sent.
    pub unsafe fn pack(&mut self, ptr: *const u8, count: usize, stride: usize, size: usize) {
        if count == 0 {
            return;
        }
        if stride == 1 {
            let len = count * size;
            if self.encoding == DATA_IN_PLACE {
                self.in_place.push(InPlace {
                    at: self.data.len(),
                    ptr,
                    len,
                });
                self.data.resize(self.data.len() + len, 0);
            } else {
                // SAFETY: the caller's contract: count elements from ptr.
                self.data
                    .extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, len) });
            }
            return;
        }
        for i in 0..count {
            // SAFETY: element i * stride is inside the caller's array.
            let e = unsafe { std::slice::from_raw_parts(ptr.add(i * stride * size), size) };
            self.data.extend_from_slice(e);
        }
    }

    /// Unpack `count` elements of `size` bytes to `ptr`, every
    /// `stride`-th; PvmNoData past the end (nothing is written then).
    ///
    /// # Safety
    /// `ptr` points to writable room for `(count - 1) * stride + 1`
    /// elements of `size` bytes.
    pub unsafe fn unpack(
        &mut self,
        ptr: *mut u8,
        count: usize,
        stride: usize,
        size: usize,
    ) -> c_int {
        let len = count * size;
        if self.data.len() - self.pos < len {
            return PVM_NO_DATA;
        }
        let src = &self.data[self.pos..self.pos + len];
        if stride == 1 {
            // SAFETY: the caller's contract: room for len bytes at ptr.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), ptr, len) };
        } else {
            for i in 0..count {
                // SAFETY: element i * stride is inside the caller's array.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src.as_ptr().add(i * size),
                        ptr.add(i * stride * size),
                        size,
                    )
                };
            }
        }
        self.pos += len;
        PVM_OK
    }

    /// The bytes to send: in-place data copied in now.
    pub fn bytes(&mut self) -> &[u8] {
        for p in &self.in_place {
            // SAFETY: PVM's contract for PvmDataInPlace: the packed data is
            // valid until the message is sent; `at..at + len` was reserved
            // for it when packed.
            let src = unsafe { std::slice::from_raw_parts(p.ptr, p.len) };
            self.data[p.at..p.at + p.len].copy_from_slice(src);
        }
        &self.data
    }
}

/// The task's buffers.
#[derive(Default)]
pub struct Buffers {
    bufs: HashMap<c_int, Buf>,
    next: c_int,
    pub sbuf: c_int,
    pub rbuf: c_int,
}

impl Buffers {
    pub fn make(&mut self, b: Buf) -> c_int {
        self.next += 1;
        self.bufs.insert(self.next, b);
        self.next
    }

    pub fn get(&mut self, id: c_int) -> Option<&mut Buf> {
        self.bufs.get_mut(&id)
    }

    /// pvm_freebuf: the active buffer it was is then none.
    pub fn free(&mut self, id: c_int) -> c_int {
        if id < 0 {
            return PVM_BAD_PARAM;
        }
        if self.bufs.remove(&id).is_none() {
            return PVM_NO_SUCH_BUF;
        }
        if self.sbuf == id {
            self.sbuf = 0;
        }
        if self.rbuf == id {
            self.rbuf = 0;
        }
        PVM_OK
    }

    /// pvm_initsend: a fresh active send buffer; the old one is freed.
    pub fn init_send(&mut self, encoding: c_int) -> c_int {
        if !(DATA_DEFAULT..=DATA_IN_PLACE).contains(&encoding) {
            return PVM_BAD_PARAM;
        }
        if self.sbuf > 0 {
            self.free(self.sbuf);
        }
        self.sbuf = self.make(Buf::new(encoding));
        self.sbuf
    }

    /// A received message becomes the active receive buffer; the old one
    /// is freed (pvm_recv's rule).
    pub fn set_received(&mut self, b: Buf) -> c_int {
        if self.rbuf > 0 {
            self.free(self.rbuf);
        }
        self.rbuf = self.make(b);
        self.rbuf
    }

    /// pvm_setsbuf / pvm_setrbuf: the old active one's id (0: none).
    pub fn set_active(&mut self, id: c_int, send: bool) -> c_int {
        if id < 0 || (id > 0 && !self.bufs.contains_key(&id)) {
            return if id < 0 {
                PVM_BAD_PARAM
            } else {
                PVM_NO_SUCH_BUF
            };
        }
        let slot = if send { &mut self.sbuf } else { &mut self.rbuf };
        std::mem::replace(slot, id)
    }

    /// The active send (or receive) buffer.
    pub fn active(&mut self, send: bool) -> Result<&mut Buf, c_int> {
        let id = if send { self.sbuf } else { self.rbuf };
        if id <= 0 {
            return Err(PVM_NO_BUF);
        }
        self.bufs.get_mut(&id).ok_or(PVM_NO_BUF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_values_round_trip() {
        let mut b = Buf::new(DATA_DEFAULT);
        let a: [i32; 6] = [1, 2, 3, 4, 5, 6];
        // SAFETY: 3 elements at stride 2 lie inside a's 6.
        unsafe { b.pack(a.as_ptr().cast(), 3, 2, 4) };
        assert_eq!(b.data.len(), 12);
        let mut out = [0i32; 6];
        // SAFETY: the same bounds, writable.
        let r = unsafe { b.unpack(out.as_mut_ptr().cast(), 3, 2, 4) };
        assert_eq!(r, PVM_OK);
        assert_eq!(out, [1, 0, 3, 0, 5, 0]);
        // SAFETY: one element; none is left.
        let r = unsafe { b.unpack(out.as_mut_ptr().cast(), 1, 1, 4) };
        assert_eq!(r, PVM_NO_DATA);
    }

    #[test]
    fn in_place_data_is_taken_when_sent() {
        let mut b = Buf::new(DATA_IN_PLACE);
        let v = std::cell::Cell::new([7u8; 4]);
        // SAFETY: 4 bytes, alive until bytes() below.
        unsafe { b.pack(v.as_ptr().cast(), 4, 1, 1) };
        v.set([9, 7, 7, 7]);
        assert_eq!(b.bytes(), &[9, 7, 7, 7]);
    }

    #[test]
    fn recv_frees_the_old_receive_buffer_and_initsend_the_old_send_buffer() {
        let mut bs = Buffers::default();
        let r1 = bs.set_received(Buf::received(1, 2, 0, vec![]));
        let r2 = bs.set_received(Buf::received(1, 2, 0, vec![]));
        assert!(bs.get(r1).is_none() && bs.get(r2).is_some());
        let s1 = bs.init_send(DATA_RAW);
        let s2 = bs.init_send(DATA_RAW);
        assert!(bs.get(s1).is_none() && bs.sbuf == s2);
        assert_eq!(bs.init_send(9), PVM_BAD_PARAM);
        assert_eq!(bs.free(s2), PVM_OK);
        assert_eq!(bs.active(true).err(), Some(PVM_NO_BUF));
    }
}
