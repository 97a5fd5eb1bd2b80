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
pub type Run = (usize, Vec<u8>);

/// Compare `current` with `twin`; return the runs of changed words and update
/// the twin to `current`, so the same change is never sent twice.
pub fn diff(current: &[u32], twin: &mut [u32]) -> Vec<Run> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
