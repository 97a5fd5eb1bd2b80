//! Host-side library of `mc-host`: finding and booting QEMU guests.
//!
//! The `mc-host` binary (src/main.rs) is the user interface; this library
//! holds what tests need to reach too.

pub mod qemu;
