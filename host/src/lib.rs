//! Host-side library of `mc-host`: finding and booting QEMU guests, and
//! `mc-host report` (running the application suite, rendering its tables
//! and charts).
//!
//! The `mc-host` binary (src/main.rs) is the user interface; this library
//! holds what tests need to reach too.

pub mod qemu;
pub mod report;
