//! Before `main`: give every node the same address space layout.
//!
//! The program's globals, shared memory (`globals.rs`), may hold addresses: of other
//! globals and functions (fixed: `mc-cc` links without PIE), of the shared
//! heap (fixed: its base), but also of libc's objects (`FILE *` from
//! `stdout`), of `argv` strings, of memory the dynamic loader mapped. Those
//! agree across nodes only without address space randomisation, so the
//! macro file's constructor calls [`early`], which re-executes the program
//! once with `personality(ADDR_NO_RANDOMIZE)`.
//!
//! The re-execution also pads the environment to a fixed size: the kernel
//! places the environment strings above the argument strings at the top of
//! the stack, and the nodes' environments differ (`MC_NODE`, `MC_SOCKET`),
//! so without the pad `argv[i]` would sit at different addresses.
//! `CSM_ASLR=keep` skips all of this.

use std::ffi::{c_char, CStr, CString};

const PAD: &str = "CSM_ENV_PAD";
/// The environment plus the executable's name, padded to this many bytes
/// (unless it is larger already: then no pad, and argv may differ).
const ENV_TARGET: usize = 64 * 1024;
const SELF: &str = "/proc/self/exe";

/// Called from the constructor the macro file puts in `MAIN_ENV`, with the
/// arguments glibc passes to constructors. Returns (does nothing) outside a
/// cluster, when already done, or when the kernel refuses.
///
/// # Safety
/// `argv` and `envp` are the NULL-terminated arrays the loader passed.
pub unsafe fn early(argv: *const *const c_char, envp: *const *const c_char) {
    if std::env::var_os("MC_NODE").is_none()
        || std::env::var("CSM_ASLR").is_ok_and(|v| v.trim() == "keep")
        || argv.is_null()
        || envp.is_null()
    {
        return;
    }
    // SAFETY: querying with 0xffffffff changes nothing.
    let persona = unsafe { libc::personality(0xffff_ffff) };
    if persona < 0 {
        return;
    }
    let randomised = persona & libc::ADDR_NO_RANDOMIZE == 0;
    if !randomised && std::env::var_os(PAD).is_some() {
        return;
    }
    let with_flag = libc::c_ulong::try_from(persona | libc::ADDR_NO_RANDOMIZE)
        .expect("non-negative: checked above");
    // SAFETY: as above; adds one flag for the next exec.
    if randomised && unsafe { libc::personality(with_flag) } < 0 {
        log::warn!("cannot turn off address space randomisation: pointers to libc objects or argv kept in globals differ between nodes");
        return;
    }
    let mut env: Vec<CString> = Vec::new();
    let mut p = envp;
    // SAFETY: envp is NULL-terminated, each entry a C string.
    unsafe {
        while !(*p).is_null() {
            let s = CStr::from_ptr(*p);
            if !s.to_bytes().starts_with(PAD.as_bytes()) {
                env.push(s.to_owned());
            }
            p = p.add(1);
        }
    }
    let used: usize =
        SELF.len() + 1 + env.iter().map(|e| e.as_bytes().len() + 1).sum::<usize>() + PAD.len() + 2;
    let pad = ENV_TARGET.saturating_sub(used).max(1);
    env.push(CString::new(format!("{PAD}={}", "x".repeat(pad))).unwrap_or_default());
    let mut envs: Vec<*const c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envs.push(std::ptr::null());
    let path = CString::new(SELF).unwrap_or_default();
    // SAFETY: argv as passed to us; envs NULL-terminated, its strings alive.
    unsafe { libc::execve(path.as_ptr(), argv, envs.as_ptr()) };
    // Still here: the exec failed; run as we are.
    log::warn!(
        "cannot re-execute {SELF} without address space randomisation: {}",
        std::io::Error::last_os_error()
    );
}
