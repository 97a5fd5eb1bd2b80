//! A message as a receiver takes it from its mailbox or the barrier board.

use crate::Node;

/// A received message and when it arrived in virtual time.
pub struct Received {
    pub from: Node,
    pub bytes: Vec<u8>,
    pub arrival: Option<u64>,
}
