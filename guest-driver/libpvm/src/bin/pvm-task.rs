//! `pvm-task`: the task shell `mc-host pvm` starts on each adapter. It
//! loads libpvm-mc's shared library (`MC_PVM_LIB`) so that the programs it
//! later loads bind their pvm_* calls to that one copy, and hands over to
//! its `pvm_mc_shell_main` (guest-driver/libpvm/src/shell.rs).

use std::ffi::{c_int, CString};

fn main() {
    let lib = std::env::var(pvm_relay::env::LIBRARY).unwrap_or_else(|_| {
        eprintln!(
            "pvm-task: {} is not set: run PVM programs with `mc-host pvm`",
            pvm_relay::env::LIBRARY
        );
        std::process::exit(127)
    });
    let Ok(path) = CString::new(lib.clone()) else {
        eprintln!("pvm-task: {lib:?} has a NUL byte");
        std::process::exit(127)
    };
    // SAFETY: a NUL-terminated path; the library stays loaded.
    let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        // SAFETY: dlerror after a failed dlopen returns a string.
        let why = unsafe { std::ffi::CStr::from_ptr(libc::dlerror()) };
        eprintln!("pvm-task: cannot load {lib}: {}", why.to_string_lossy());
        std::process::exit(127)
    }
    // SAFETY: h is loaded; the name is NUL-terminated.
    let f = unsafe { libc::dlsym(h, c"pvm_mc_shell_main".as_ptr()) };
    if f.is_null() {
        eprintln!("pvm-task: {lib} is not libpvm-mc (no pvm_mc_shell_main)");
        std::process::exit(127)
    }
    // SAFETY: libpvm-mc's pvm_mc_shell_main takes nothing and never returns.
    let f: extern "C" fn() -> c_int = unsafe { std::mem::transmute(f) };
    f();
}
