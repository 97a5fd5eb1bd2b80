//! Twins and diffs (seed 002 s.4.2): a twin is a pristine copy of a page made
//! at a write fault; a diff compares the page with its twin, a 32-bit word
//! at a time as the seed does, and then, where a word differs, byte by byte
//! ([`Diff`]). Each run of adjacent changed bytes becomes one remote write
//! (one record) to the home's master copy, as the seed's diffs are pushed
//! with programmed I/O; a run of wholly changed words is one record, as
//! before.
//!
//! Unchanged bytes are never written, not even a one-byte gap between two
//! changed runs: another node may have changed that byte in the same
//! interval (data-race-free programs may write disjoint bytes of one page,
//! and of one word), and our stale copy of it, landing at the home after
//! theirs, would undo their write. So runs are merged only when they touch.
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
            ptr: p.cast::<u32>(),
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
            libc::munmap(self.ptr.cast::<libc::c_void>(), len);
        }
    }
}

/// The changes of a page since its twin, at the granularity writes have:
/// the runs of adjacent words with a changed byte, and for each such word
/// the mask of its changed bytes (bit k: byte k, as the word lies in
/// memory).
///
/// Seed 002 s.4.2 compares 32-bit words, "limited by the granularity of an
/// atomic LOAD/STORE" on the Alpha. A C program may write disjoint *bytes*
/// of one word from two nodes between synchronisations and still be
/// data-race-free; a whole-word diff would then write the other node's bytes
/// back from the twin. So words are compared first (the fast path, as the
/// seed's), and a word that differs carries only its changed bytes
/// (docs/fidelity.md, "Sub-word writes").
pub struct Diff {
    runs: Vec<Range<usize>>,
    masks: Box<[u8]>,
    /// Whether some word of a run has fewer than 4 changed bytes.
    partial: bool,
}

/// All four bytes of a word changed.
pub const WHOLE_WORD: u8 = 0xf;

/// The mask of the bytes of `x` (a XOR of two words) that are not zero.
fn byte_mask(x: u32) -> u8 {
    let b = x.to_le_bytes();
    u8::from(b[0] != 0)
        | u8::from(b[1] != 0) << 1
        | u8::from(b[2] != 0) << 2
        | u8::from(b[3] != 0) << 3
}

impl Diff {
    /// Room for the diff of a page of `words` 32-bit words.
    pub fn new(words: usize) -> Diff {
        Diff {
            runs: Vec::with_capacity(words / 2 + 1),
            masks: vec![0u8; words].into_boxed_slice(),
            partial: false,
        }
    }

    /// Compare `current` with `twin`: record each run of adjacent changed
    /// words and their changed bytes, and update the twin to `current`, so
    /// the same change is never sent twice. Returns the number of changed
    /// bytes.
    pub fn compute(&mut self, current: &[u32], twin: &mut [u32]) -> usize {
        assert_eq!(current.len(), twin.len());
        assert_eq!(current.len(), self.masks.len());
        self.runs.clear();
        let mut partial = false;
        let mut i = 0;
        let n = current.len();
        while i < n {
            if current[i] == twin[i] {
                i += 1;
                continue;
            }
            let start = i;
            while i < n && current[i] != twin[i] {
                let x = current[i] ^ twin[i];
                // Most changed words change in every byte: a test for a
                // zero byte (the classic bit trick) makes the mask only
                // where there is one, and keeps this loop near the seed's
                // word compare.
                let whole = x.wrapping_sub(0x0101_0101) & !x & 0x8080_8080 == 0;
                self.masks[i] = if whole { WHOLE_WORD } else { byte_mask(x) };
                partial |= !whole;
                twin[i] = current[i];
                i += 1;
            }
            self.runs.push(start..i);
        }
        self.partial = partial;
        let words: usize = self.runs.iter().map(|r| r.len()).sum();
        if !partial {
            return 4 * words;
        }
        let runs = self.runs.iter().flat_map(|r| r.clone());
        runs.map(|i| self.masks[i].count_ones() as usize).sum()
    }

    /// Whether the page did not change.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The runs of words with a changed byte.
    pub fn runs(&self) -> &[Range<usize>] {
        &self.runs
    }

    /// Word `i`'s changed bytes (meaningful inside a run).
    pub fn mask(&self, i: usize) -> u8 {
        self.masks[i]
    }

    /// The changed bytes as runs of adjacent bytes (byte offsets in the
    /// page), into `out`: the remote writes of a diff. A run of wholly
    /// changed words stays one run, as with word diffs.
    pub fn byte_runs(&self, out: &mut Vec<Range<usize>>) {
        out.clear();
        let mut push = |r: Range<usize>| match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r),
        };
        for run in &self.runs {
            if !self.partial {
                push(4 * run.start..4 * run.end);
                continue;
            }
            for i in run.clone() {
                let m = self.masks[i];
                if m == WHOLE_WORD {
                    push(4 * i..4 * i + 4);
                    continue;
                }
                for b in 0..4 {
                    if m & (1 << b) != 0 {
                        push(4 * i + b..4 * i + b + 1);
                    }
                }
            }
        }
    }
}

/// Write the bytes of `new` that differ from `old` (through `write`: a word
/// index, the new word, the mask of the bytes to store) and make `old`
/// equal to `new`. Byte-exact, so threads of this node writing other bytes
/// of the same words meanwhile lose nothing. Returns the number of words
/// that differed.
pub fn merge_changed(new: &[u32], old: &mut [u32], mut write: impl FnMut(usize, u32, u8)) -> usize {
    assert_eq!(new.len(), old.len());
    let mut n = 0;
    for (i, (&w, o)) in new.iter().zip(old.iter_mut()).enumerate() {
        if w != *o {
            write(i, w, byte_mask(w ^ *o));
            *o = w;
            n += 1;
        }
    }
    n
}

/// The incoming-diff page update (seed 000 s.2.1, CSM-2L): compare the page
/// that came from the home with the twin and write only the bytes that
/// differ, to the working copy (through `write`, as [`merge_changed`]) and
/// to the twin. For a data-race-free program those bytes are exactly the
/// remote modifications, disjoint from what local threads are writing
/// meanwhile, so concurrent local writers are neither stopped nor
/// overwritten, and the twin keeps diffing out only local changes at the
/// next release. Returns the number of words written.
pub fn apply_incoming(
    incoming: &[u32],
    twin: &mut [u32],
    write: impl FnMut(usize, u32, u8),
) -> usize {
    merge_changed(incoming, twin, write)
}

/// Bytes of a diff message's header: body length, then a checksum.
pub const DIFF_HEADER: usize = 16;

/// A run header's flag: the run carries a mask word per 8 of its words.
const RUN_PARTIAL: u32 = 1 << 31;
/// Most words in one run (a page of 8 KiB has 2048).
const RUN_MAX_WORDS: usize = 0x7fff;

/// Encode a diff of `current` as a diff message (CSM-MS: the diff goes to
/// the home as a message, seed 000 s.2.3.1.2): a 16-byte header (body
/// length, reserved, checksum of the body from `check`), then per run a
/// word `start | len << 16` (bit 31 set when some word of the run is
/// partly changed: then the run's byte masks follow, 4 bits a word, 8
/// words to a mask word), and its words. Returns the message's length;
/// `out` must hold 1.5 pages and the header (a page of one-word runs with
/// masks).
pub fn encode_runs(
    current: &[u32],
    diff: &Diff,
    out: &mut [u8],
    check: impl Fn(&[u8]) -> u64,
) -> usize {
    let mut at = DIFF_HEADER;
    let mut put = |w: u32, at: &mut usize| {
        out[*at..*at + 4].copy_from_slice(&w.to_le_bytes());
        *at += 4;
    };
    for r in diff.runs() {
        assert!(r.len() <= RUN_MAX_WORDS && r.start <= 0xffff);
        let partial = diff.partial && r.clone().any(|i| diff.mask(i) != WHOLE_WORD);
        let flag = if partial { RUN_PARTIAL } else { 0 };
        // Both fit 16 bits (asserted above: a run is at most a page).
        #[allow(
            clippy::cast_possible_truncation,
            reason = "start <= 0xffff and len <= RUN_MAX_WORDS, asserted above"
        )]
        let (start, len) = (r.start as u32, r.len() as u32);
        put(start | len << 16 | flag, &mut at);
        if partial {
            // No allocation: a release may run in the fault handler.
            for first in r.clone().step_by(8) {
                let m = (first..r.end.min(first + 8))
                    .enumerate()
                    .fold(0u32, |m, (k, i)| m | u32::from(diff.mask(i)) << (4 * k));
                put(m, &mut at);
            }
        }
        for &w in &current[r.clone()] {
            put(w, &mut at);
        }
    }
    let body = at - DIFF_HEADER;
    let sum = check(&out[DIFF_HEADER..at]);
    let body = u32::try_from(body).expect("a diff message is two pages at most");
    out[..4].copy_from_slice(&body.to_le_bytes());
    out[4..8].fill(0);
    out[8..16].copy_from_slice(&sum.to_le_bytes());
    at
}

/// The body length a diff message's header states.
pub fn message_body_len(header: &[u8]) -> usize {
    u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize
}

/// One run of a diff message's body: its first word, length, and where its
/// masks (if partial) and words start in the body.
struct RunShape {
    start: usize,
    len: usize,
    masks: Option<usize>,
    words: usize,
}

/// The run at `at` of `body`, if it fits in `words` words and the body.
fn run_at(body: &[u8], at: usize, words: usize) -> Option<RunShape> {
    let word = |i: usize| {
        body.get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let h = word(at)?;
    let start = (h & 0xffff) as usize;
    let len = ((h >> 16) & 0x7fff) as usize;
    let mask_words = if h & RUN_PARTIAL != 0 {
        len.div_ceil(8)
    } else {
        0
    };
    if len == 0 || start + len > words || at + 4 * (1 + mask_words + len) > body.len() {
        return None;
    }
    let masks = (h & RUN_PARTIAL != 0).then_some(at + 4);
    Some(RunShape {
        start,
        len,
        masks,
        words: at + 4 * (1 + mask_words),
    })
}

/// Decode a diff message (`encode_runs`), handing each changed word to
/// `apply` (its index in the page, its value, the mask of its changed
/// bytes). `false`, applying nothing, when the body does not match its
/// checksum (a packet of it was lost) or is malformed.
pub fn decode_runs(
    msg: &[u8],
    words: usize,
    check: impl Fn(&[u8]) -> u64,
    mut apply: impl FnMut(usize, u32, u8),
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
    let mask = |r: &RunShape, k: usize| match r.masks {
        Some(m) => ((word(m + 4 * (k / 8)) >> (4 * (k % 8))) & 0xf) as u8,
        None => WHOLE_WORD,
    };
    // Check the shape first (every mask names a byte), so a malformed body
    // applies nothing.
    let mut at = 0;
    while at < body_len {
        let Some(r) = run_at(body, at, words) else {
            return false;
        };
        if (0..r.len).any(|k| mask(&r, k) == 0) {
            return false;
        }
        at = r.words + 4 * r.len;
    }
    at = 0;
    while at < body_len {
        let Some(r) = run_at(body, at, words) else {
            return false;
        };
        for k in 0..r.len {
            apply(r.start + k, word(r.words + 4 * k), mask(&r, k));
        }
        at = r.words + 4 * r.len;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(b: &[u8]) -> u64 {
        b.iter()
            .fold(7u64, |h, &x| h.wrapping_mul(31) ^ u64::from(x))
    }

    /// `diff`'s changes written over `base` by a byte-exact writer.
    fn apply_bytes(base: &mut [u8], current: &[u32], d: &Diff) {
        let mut runs = Vec::new();
        d.byte_runs(&mut runs);
        let cur: Vec<u8> = current.iter().flat_map(|w| w.to_le_bytes()).collect();
        for r in runs {
            base[r.clone()].copy_from_slice(&cur[r]);
        }
    }

    #[test]
    fn a_diff_message_carries_its_runs_and_refuses_damage() {
        let words = 2048;
        let twin0 = vec![0u32; words];
        let mut cur = twin0.clone();
        // The worst case: every other word changed.
        for i in (0..words).step_by(2) {
            cur[i] = u32::try_from(i).expect("a word index fits u32") + 1;
        }
        let mut twin = twin0.clone();
        let mut d = Diff::new(words);
        d.compute(&cur, &mut twin);
        let mut out = vec![0u8; 2 * 4 * words];
        let n = encode_runs(&cur, &d, &mut out, sum);
        let mut page = twin0.clone();
        assert!(decode_runs(&out[..n], words, sum, |i, w, m| {
            for k in 0..4 {
                if m & (1 << k) != 0 {
                    let mut b = page[i].to_le_bytes();
                    b[k] = w.to_le_bytes()[k];
                    page[i] = u32::from_le_bytes(b);
                }
            }
        }));
        assert_eq!(page, cur);
        out[DIFF_HEADER + 8] ^= 1;
        let mut touched = false;
        assert!(!decode_runs(&out[..n], words, sum, |_, _, _| touched = true));
        assert!(!touched);
    }

    #[test]
    fn the_largest_diff_message_fits_one_and_a_half_pages() {
        // Every other word changed in one byte: one-word runs with masks.
        let words = 2048;
        let mut twin = vec![0u32; words];
        let cur: Vec<u32> = (0..words).map(|i| u32::from(i % 2 == 0) << 8).collect();
        let mut d = Diff::new(words);
        assert_eq!(d.compute(&cur, &mut twin), words / 2);
        let mut out = vec![0u8; 2 * 4 * words + DIFF_HEADER];
        let n = encode_runs(&cur, &d, &mut out, sum);
        assert_eq!(n, DIFF_HEADER + 3 * 4 * words / 2);
        let mut masks = Vec::new();
        assert!(decode_runs(&out[..n], words, sum, |_, _, m| masks.push(m)));
        assert!(masks.iter().all(|&m| m == 0b0010));
    }

    #[test]
    fn a_mask_naming_no_byte_is_refused() {
        let words = 8;
        let mut twin = vec![0u32; words];
        let cur = vec![0, 0x100, 0x1, 0, 0, 0, 0, 0];
        let mut d = Diff::new(words);
        d.compute(&cur, &mut twin);
        let mut out = vec![0u8; 256];
        let n = encode_runs(&cur, &d, &mut out, sum);
        // The run's mask word follows its header: clear word 1's nibble.
        let at = DIFF_HEADER + 4;
        out[at] &= 0x0f;
        let s = sum(&out[DIFF_HEADER..n]);
        out[8..16].copy_from_slice(&s.to_le_bytes());
        assert!(!decode_runs(&out[..n], words, sum, |_, _, _| ()));
    }

    #[test]
    fn two_nodes_writing_bytes_of_one_word_keep_each_others_bytes() {
        // Seed 002's word diff would send node A's whole word, writing B's
        // bytes back from A's twin: the byte diff sends A's bytes only.
        let twin0 = vec![0x4433_2211u32, 0x8877_6655];
        let (mut ta, mut tb) = (twin0.clone(), twin0.clone());
        let a = vec![0x4433_22aa, 0x8877_bb55];
        let b = vec![0x44cc_2211, 0xdd77_6655];
        let (mut da, mut db) = (Diff::new(2), Diff::new(2));
        assert_eq!(da.compute(&a, &mut ta), 2);
        assert_eq!(db.compute(&b, &mut tb), 2);
        let mut home: Vec<u8> = twin0.iter().flat_map(|w| w.to_le_bytes()).collect();
        apply_bytes(&mut home, &a, &da);
        apply_bytes(&mut home, &b, &db);
        let want: Vec<u8> = [0x44cc_22aau32, 0xdd77_bb55]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(home, want);
    }

    #[test]
    fn byte_runs_join_whole_words_and_cut_at_unchanged_bytes() {
        let mut twin = vec![0u32; 6];
        let cur = vec![
            0,
            0xffff_ffff,
            0xffff_ffff,
            0x00ff_0000,
            0xff00_0000,
            0x0000_00ff,
        ];
        let mut d = Diff::new(6);
        assert_eq!(d.compute(&cur, &mut twin), 4 + 4 + 1 + 1 + 1);
        assert_eq!(d.runs(), std::slice::from_ref(&(1..6)));
        let mut runs = Vec::new();
        d.byte_runs(&mut runs);
        // Words 1-2 whole, word 3's byte 2, then word 4's byte 3 and word
        // 5's byte 0, which touch.
        assert_eq!(runs, vec![4..12, 14..15, 19..21]);
        assert_eq!(twin, cur);
        assert_eq!(d.compute(&cur, &mut twin), 0);
        assert!(d.is_empty());
    }

    #[test]
    fn an_incoming_diff_keeps_local_writes_and_takes_remote_ones() {
        // Twin made at the write fault; since then this node wrote words 1
        // and 2, another node wrote words 5 and 6 (and flushed them home).
        let mut twin = vec![10u32, 11, 12, 13, 14, 15, 16, 17];
        let mut working = vec![10u32, 91, 92, 13, 14, 15, 16, 17];
        let home = vec![10u32, 11, 12, 13, 14, 85, 86, 17];
        let n = apply_incoming(&home, &mut twin, |i, w, m| {
            assert_eq!(m, 0b0001);
            working[i] = w
        });
        assert_eq!(n, 2);
        assert_eq!(working, vec![10, 91, 92, 13, 14, 85, 86, 17]);
        assert_eq!(twin, home);
        // The next release diffs out only this node's own words.
        let mut d = Diff::new(8);
        assert_eq!(d.compute(&working, &mut twin), 2);
        assert_eq!(d.runs(), std::slice::from_ref(&(1..3)));
    }

    #[test]
    fn an_incoming_diff_writes_only_the_remote_bytes_of_a_shared_word() {
        // This node's thread wrote byte 1 of word 0; another node byte 0.
        let mut twin = vec![0x0000_0000u32];
        let home = vec![0x0000_00aau32];
        let mut masks = Vec::new();
        apply_incoming(&home, &mut twin, |_, _, m| masks.push(m));
        assert_eq!(masks, vec![0b0001]);
    }

    #[test]
    fn adjacent_changed_words_are_one_run_and_the_twin_follows() {
        let mut twin = vec![0u32; 8];
        let cur = vec![0, 5, 6, 0, 0, 0, 9, 9];
        let mut d = Diff::new(8);
        assert_eq!(d.compute(&cur, &mut twin), 4);
        assert_eq!(d.runs(), &[1..3, 6..8]);
        assert_eq!(twin, cur);
        // A whole changed page is one run: one record to the home.
        let all: Vec<u32> = (0..2048).map(|i| 0x8080_8080u32 | i).collect();
        let mut t = vec![0u32; 2048];
        let mut d = Diff::new(2048);
        d.compute(&all, &mut t);
        assert_eq!(d.runs(), std::slice::from_ref(&(0..2048)));
        let mut runs = Vec::new();
        d.byte_runs(&mut runs);
        assert_eq!(runs, vec![0..8192]);
    }

    #[test]
    fn unchanged_words_between_changes_are_not_sent() {
        let mut twin = vec![1u32, 2, 3];
        let mut d = Diff::new(3);
        d.compute(&[7, 2, 7], &mut twin);
        assert_eq!(d.runs(), &[0..1, 2..3]);
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
