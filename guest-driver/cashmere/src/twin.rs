//! Twins and diffs (seed 002 s.4.2): a twin is a pristine copy of a page made
//! at a write fault; a diff compares the page with its twin at 32-bit
//! granularity. Each run of adjacent changed words becomes one remote write
//! (one record) to the home's master copy, as the seed's diffs are pushed
//! with programmed I/O.
//!
//! Unchanged words are never written, not even a one-word gap between two
//! changed runs: another node may have changed that word in the same
//! interval (data-race-free programs may write disjoint words of one page),
//! and our stale copy of it, landing at the home after theirs, would undo
//! their write. So runs are merged only when they touch.
//!
//! The twin space is one reserved mapping with a slot for every page of the
//! heap (the seed keeps twins in a twin space too); memory is committed only
//! for pages ever twinned. Taking and dropping a twin is a flag in the
//! page's state: no allocation, so the fault handler can twin a page.

use std::io;
use std::ops::Range;

/// Twins, page p's at `p * words` words.
pub struct TwinSpace {
    ptr: *mut u32,
    words: usize,
    pages: usize,
}

// SAFETY: the value owns its mapping; which thread may touch which twin is
// the protocol's synchronisation (the node's state mutex), as for the heap.
unsafe impl Send for TwinSpace {}
// SAFETY: as above; `&self` accessors hand out twins only to a caller that
// holds the node's state, which serialises them.
unsafe impl Sync for TwinSpace {}

impl TwinSpace {
    /// Room for `pages` twins of `words` 32-bit words each (reserved, not
    /// committed).
    pub fn new(pages: usize, words: usize) -> io::Result<TwinSpace> {
        let len = (pages * words * 4).max(4096);
        // SAFETY: an anonymous private mapping of our own; result checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("mmap (twin space): {e}")));
        }
        Ok(TwinSpace {
            ptr: p as *mut u32,
            words,
            pages,
        })
    }

    /// Page `p`'s twin.
    ///
    /// # Safety
    ///
    /// The caller holds the node's state (so no one else uses this twin
    /// now), and drops the slice before giving it up.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn twin(&self, p: usize) -> &mut [u32] {
        assert!(p < self.pages);
        // SAFETY: slot `p` lies inside the mapping (asserted); exclusive use
        // is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(p * self.words), self.words) }
    }
}

impl Drop for TwinSpace {
    fn drop(&mut self) {
        let len = (self.pages * self.words * 4).max(4096);
        // SAFETY: our own mapping, unmapped once.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, len);
        }
    }
}

/// Compare `current` with `twin`; put each run of adjacent changed words
/// into `runs` (word ranges) and update the twin to `current`, so the same
/// change is never sent twice. Returns the number of changed words.
pub fn diff(current: &[u32], twin: &mut [u32], runs: &mut Vec<Range<usize>>) -> usize {
    assert_eq!(current.len(), twin.len());
    runs.clear();
    let mut changed = 0;
    let mut i = 0;
    let n = current.len();
    while i < n {
        if current[i] == twin[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && current[i] != twin[i] {
            twin[i] = current[i];
            i += 1;
        }
        changed += i - start;
        runs.push(start..i);
    }
    changed
}

/// The incoming-diff page update (seed 000 s.2.1, CSM-2L): compare the page
/// that came from the home with the twin and write only the words that differ,
/// to the working copy (through `write`) and to the twin. For a data-race-free
/// program those words are exactly the remote modifications, disjoint from
/// what local threads are writing meanwhile, so concurrent local writers are
/// neither stopped nor overwritten, and the twin keeps diffing out only local
/// changes at the next release. Returns the number of words written.
pub fn apply_incoming(
    incoming: &[u32],
    twin: &mut [u32],
    mut write: impl FnMut(usize, u32),
) -> usize {
    assert_eq!(incoming.len(), twin.len());
    let mut n = 0;
    for (i, (&new, old)) in incoming.iter().zip(twin.iter_mut()).enumerate() {
        if new != *old {
            write(i, new);
            *old = new;
            n += 1;
        }
    }
    n
}

/// Bytes of a diff message's header: body length, then a checksum.
pub const DIFF_HEADER: usize = 16;

/// Encode the runs of `current` as a diff message (CSM-MS: the diff goes to
/// the home as a message, seed 000 s.2.3.1.2): a 16-byte header (body
/// length, reserved, checksum of the body from `check`), then per run a
/// word `start | len << 16` and its words. Returns the message's length;
/// `out` must hold a page's worth of one-word runs (`2 x page` bytes).
pub fn encode_runs(
    current: &[u32],
    runs: &[Range<usize>],
    out: &mut [u8],
    check: impl Fn(&[u8]) -> u64,
) -> usize {
    let mut at = DIFF_HEADER;
    let mut put = |w: u32, at: &mut usize| {
        out[*at..*at + 4].copy_from_slice(&w.to_le_bytes());
        *at += 4;
    };
    for r in runs {
        put(r.start as u32 | (r.len() as u32) << 16, &mut at);
        for &w in &current[r.clone()] {
            put(w, &mut at);
        }
    }
    let body = at - DIFF_HEADER;
    let sum = check(&out[DIFF_HEADER..at]);
    out[..4].copy_from_slice(&(body as u32).to_le_bytes());
    out[4..8].fill(0);
    out[8..16].copy_from_slice(&sum.to_le_bytes());
    at
}

/// The body length a diff message's header states.
pub fn message_body_len(header: &[u8]) -> usize {
    u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize
}

/// Decode a diff message (`encode_runs`), handing each word to `apply` (its
/// index in the page, its value). `false`, applying nothing, when the body
/// does not match its checksum (a packet of it was lost) or is malformed.
pub fn decode_runs(
    msg: &[u8],
    words: usize,
    check: impl Fn(&[u8]) -> u64,
    mut apply: impl FnMut(usize, u32),
) -> bool {
    if msg.len() < DIFF_HEADER {
        return false;
    }
    let body_len = message_body_len(msg);
    let sum = u64::from_le_bytes(msg[8..16].try_into().unwrap_or([0; 8]));
    let Some(body) = msg.get(DIFF_HEADER..DIFF_HEADER + body_len) else {
        return false;
    };
    if check(body) != sum || body_len % 4 != 0 {
        return false;
    }
    let word = |i: usize| u32::from_le_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
    // Check the shape first, so a malformed body applies nothing.
    let mut at = 0;
    while at < body_len {
        let h = word(at);
        let (start, len) = ((h & 0xffff) as usize, (h >> 16) as usize);
        if start + len > words || at + 4 + 4 * len > body_len {
            return false;
        }
        at += 4 + 4 * len;
    }
    at = 0;
    while at < body_len {
        let h = word(at);
        let (start, len) = ((h & 0xffff) as usize, (h >> 16) as usize);
        for k in 0..len {
            apply(start + k, word(at + 4 + 4 * k));
        }
        at += 4 + 4 * len;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_message_carries_its_runs_and_refuses_damage() {
        let words = 2048;
        let twin0 = vec![0u32; words];
        let mut cur = twin0.clone();
        // The worst case: every other word changed.
        for i in (0..words).step_by(2) {
            cur[i] = i as u32 + 1;
        }
        let mut twin = twin0.clone();
        let mut runs = Vec::new();
        diff(&cur, &mut twin, &mut runs);
        let sum = |b: &[u8]| {
            b.iter()
                .fold(7u64, |h, &x| h.wrapping_mul(31) ^ u64::from(x))
        };
        let mut out = vec![0u8; 2 * 4 * words];
        let n = encode_runs(&cur, &runs, &mut out, sum);
        let mut page = twin0.clone();
        assert!(decode_runs(&out[..n], words, sum, |i, w| page[i] = w));
        assert_eq!(page, cur);
        out[DIFF_HEADER + 8] ^= 1;
        let mut touched = false;
        assert!(!decode_runs(&out[..n], words, sum, |_, _| touched = true));
        assert!(!touched);
    }

    #[test]
    fn an_incoming_diff_keeps_local_writes_and_takes_remote_ones() {
        // Twin made at the write fault; since then this node wrote words 1
        // and 2, another node wrote words 5 and 6 (and flushed them home).
        let mut twin = vec![10u32, 11, 12, 13, 14, 15, 16, 17];
        let mut working = vec![10u32, 91, 92, 13, 14, 15, 16, 17];
        let home = vec![10u32, 11, 12, 13, 14, 85, 86, 17];
        let n = apply_incoming(&home, &mut twin, |i, w| working[i] = w);
        assert_eq!(n, 2);
        assert_eq!(working, vec![10, 91, 92, 13, 14, 85, 86, 17]);
        assert_eq!(twin, home);
        // The next release diffs out only this node's own words.
        let mut runs = Vec::new();
        assert_eq!(diff(&working, &mut twin, &mut runs), 2);
        assert_eq!(runs, vec![1..3]);
    }

    #[test]
    fn adjacent_changed_words_are_one_run_and_the_twin_follows() {
        let mut twin = vec![0u32; 8];
        let cur = vec![0, 5, 6, 0, 0, 0, 9, 9];
        let mut runs = Vec::new();
        assert_eq!(diff(&cur, &mut twin, &mut runs), 4);
        assert_eq!(runs, vec![1..3, 6..8]);
        assert_eq!(twin, cur);
        assert_eq!(diff(&cur, &mut twin, &mut runs), 0);
        assert!(runs.is_empty());
        // A whole changed page is one run: one record to the home.
        let all: Vec<u32> = (1..=2048).collect();
        let mut t = vec![0u32; 2048];
        diff(&all, &mut t, &mut runs);
        assert_eq!(runs, vec![0..2048]);
    }

    #[test]
    fn unchanged_words_between_changes_are_not_sent() {
        let mut twin = vec![1u32, 2, 3];
        let mut runs = Vec::new();
        diff(&[7, 2, 7], &mut twin, &mut runs);
        assert_eq!(runs, vec![0..1, 2..3]);
    }

    #[test]
    fn the_twin_space_gives_each_page_its_own_slot() {
        let ts = TwinSpace::new(4, 2048).unwrap();
        // SAFETY: this test is the only user of the space.
        unsafe {
            ts.twin(3).fill(7);
            ts.twin(0).fill(1);
            assert!(ts.twin(3).iter().all(|&w| w == 7));
            assert!(ts.twin(1).iter().all(|&w| w == 0));
        }
    }
}
