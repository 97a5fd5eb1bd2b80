//! The program leaves: `exit(0)` in main ends the run as `MAIN_END` does,
//! any other exit tells the other nodes to stop, and a `fork`ed child is
//! refused.

use std::sync::atomic::Ordering;

use super::{ok, DONE, PROC, RUNTIME};

pub(super) fn stdout() -> *mut libc::FILE {
    extern "C" {
        static mut stdout: *mut libc::FILE;
    }
    // SAFETY: glibc's stdout, initialised before main.
    unsafe { stdout }
}

extern "C" fn at_exit(status: libc::c_int, _arg: *mut libc::c_void) {
    if DONE.load(Ordering::SeqCst) {
        return;
    }
    let Some(rt) = RUNTIME.get() else { return };
    if status == 0 && rt.me == 0 && PROC.with(|p| p.get()) == Some(0) {
        // main returned or called exit(0) without MAIN_END.
        ok(rt.main_end());
        return;
    }
    eprintln!(
        "csm: node {}: the program exited (status {status}) before the run ended: the other \
         nodes are told to stop",
        rt.me
    );
    DONE.store(true, Ordering::SeqCst);
    rt.csm.abort();
}

/// In a child of `fork`: it has no adapter and no part in the cluster, so
/// it must not go on as if it were a process of the program.
extern "C" fn forked_child() {
    const MSG: &[u8] = b"csm: fork is not supported: the program's processes are threads of the \
nodes' guest processes, and a forked child has no part in the cluster (docs/c-programs.md)\n";
    // SAFETY: write(2) and _exit(2) are async-signal-safe, as a child of a
    // multithreaded fork needs.
    unsafe {
        libc::write(2, MSG.as_ptr().cast::<libc::c_void>(), MSG.len());
        libc::_exit(1);
    }
}

pub(super) fn register_exit_handler() {
    // SAFETY: registers a plain function for fork's child.
    unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    extern "C" {
        fn on_exit(
            f: extern "C" fn(libc::c_int, *mut libc::c_void),
            arg: *mut libc::c_void,
        ) -> libc::c_int;
    }
    // SAFETY: registers a plain function with no argument.
    unsafe { on_exit(at_exit, std::ptr::null_mut()) };
}
