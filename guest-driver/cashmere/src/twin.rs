//! Twins and diffs (seed 002 s.4.2): a twin is a pristine copy of a page made
//! at a write fault; a diff compares the page with its twin at 32-bit
//! granularity. Runs of changed words become remote writes to the home's
//! master copy. Unchanged words are never written, even between two changed
//! ones: another node may have changed them (data-race-free programs write
//! disjoint words of a shared page).

/// Free twins, reused (the seed keeps a free stack in the twin space).
#[derive(Default)]
pub struct TwinPool {
    free: Vec<Box<[u32]>>,
}

impl TwinPool {
    pub fn take(&mut self, words: usize) -> Box<[u32]> {
        match self.free.pop() {
            Some(t) if t.len() == words => t,
            _ => vec![0u32; words].into_boxed_slice(),
        }
    }

    pub fn give(&mut self, t: Box<[u32]>) {
        self.free.push(t);
    }
}

/// A run of changed words: (byte offset in the page, the new bytes).
pub type DiffRun = (usize, Vec<u8>);

/// Compare `current` with `twin`; return the runs of changed words and update
/// the twin to `current`, so the same change is never sent twice.
pub fn diff(current: &[u32], twin: &mut [u32]) -> Vec<DiffRun> {
    assert_eq!(current.len(), twin.len());
    let mut runs = Vec::new();
    let mut i = 0;
    while i < current.len() {
        if current[i] == twin[i] {
            i += 1;
            continue;
        }
        let start = i;
        let mut bytes = Vec::new();
        while i < current.len() && current[i] != twin[i] {
            bytes.extend_from_slice(&current[i].to_le_bytes());
            twin[i] = current[i];
            i += 1;
        }
        runs.push((4 * start, bytes));
    }
    runs
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let runs = diff(&working, &mut twin);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].0, 4);
        assert_eq!(runs[0].1.len(), 8);
    }

    #[test]
    fn diff_finds_runs_and_updates_the_twin() {
        let mut twin = vec![0u32; 8];
        let cur = vec![0, 5, 6, 0, 0, 0, 9, 9];
        let runs = diff(&cur, &mut twin);
        assert_eq!(
            runs,
            vec![
                (4, [5u32, 6].iter().flat_map(|w| w.to_le_bytes()).collect()),
                (24, [9u32, 9].iter().flat_map(|w| w.to_le_bytes()).collect()),
            ]
        );
        assert_eq!(twin, cur);
        assert!(diff(&cur, &mut twin).is_empty());
    }

    #[test]
    fn unchanged_words_between_changes_are_not_sent() {
        let mut twin = vec![1u32, 2, 3];
        let runs = diff(&[7, 2, 7], &mut twin);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].0, 0);
        assert_eq!(runs[1].0, 8);
    }
}
