//! Where each page lives: its home, which holds the up-to-date copy that
//! diffs are applied to and faults fetch from.

use crate::{Node, Page};

/// How homes are assigned (ours: seed 001 names neither; HLRC's papers use
/// both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HomePolicy {
    /// The first node to touch a page becomes its home (a single-writer
    /// page then needs no diffs at all: its writer is its home).
    #[default]
    FirstTouch,
    /// Page `p`'s home is node `p mod nodes`, fixed from the start.
    RoundRobin,
}

impl HomePolicy {
    /// The policy named `s` (`first-touch`, `round-robin`).
    pub fn from_name(s: &str) -> Option<HomePolicy> {
        match s {
            "first-touch" | "first_touch" => Some(HomePolicy::FirstTouch),
            "round-robin" | "round_robin" => Some(HomePolicy::RoundRobin),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HomePolicy::FirstTouch => "first-touch",
            HomePolicy::RoundRobin => "round-robin",
        }
    }
}

/// A page or node outside the heap or the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HomeError {
    #[error("page {page} is outside the shared heap of {pages} pages")]
    NoSuchPage { page: Page, pages: usize },
    #[error("node {node} is outside the cluster of {nodes} nodes")]
    NoSuchNode { node: Node, nodes: usize },
}

/// Every page's home, as one node knows it.
#[derive(Clone, Debug)]
pub struct Homes {
    policy: HomePolicy,
    nodes: usize,
    /// Per page: its home, once known.
    home: Vec<Option<Node>>,
}

impl Homes {
    /// `pages` pages on `nodes` nodes under `policy`.
    pub fn new(policy: HomePolicy, nodes: usize, pages: usize) -> Homes {
        let home = match policy {
            HomePolicy::FirstTouch => vec![None; pages],
            HomePolicy::RoundRobin => (0..pages).map(|p| Some(p % nodes.max(1))).collect(),
        };
        Homes {
            policy,
            nodes,
            home,
        }
    }

    pub fn policy(&self) -> HomePolicy {
        self.policy
    }

    fn check(&self, page: Page) -> Result<(), HomeError> {
        if page < self.home.len() {
            Ok(())
        } else {
            Err(HomeError::NoSuchPage {
                page,
                pages: self.home.len(),
            })
        }
    }

    /// The home of `page`, if one is known yet.
    pub fn home_of(&self, page: Page) -> Result<Option<Node>, HomeError> {
        self.check(page)?;
        Ok(self.home[page])
    }

    /// `node` touched `page` first, as far as the one who decides knows:
    /// returns the page's home, which is `node` unless the page already
    /// had one (a claim that lost a race, or round-robin's fixed home).
    pub fn claim(&mut self, page: Page, node: Node) -> Result<Node, HomeError> {
        self.check(page)?;
        if node >= self.nodes {
            return Err(HomeError::NoSuchNode {
                node,
                nodes: self.nodes,
            });
        }
        Ok(*self.home[page].get_or_insert(node))
    }

    /// Learn that `page`'s home is `node` (from the one who decided).
    pub fn learn(&mut self, page: Page, node: Node) -> Result<(), HomeError> {
        self.check(page)?;
        if node >= self.nodes {
            return Err(HomeError::NoSuchNode {
                node,
                nodes: self.nodes,
            });
        }
        self.home[page] = Some(node);
        Ok(())
    }

    /// Pages whose home is `node`.
    pub fn homed_at(&self, node: Node) -> impl Iterator<Item = Page> + '_ {
        self.home
            .iter()
            .enumerate()
            .filter(move |(_, h)| **h == Some(node))
            .map(|(p, _)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_homes_are_fixed_and_spread() {
        let mut h = Homes::new(HomePolicy::RoundRobin, 3, 7);
        assert_eq!(h.home_of(4), Ok(Some(1)));
        assert_eq!(h.claim(4, 2), Ok(1), "a claim cannot move a fixed home");
        assert_eq!(h.homed_at(0).collect::<Vec<_>>(), vec![0, 3, 6]);
    }

    #[test]
    fn the_first_claim_wins_under_first_touch() {
        let mut h = Homes::new(HomePolicy::FirstTouch, 4, 2);
        assert_eq!(h.home_of(1), Ok(None));
        assert_eq!(h.claim(1, 3), Ok(3));
        assert_eq!(h.claim(1, 0), Ok(3));
        assert_eq!(h.home_of(1), Ok(Some(3)));
    }

    #[test]
    fn pages_and_nodes_outside_are_refused() {
        let mut h = Homes::new(HomePolicy::FirstTouch, 2, 2);
        assert_eq!(
            h.claim(2, 0),
            Err(HomeError::NoSuchPage { page: 2, pages: 2 })
        );
        assert_eq!(
            h.claim(0, 5),
            Err(HomeError::NoSuchNode { node: 5, nodes: 2 })
        );
        assert_eq!(
            HomePolicy::from_name("round-robin"),
            Some(HomePolicy::RoundRobin)
        );
        assert_eq!(HomePolicy::from_name("nearest"), None);
    }
}
