//! libimc: the TruCluster MEMORY CHANNEL API for C programs (seed 004,
//! Table 1 and Figure 6), on this project's Rust API (`mc-api`).
//!
//! Built as `libimc.so` and `libimc.a` with the header
//! `include/sys/imc.h`; `guest-driver/libimc/install.sh` installs them (the
//! header as `sys/imc.h`). A C program linked with it runs in a virtual
//! guest (`mc-host run --nodes N -- ./prog`: the adapter over vhost-user,
//! named by `MC_SOCKET`) and in a QEMU guest (the adapter's PCI function)
//! alike. docs/c-api.md is the programmer's guide.
//!
//! Files, one job each: `abi` (the header's numbers, and which error
//! becomes which code), `connect` (opening the adapter from the
//! environment), `library` (the process's state: the open channel, its
//! allocations, attachments and lock sets), `regions` (imc_as*), `locks`
//! (imc_lk*), `errcount` (imc_rderrcnt, imc_ckerrcnt, imc_perror),
//! `relay` (the command relay: signals and host names between nodes),
//! `hosts` (imc_kill, imc_gethosts, over the relay), `plain` (plain stores into transmit regions: the fault
//! and single-step handlers, imc_write).

mod abi;
mod connect;
mod errcount;
mod hosts;
mod library;
mod locks;
mod plain;
mod regions;
mod relay;
mod v5;
mod words;

use std::cell::RefCell;
use std::ffi::c_int;

use mc_api::{McError, MemoryChannel};

pub use abi::*;
pub use connect::open as open_adapter;
pub use mc_api::{ConnectError, ConnectOptions};

thread_local! {
    /// What the last failing call of this thread said, for `imc_perror`.
    static LAST_FAILURE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Record why a call fails and return its code.
pub(crate) fn failure(code: c_int, detail: impl Into<String>) -> c_int {
    let detail = detail.into();
    log::debug!("libimc: {}: {detail}", abi::describe(code));
    LAST_FAILURE.with(|f| *f.borrow_mut() = detail);
    code
}

/// Record an API error and return its code.
pub(crate) fn api_failure(e: &McError) -> c_int {
    failure(abi::code_of(e), firmware_model::ErrorChain(e).to_string())
}

/// This thread's last failure detail.
pub(crate) fn last_failure() -> String {
    LAST_FAILURE.with(|f| f.borrow().clone())
}

/// The process's Memory Channel, opened on first use as the C calls open
/// it: for libraries built on libimc (libump) that share its adapter.
pub fn memory_channel() -> Result<MemoryChannel, String> {
    library::library()
        .map(|l| l.mc.clone())
        .map_err(|_| last_failure())
}
