//! Locks: a manager per lock (the lock's home node) and a distributed queue
//! (seed 001 s.3: "Each lock has a home through which the current owner of
//! the lock is found. Usually, a distributed queue is used").
//!
//! The manager remembers only the last requester. A request goes to the
//! manager, which grants a lock nobody has had, or forwards the request to
//! the last requester; that node hands the lock over when it releases (at
//! once, if it holds it no longer), with the write notices the requester has
//! not seen. A node that released with nobody waiting keeps the lock, so its
//! next acquire is local (seed 001 Table 4: "Acquire (Local, Remote) 1, 34").

use crate::{Node, VectorTime};

/// What the manager does with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockReply {
    /// Nobody has had the lock: the manager grants it, with no notices.
    Grant,
    /// Ask this node, the last to request it, to hand it over.
    Forward(Node),
}

/// At a lock's home: the last node to ask for it.
#[derive(Clone, Debug, Default)]
pub struct LockManager {
    tail: Option<Node>,
}

impl LockManager {
    pub fn new() -> LockManager {
        LockManager::default()
    }

    /// `requester` asks for the lock.
    pub fn request(&mut self, requester: Node) -> LockReply {
        match self.tail.replace(requester) {
            None => LockReply::Grant,
            Some(last) => LockReply::Forward(last),
        }
    }
}

/// A lock as one node holds it.
#[derive(Clone, Debug, Default)]
pub struct LockState {
    /// The lock is here (held, or kept after a release).
    owned: bool,
    held: bool,
    /// The next requester and its vector time, once forwarded here.
    successor: Option<(Node, VectorTime)>,
}

impl LockState {
    /// Take the lock without a message, if it is here and free.
    pub fn acquire_local(&mut self) -> bool {
        if self.owned && !self.held {
            self.held = true;
            true
        } else {
            false
        }
    }

    /// The grant arrived: the lock is here and held.
    pub fn granted(&mut self) {
        self.owned = true;
        self.held = true;
    }

    /// A request forwarded by the manager: returns the node to grant to now
    /// (the lock is here and free), or keeps it as the successor.
    pub fn forwarded(&mut self, requester: Node, time: VectorTime) -> Option<(Node, VectorTime)> {
        if self.owned && !self.held {
            self.owned = false;
            Some((requester, time))
        } else {
            self.successor = Some((requester, time));
            None
        }
    }

    /// Release: returns the successor to grant to, if one waits.
    pub fn release(&mut self) -> Option<(Node, VectorTime)> {
        self.held = false;
        let next = self.successor.take();
        if next.is_some() {
            self.owned = false;
        }
        next
    }

    pub fn is_held(&self) -> bool {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_travels_down_the_queue_and_stays_with_the_last_releaser() {
        let mut m = LockManager::new();
        let mut at: Vec<LockState> = vec![LockState::default(); 3];
        // Node 1 asks first: granted by the manager.
        assert_eq!(m.request(1), LockReply::Grant);
        at[1].granted();
        // Node 2 asks while 1 holds it: forwarded to 1, which hands over at
        // its release.
        assert_eq!(m.request(2), LockReply::Forward(1));
        assert_eq!(at[1].forwarded(2, VectorTime::new(3)), None);
        let (next, _) = at[1].release().expect("2 waits");
        assert_eq!(next, 2);
        at[2].granted();
        assert!(!at[1].acquire_local(), "1 gave it away");
        // Node 2 releases with nobody waiting: it keeps it, and takes it
        // again without a message.
        assert_eq!(at[2].release(), None);
        assert!(at[2].acquire_local());
        assert_eq!(at[2].release(), None);
        // Node 0 asks: forwarded to 2, which has it free and grants at once.
        assert_eq!(m.request(0), LockReply::Forward(2));
        assert_eq!(at[2].forwarded(0, VectorTime::new(3)).map(|g| g.0), Some(0));
        assert!(!at[2].acquire_local());
    }
}
