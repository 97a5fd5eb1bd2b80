//! Programs `mc-guest` runs on the Memory Channel API.

pub mod bench;
pub mod csm;
pub mod selftest;
