//! The Stale vector (seed 002 s.3): per page, as its home, the nodes whose
//! copy may lack a change to the master copy (bit n: node n). A migration
//! takes the page along only to a new home marked stale.

pub(crate) struct StaleVector {
    stale: Vec<u64>,
}

impl StaleVector {
    /// Every copy of every page stale (nothing is known yet).
    pub(crate) fn new(pages: u32) -> StaleVector {
        StaleVector {
            stale: vec![u64::MAX; pages as usize],
        }
    }

    /// Every node's copy of `p` may lack a change (the home writes it, or
    /// who holds which copy is not known).
    pub(crate) fn all_stale(&mut self, p: u32) {
        self.stale[p as usize] = u64::MAX;
    }

    /// Node `writer` changed `p` (its diff applied): every copy but its own
    /// lacks the change.
    pub(crate) fn changed_by(&mut self, p: u32, writer: u32) {
        self.stale[p as usize] |= !(1u64 << writer);
    }

    /// Node `r` has been sent the master copy of `p`.
    pub(crate) fn sent(&mut self, p: u32, r: u32) {
        self.stale[p as usize] &= !(1u64 << r);
    }

    /// Whether node `r`'s copy of `p` may lack a change.
    pub(crate) fn is_stale(&self, p: u32, r: u32) -> bool {
        self.stale[p as usize] & (1u64 << r) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::StaleVector;

    #[test]
    fn a_copy_sent_is_fresh_until_another_node_changes_the_page() {
        let mut s = StaleVector::new(2);
        assert!(s.is_stale(1, 3));
        s.sent(1, 3);
        assert!(!s.is_stale(1, 3));
        assert!(s.is_stale(0, 3), "another page is apart");
        s.changed_by(1, 3);
        assert!(!s.is_stale(1, 3), "the writer's own copy has its change");
        s.changed_by(1, 2);
        assert!(s.is_stale(1, 3));
        s.sent(1, 3);
        s.all_stale(1);
        assert!(s.is_stale(1, 3));
    }
}
