//! Programs `mc-guest` runs on the Memory Channel API.

pub mod bench;
pub mod bench_ump;
pub mod csm;
pub mod selftest;
