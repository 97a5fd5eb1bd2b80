//! A home assignment: which node is the home of each page. A run records the
//! one first touch gave it ([`crate::Csm::homes`]); a later run imposes it
//! ([`crate::Config::homes`]), as seed 000 s.3.4.1 imposed CSM-DMS's first-touch
//! homes on the other protocol variants so that they compare like with like.
//!
//! The text form, one item a line (`#` starts a comment):
//!
//! ```text
//! # cashmere homes
//! nodes 4
//! page_size 8192
//! pages 130
//! 0 1
//! 1 1
//! 7 3
//! ```
//!
//! then `PAGE HOME` for each page that has a home; a page not listed gets one
//! by first touch.

use std::fmt::Write as _;

/// Which node is home of each page of a heap, for one cluster size and
/// coherence unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HomeAssignment {
    pub nodes: u32,
    pub page_size: u32,
    /// Per page: its home, or `None` (first touch decides).
    pub homes: Vec<Option<u32>>,
}

/// A home assignment that cannot be read, or does not fit the run.
#[derive(Debug, thiserror::Error)]
pub enum HomesError {
    #[error("line {line}: {why}")]
    Syntax { line: usize, why: String },
    #[error("the home assignment is for {what} {recorded}; this run has {run}")]
    Mismatch {
        what: &'static str,
        recorded: u64,
        run: u64,
    },
    #[error("page {page}'s home is node {home}, but the cluster has {nodes} nodes")]
    NoSuchNode { page: u64, home: u64, nodes: u64 },
}

impl HomeAssignment {
    /// The text form (module doc).
    pub fn render(&self) -> String {
        let mut s = format!(
            "# cashmere homes\nnodes {}\npage_size {}\npages {}\n",
            self.nodes,
            self.page_size,
            self.homes.len()
        );
        for (p, h) in self.homes.iter().enumerate() {
            if let Some(h) = h {
                let _ = writeln!(s, "{p} {h}");
            }
        }
        s
    }

    /// Read the text form.
    pub fn parse(text: &str) -> Result<HomeAssignment, HomesError> {
        let mut header = [None::<u64>; 3];
        let mut homes: Vec<Option<u32>> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let syntax = |why: String| HomesError::Syntax { line, why };
            let l = raw.split('#').next().unwrap_or("").trim();
            if l.is_empty() {
                continue;
            }
            let mut it = l.split_whitespace();
            let (a, b) = match (it.next(), it.next(), it.next()) {
                (Some(a), Some(b), None) => (a, b),
                _ => return Err(syntax(format!("{l:?}: two fields expected"))),
            };
            let num = |s: &str| {
                s.parse::<u64>()
                    .map_err(|e| syntax(format!("{s:?} is not a number: {e}")))
            };
            let slot = ["nodes", "page_size", "pages"].iter().position(|k| *k == a);
            match slot {
                Some(k) => {
                    if header[k].is_some() {
                        return Err(syntax(format!("{a} given twice")));
                    }
                    let v = num(b)?;
                    // Bounded before the page table is allocated from it.
                    let most = [
                        dsm_core::MAX_PROTOCOL_NODES as u64,
                        8192,
                        (dsm_core::MAX_HEAP_BYTES / 4096) as u64,
                    ][k];
                    if v > most {
                        return Err(syntax(format!("{a} {v}: at most {most}")));
                    }
                    header[k] = Some(v);
                    if k == 2 {
                        homes = vec![
                            None;
                            usize::try_from(v)
                                .expect("bounded by the header's limits above")
                        ];
                    }
                }
                None => {
                    let (Some(nodes), Some(_), Some(pages)) = (header[0], header[1], header[2])
                    else {
                        return Err(syntax("a page before nodes, page_size and pages".into()));
                    };
                    let (p, h) = (num(a)?, num(b)?);
                    if p >= pages {
                        return Err(syntax(format!("page {p}: there are {pages}")));
                    }
                    if h >= nodes {
                        return Err(HomesError::NoSuchNode {
                            page: p,
                            home: h,
                            nodes,
                        });
                    }
                    let i = usize::try_from(p).expect("bounded by the header's limits above");
                    if let Some(was) = homes[i] {
                        return Err(syntax(format!(
                            "page {p} given twice (homes {was} and {h})"
                        )));
                    }
                    homes[i] =
                        Some(u32::try_from(h).expect("bounded by the header's limits above"));
                }
            }
        }
        match header {
            [Some(nodes), Some(page_size), Some(_)] => Ok(HomeAssignment {
                nodes: u32::try_from(nodes).expect("bounded by the header's limits above"),
                page_size: u32::try_from(page_size).expect("bounded by the header's limits above"),
                homes,
            }),
            _ => Err(HomesError::Syntax {
                line: text.lines().count(),
                why: "nodes, page_size and pages are all needed".into(),
            }),
        }
    }

    /// Whether this assignment fits a run of `nodes` nodes with `pages`
    /// pages of `page_size` bytes.
    pub fn check(&self, nodes: u32, page_size: u32, pages: u32) -> Result<(), HomesError> {
        for (what, recorded, run) in [
            ("nodes", self.nodes, nodes),
            ("page size", self.page_size, page_size),
            (
                "heap pages",
                u32::try_from(self.homes.len()).unwrap_or(u32::MAX),
                pages,
            ),
        ] {
            if recorded != run {
                return Err(HomesError::Mismatch {
                    what,
                    recorded: recorded.into(),
                    run: run.into(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignment_round_trips_through_its_text() {
        let a = HomeAssignment {
            nodes: 4,
            page_size: 8192,
            homes: vec![Some(0), None, Some(3), Some(1)],
        };
        let b = HomeAssignment::parse(&a.render()).unwrap();
        assert_eq!(a, b);
        assert!(b.check(4, 8192, 4).is_ok());
        assert!(matches!(
            b.check(2, 8192, 4),
            Err(HomesError::Mismatch { what: "nodes", .. })
        ));
        assert!(matches!(
            b.check(4, 8192, 5),
            Err(HomesError::Mismatch {
                what: "heap pages",
                ..
            })
        ));
    }

    #[test]
    fn bad_assignments_are_refused_naming_the_line() {
        let head = "nodes 2\npage_size 4096\npages 3\n";
        assert!(matches!(
            HomeAssignment::parse(&format!("{head}1 2\n")),
            Err(HomesError::NoSuchNode {
                page: 1,
                home: 2,
                ..
            })
        ));
        assert!(matches!(
            HomeAssignment::parse(&format!("{head}3 0\n")),
            Err(HomesError::Syntax { line: 4, .. })
        ));
        assert!(matches!(
            HomeAssignment::parse("0 1\n"),
            Err(HomesError::Syntax { line: 1, .. })
        ));
        assert!(matches!(
            HomeAssignment::parse("nodes 2\npages 3\n"),
            Err(HomesError::Syntax { .. })
        ));
    }

    #[test]
    fn a_page_twice_a_header_twice_and_huge_headers_are_refused() {
        let head = "nodes 2\npage_size 4096\npages 3\n";
        let e = HomeAssignment::parse(&format!("{head}0 0\n0 1\n")).unwrap_err();
        assert!(e.to_string().contains("page 0 given twice"), "{e}");
        let e = HomeAssignment::parse(&format!("{head}pages 3\n")).unwrap_err();
        assert!(e.to_string().contains("pages given twice"), "{e}");
        for big in [
            "nodes 65\n",
            "page_size 4294967296\n",
            "pages 4294967295\n",
            "pages 18446744073709551615\n",
        ] {
            let e = HomeAssignment::parse(big).unwrap_err();
            assert!(e.to_string().contains("at most"), "{big}: {e}");
        }
        assert!(matches!(
            HomeAssignment::parse(&format!("{head}1 18446744073709551615\n")),
            Err(HomesError::NoSuchNode { home: u64::MAX, .. })
        ));
    }
}
