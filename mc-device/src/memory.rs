//! Guest memory access for DMA: range checks and copies between guests.
//!
//! Every address here comes from a guest, so nothing is trusted: a range that is
//! not wholly inside guest RAM is refused, never partly written.

use firmware_model::config::{DEFAULT_MAX_PAYLOAD, MAX_PAYLOAD_LIMIT};
use firmware_model::{saturating_u32, NodeId};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

pub(crate) type Mem = GuestMemoryMmap<()>;
/// A snapshot of a guest's memory map, held for one batch of work.
pub(crate) type MemGuard = vm_memory::GuestMemoryLoadGuard<Mem>;

/// A contiguous run of guest-physical memory.
pub(crate) type Piece = (u64, u32);

/// Every node's guest memory for one pass of the hub, taken once at its
/// start (`DeviceState::memory_snapshot`); `None` where no guest is attached.
pub(crate) struct Mems(pub(crate) Vec<Option<MemGuard>>);

impl Mems {
    pub(crate) fn get(&self, node: NodeId) -> Option<&MemGuard> {
        self.0.get(node.index()).and_then(Option::as_ref)
    }
}

/// `len` bytes at `gpa` lie wholly inside guest RAM.
pub(crate) fn range_ok(mem: &Mem, gpa: u64, len: usize) -> bool {
    if gpa.checked_add(len as u64).is_none() {
        return false;
    }
    let mut total = 0usize;
    for s in mem.get_slices(GuestAddress(gpa), len) {
        match s {
            Ok(s) => total += s.len(),
            Err(_) => return false,
        }
    }
    total == len
}

/// The contiguous runs of a scatter list covering `[off, off + len)`.
pub(crate) fn runs(list: &[Piece], off: u64, len: u64) -> Vec<Piece> {
    if !covers(list, off, len) {
        return Vec::new();
    }
    Runs::new(list, off, len).collect()
}

/// `[off, off + len)` lies within the scatter list.
pub(crate) fn covers(list: &[Piece], off: u64, len: u64) -> bool {
    let total: u64 = list.iter().map(|p| u64::from(p.1)).sum();
    off.checked_add(len).is_some_and(|end| end <= total)
}

/// The contiguous runs of a scatter list covering `[off, off + len)`, one at
/// a time (nothing allocated: this is on the hub's path for every store).
pub(crate) struct Runs<'a> {
    list: std::slice::Iter<'a, Piece>,
    off: u64,
    len: u64,
}

impl<'a> Runs<'a> {
    pub(crate) fn new(list: &'a [Piece], off: u64, len: u64) -> Runs<'a> {
        Runs {
            list: list.iter(),
            off,
            len,
        }
    }
}

impl Iterator for Runs<'_> {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        while self.len > 0 {
            let &(gpa, plen) = self.list.next()?;
            let plen = u64::from(plen);
            if self.off >= plen {
                self.off -= plen;
                continue;
            }
            let n = (plen - self.off).min(self.len);
            // At most `plen`, a u32.
            let piece = (gpa + self.off, saturating_u32(n));
            self.off = 0;
            self.len -= n;
            return Some(piece);
        }
        None
    }
}

/// Bytes from `off` to the next packet boundary (packets are cut at multiples
/// of `packet` in global address space, so in page offsets too), at most
/// `rest`.
fn to_boundary(off: u64, packet: u64, rest: usize) -> usize {
    usize::try_from(packet - off % packet).map_or(rest, |b| b.min(rest))
}

/// Copy `len` bytes from guest `src` to guest `dst` packet by packet, front
/// to back: one copy per packet, so a reader of `dst` that sees a packet's
/// bytes also sees every earlier packet's (x86-64 keeps the stores of
/// separate copies in program order; elsewhere a release fence does).
/// `dst_off` is the page offset of `dst_gpa`, which places the packet
/// boundaries. Straight between the mappings when both ranges are
/// contiguous in host memory, through a bounce buffer otherwise.
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_between(
    src: &Mem,
    src_gpa: u64,
    dst: &Mem,
    dst_gpa: u64,
    len: usize,
    dst_off: u64,
    packet: u32,
) -> bool {
    let packet = u64::from(packet.max(1));
    if let (Ok(s), Ok(d)) = (
        src.get_slice(GuestAddress(src_gpa), len),
        dst.get_slice(GuestAddress(dst_gpa), len),
    ) {
        if s.len() < len || d.len() < len {
            return false;
        }
        let (from, to) = (s.ptr_guard(), d.ptr_guard_mut());
        // SAFETY: `get_slice` checked that both ranges of `len` bytes lie
        // in mapped guest RAM, which stays mapped while the guards (and
        // this pass's memory snapshot) live; two guests' RAM, or a FIFO
        // slot and a receive frame of one guest, never overlap. The guest
        // may write them meanwhile, as it may under any DMA.
        unsafe { copy_packets(from.as_ptr(), to.as_ptr(), len, dst_off, packet) };
        return true;
    }
    if !range_ok(src, src_gpa, len) || !range_ok(dst, dst_gpa, len) {
        return false;
    }
    let mut buf = [0u8; MAX_PAYLOAD_LIMIT as usize];
    let mut done = 0usize;
    while done < len {
        let n = to_boundary(dst_off + done as u64, packet, len - done).min(buf.len());
        let o = done as u64;
        if src
            .read_slice(&mut buf[..n], GuestAddress(src_gpa + o))
            .is_err()
            || dst
                .write_slice(&buf[..n], GuestAddress(dst_gpa + o))
                .is_err()
        {
            return false;
        }
        packet_fence();
        done += n;
    }
    true
}

/// Copy `len` bytes from `src` to `dst` front to back, a packet at a time
/// (`dst_off` is the page offset of `dst`, which places the packet
/// boundaries at multiples of `packet`): every store of a packet is made
/// before any of the next packet's, so a reader that sees a packet's bytes
/// sees every earlier packet's. Whole packets are copied in fixed-size
/// moves the compiler inlines (no call per packet, unlike a `memcpy` per
/// packet, and unlike one `memcpy` of the run, which may store its end
/// first or with string instructions whose stores are not ordered).
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes, and
/// the two ranges must not overlap.
unsafe fn copy_packets(src: *const u8, dst: *mut u8, len: usize, dst_off: u64, packet: u64) {
    // Only the first packet may start off a boundary: after it every
    // packet is whole but the last, so the loop needs no division (one per
    // 32-byte packet was a fifth of the copy's time).
    let head = to_boundary(dst_off, packet, len);
    // SAFETY: `head <= len`, within both ranges (the caller's contract).
    unsafe { copy_one_packet(src, dst, head) };
    packet_fence();
    let mut done = head;
    let whole = usize::try_from(packet).unwrap_or(usize::MAX);
    if whole == DEFAULT_PACKET {
        // The usual size, as one fixed-size move the compiler unrolls.
        while len - done >= whole {
            // SAFETY: `done + whole <= len`: within both ranges.
            unsafe { copy_fixed::<DEFAULT_PACKET>(src.add(done), dst.add(done)) };
            packet_fence();
            done += whole;
        }
    }
    while done < len {
        let n = whole.min(len - done);
        // SAFETY: `done + n <= len`: within both ranges.
        unsafe { copy_one_packet(src.add(done), dst.add(done), n) };
        packet_fence();
        done += n;
    }
}

/// The model's default payload, the size most runs copy in.
const DEFAULT_PACKET: usize = DEFAULT_MAX_PAYLOAD as usize;

/// Exactly `N` bytes, in 16-byte moves.
///
/// # Safety
///
/// As [`copy_packets`], for `N` bytes.
#[inline(always)]
unsafe fn copy_fixed<const N: usize>(src: *const u8, dst: *mut u8) {
    // SAFETY: the caller's contract: `N` bytes of each range; unaligned
    // moves of a byte array need no alignment.
    unsafe {
        let v = std::ptr::read_unaligned(src.cast::<[u8; N]>());
        std::ptr::write_unaligned(dst.cast::<[u8; N]>(), v);
    }
}

/// One packet's bytes, `n` at most `MAX_PAYLOAD_LIMIT`: in 16-byte moves
/// where it can.
///
/// # Safety
///
/// As [`copy_packets`], for `n` bytes.
#[inline(always)]
unsafe fn copy_one_packet(src: *const u8, dst: *mut u8, n: usize) {
    const W: usize = 16;
    let mut k = 0usize;
    while k + W <= n {
        // SAFETY: `k + W <= n`: within both ranges; unaligned moves of a
        // byte array need no alignment.
        unsafe {
            let v = std::ptr::read_unaligned(src.add(k).cast::<[u8; W]>());
            std::ptr::write_unaligned(dst.add(k).cast::<[u8; W]>(), v);
        }
        k += W;
    }
    if k < n {
        // SAFETY: `k < n`: the last `n - k` bytes of both ranges.
        unsafe { std::ptr::copy_nonoverlapping(src.add(k), dst.add(k), n - k) };
    }
}

/// Between two packets' copies: on x86-64 only the compiler's (stores are
/// seen in program order), a release fence elsewhere.
/// The compiler keeps the stores on each side of it on their side, so the
/// packets' moves are not merged or reordered.
#[inline(always)]
fn packet_fence() {
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
    #[cfg(target_arch = "x86_64")]
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

/// Copy `[src_off, src_off+len)` of scatter list `src` in `src_mem` to
/// `[dst_off, dst_off+len)` of scatter list `dst` in `dst_mem`, packet by
/// packet in order (`dst_off` places the packet boundaries: it is the page
/// offset of the first byte when `dst` is a page's frames).
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_copy(
    src_mem: &Mem,
    src: &[Piece],
    src_off: u64,
    dst_mem: &Mem,
    dst: &[Piece],
    dst_off: u64,
    len: u64,
    packet: u32,
) -> bool {
    if !covers(src, src_off, len) || !covers(dst, dst_off, len) {
        return false;
    }
    let mut a = Runs::new(src, src_off, len);
    let mut b = Runs::new(dst, dst_off, len);
    let (mut pa, mut pb) = (a.next(), b.next());
    let mut done = 0u64;
    while let (Some((ga, la)), Some((gb, lb))) = (pa, pb) {
        let n = la.min(lb);
        if !copy_between(src_mem, ga, dst_mem, gb, n as usize, dst_off + done, packet) {
            return false;
        }
        done += u64::from(n);
        pa = if la > n {
            Some((ga + u64::from(n), la - n))
        } else {
            a.next()
        };
        pb = if lb > n {
            Some((gb + u64::from(n), lb - n))
        } else {
            b.next()
        };
    }
    done == len
}

/// Write `data` at `[off, off+len)` of scatter list `dst`, packet by packet
/// in order (`off` places the packet boundaries, as in [`scatter_copy`]).
pub(crate) fn scatter_write(mem: &Mem, dst: &[Piece], off: u64, data: &[u8], packet: u32) -> bool {
    let r = runs(dst, off, data.len() as u64);
    if r.is_empty() && !data.is_empty() {
        return false;
    }
    let packet = u64::from(packet.max(1));
    let mut done = 0usize;
    for (gpa, n) in r {
        let mut k = 0usize;
        while k < n as usize {
            let m = to_boundary(off + (done + k) as u64, packet, n as usize - k);
            if mem
                .write_slice(&data[done + k..done + k + m], GuestAddress(gpa + k as u64))
                .is_err()
            {
                return false;
            }
            packet_fence();
            k += m;
        }
        done += n as usize;
    }
    true
}

/// Read `buf.len()` bytes at `[off, ..)` of scatter list `src`.
pub(crate) fn scatter_read(mem: &Mem, src: &[Piece], off: u64, buf: &mut [u8]) -> bool {
    let r = runs(src, off, buf.len() as u64);
    if r.is_empty() && !buf.is_empty() {
        return false;
    }
    let mut done = 0usize;
    for (gpa, n) in r {
        let n = n as usize;
        if mem
            .read_slice(&mut buf[done..done + n], GuestAddress(gpa))
            .is_err()
        {
            return false;
        }
        done += n;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem() -> Mem {
        // Two regions with a hole between them, like a guest with RAM above 4 GiB.
        GuestMemoryMmap::from_ranges(&[
            (GuestAddress(0), 0x10000),
            (GuestAddress(0x20000), 0x10000),
        ])
        .unwrap()
    }

    #[test]
    fn ranges_outside_ram_are_refused() {
        let m = mem();
        assert!(range_ok(&m, 0, 0x10000));
        assert!(!range_ok(&m, 0xff00, 0x200));
        assert!(!range_ok(&m, 0x30000, 1));
        assert!(!range_ok(&m, u64::MAX - 4, 8));
        assert!(range_ok(&m, 0x2ff00, 0x100));
    }

    #[test]
    fn runs_cover_exactly() {
        let list = [(0x1000, 16), (0x5000, 16), (0x9000, 16)];
        assert_eq!(runs(&list, 8, 16), vec![(0x1008, 8), (0x5000, 8)]);
        assert_eq!(runs(&list, 0, 48).len(), 3);
        assert!(runs(&list, 40, 16).is_empty());
    }

    proptest::proptest! {
        /// The packet-at-a-time copy moves exactly the bytes asked for,
        /// whatever the packet size, length and where the boundaries fall,
        /// and nothing beside them.
        #[test]
        fn copy_between_copies_exactly(
            src_at in 0u64..512,
            dst_at in 0u64..512,
            len in 0usize..5000,
            dst_off in 0u64..4096,
            payload_log in 3u32..=8,
        ) {
            let (a, b) = (mem(), mem());
            let data: Vec<u8> = (0..len + 64).map(|i| u8::try_from(i % 251).unwrap() ^ 0x5a).collect();
            a.write_slice(&data, GuestAddress(src_at)).unwrap();
            b.write_slice(&vec![0xee; len + 64], GuestAddress(dst_at)).unwrap();
            proptest::prop_assert!(copy_between(&a, src_at, &b, dst_at + 16, len, dst_off, 1 << payload_log));
            let mut got = vec![0u8; len + 32];
            b.read_slice(&mut got, GuestAddress(dst_at)).unwrap();
            proptest::prop_assert!(got[..16].iter().all(|&x| x == 0xee));
            proptest::prop_assert_eq!(&got[16..16 + len], &data[..len]);
            proptest::prop_assert!(got[16 + len..].iter().all(|&x| x == 0xee));
        }
    }

    #[test]
    fn scatter_copy_between_two_guests() {
        let a = mem();
        let b = mem();
        let data: Vec<u8> = (0..64).collect();
        a.write_slice(&data[..40], GuestAddress(0x100)).unwrap();
        a.write_slice(&data[40..], GuestAddress(0x20000)).unwrap();
        let src = [(0x100, 40), (0x20000, 24)];
        let dst = [(0x3000, 32), (0x8000, 32)];
        assert!(scatter_copy(&a, &src, 0, &b, &dst, 0, 64, 32));
        let mut got = [0u8; 64];
        b.read_slice(&mut got[..32], GuestAddress(0x3000)).unwrap();
        b.read_slice(&mut got[32..], GuestAddress(0x8000)).unwrap();
        assert_eq!(&got[..], &data[..]);
        // A destination outside RAM is refused and nothing is written.
        assert!(!scatter_copy(&a, &src, 0, &b, &[(0x18000, 64)], 0, 64, 32));
    }
}
