//! libpvm-mc: the PVM 3 library (Debian's `pvm3.h`, PVM 3.4) on UMP over
//! the emulated Memory Channel, as seed 004's Digital PVM was: "a complete
//! rewrite of the PVM 3.3 API library", messages done in-line over UMP's
//! channels, and only what must run elsewhere (spawning, the task table,
//! exit notices, group membership) relayed by `mc-host pvm` (the daemon's
//! part; `pvm-relay` has its words). A C program built against `pvm3.h`
//! links `-lpvm_mc` instead of `-lpvm3` (docs/pvm.md).
//!
//! Each task is its own process with its own adapter (a node of the
//! emulated cluster); `mc-host pvm` places a host's tasks on that host's
//! adapters, so tasks of one host and of different hosts alike talk over
//! Memory Channel (docs/pvm.md, "Several tasks on one host").
//!
//! One job per module: `codes` (pvm3.h's numbers and texts), `buffers`
//! (message buffers, packing), `pack` (pvm_pk*/pvm_upk* and the buffer
//! calls), `wire` (a message on a channel), `task` (enrolment, the task's
//! state), `relay` (the connection to mc-host), `transport` (messages over
//! UMP, matching, the loss watchdog), `msg` (send and receive calls),
//! `control` (identity, spawn, tables, notify, kill, options, errors),
//! `groups`, `reduce` (PvmMax, PvmMin, PvmSum, PvmProduct), `unsupported`.

mod buffers;
pub mod codes;
pub mod control;
pub mod groups;
pub mod msg;
pub mod pack;
pub mod reduce;
mod relay;
pub mod shell;
mod task;
mod transport;
pub mod unsupported;
mod wire;
