//! Page versions: which writers' diffs a home has applied to a page, and
//! which a faulting node needs before it may take the page.
//!
//! HLRC's "flush timestamps" (ours in detail: seed 001 does not spell
//! them out). A writer's diffs reach a home in the order the writer sent
//! them, so per page and writer one number says how far the home's copy
//! is: the newest interval of that writer whose diff of the page it
//! applied. A notice "writer w wrote page p in interval k" means a node
//! that takes `p` from its home must wait until the home's number for
//! `(p, w)` is at least `k`.

use crate::{Node, Page, WriteNotice};

/// Per page and writer: an interval number (0: none).
#[derive(Clone, Debug)]
struct PerPageWriter {
    nodes: usize,
    numbers: Vec<u32>,
}

impl PerPageWriter {
    fn new(pages: usize, nodes: usize) -> Self {
        PerPageWriter {
            nodes,
            numbers: vec![0; pages * nodes],
        }
    }

    fn row(&self, page: Page) -> &[u32] {
        let at = page * self.nodes;
        self.numbers.get(at..at + self.nodes).unwrap_or(&[])
    }

    /// Raise `(page, writer)` to `number`; whether it rose.
    fn raise(&mut self, page: Page, writer: Node, number: u32) -> bool {
        if writer >= self.nodes {
            return false;
        }
        match self.numbers.get_mut(page * self.nodes + writer) {
            Some(n) if *n < number => {
                *n = number;
                true
            }
            _ => false,
        }
    }
}

/// At a home: per page it is home of, how far each writer's diffs are
/// applied.
#[derive(Clone, Debug)]
pub struct PageVersions(PerPageWriter);

impl PageVersions {
    pub fn new(pages: usize, nodes: usize) -> PageVersions {
        PageVersions(PerPageWriter::new(pages, nodes))
    }

    /// The diff of `page` that `writer` made in its interval `number` is
    /// applied.
    pub fn applied(&mut self, page: Page, writer: Node, number: u32) {
        self.0.raise(page, writer, number);
    }

    /// Whether the home's copy of `page` holds every diff `needs` names
    /// (a row as [`PageNeeds::needs`] gives it).
    pub fn satisfies(&self, page: Page, needs: &[u32]) -> bool {
        let have = self.0.row(page);
        needs
            .iter()
            .enumerate()
            .all(|(w, &k)| k == 0 || have.get(w).is_some_and(|&h| h >= k))
    }

    /// How far `page` is, per writer (for a page reply, so the faulting
    /// node knows what it got).
    pub fn version(&self, page: Page) -> &[u32] {
        self.0.row(page)
    }
}

/// At any node: per page, the newest diff of each writer its notices name,
/// which the page's home must have applied before a fetch is answered.
#[derive(Clone, Debug)]
pub struct PageNeeds(PerPageWriter);

impl PageNeeds {
    pub fn new(pages: usize, nodes: usize) -> PageNeeds {
        PageNeeds(PerPageWriter::new(pages, nodes))
    }

    /// Learn a notice; whether it names a diff newer than any known for its
    /// page (the node's copy, unless it is the page's home, is then stale
    /// and must be invalidated). A node notes its own intervals' notices
    /// too: a copy it drops later must come back with its own diffs in.
    pub fn note(&mut self, notice: WriteNotice) -> bool {
        self.0
            .raise(notice.page, notice.interval.node, notice.interval.number)
    }

    /// What a fetch of `page` must wait for at the home.
    pub fn needs(&self, page: Page) -> &[u32] {
        self.0.row(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IntervalId;

    fn notice(page: Page, node: Node, number: u32) -> WriteNotice {
        WriteNotice {
            page,
            interval: IntervalId { node, number },
        }
    }

    #[test]
    fn a_fetch_waits_for_every_diff_its_notices_name() {
        let mut needs = PageNeeds::new(4, 3);
        assert!(needs.note(notice(2, 1, 3)));
        assert!(
            !needs.note(notice(2, 1, 2)),
            "an older notice changes nothing"
        );
        assert!(needs.note(notice(2, 2, 1)));
        let mut home = PageVersions::new(4, 3);
        assert!(!home.satisfies(2, needs.needs(2)));
        home.applied(2, 1, 3);
        assert!(
            !home.satisfies(2, needs.needs(2)),
            "writer 2's diff is missing"
        );
        home.applied(2, 2, 1);
        assert!(home.satisfies(2, needs.needs(2)));
        assert!(
            home.satisfies(0, needs.needs(0)),
            "no notice: nothing to wait for"
        );
        assert_eq!(home.version(2), &[0, 3, 1]);
    }

    #[test]
    fn out_of_range_pages_and_writers_change_nothing() {
        let mut needs = PageNeeds::new(1, 2);
        assert!(!needs.note(notice(5, 0, 1)));
        assert!(!needs.note(notice(0, 7, 1)));
        assert_eq!(needs.needs(5), &[] as &[u32]);
    }
}
