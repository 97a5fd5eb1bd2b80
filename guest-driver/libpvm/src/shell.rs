//! The task shell: what `mc-host pvm` starts on every adapter of the
//! cluster at once. The Memory Channel API opens every adapter of a
//! cluster together (its start-up rendezvous; late join is for an adapter
//! that crashed under a running program), so a task cannot bring up an
//! adapter of its own when pvm_spawn starts it later. Instead each
//! adapter's shell brings it and UMP up at the start, parks with the
//! relay, and when a spawn picks it, loads the program (built as a shared
//! object, docs/pvm.md) into itself and runs its `main` as the new task.

use std::ffi::{c_char, c_int, CString};

use pvm_relay::{env, Reply, Request};

use crate::relay::Relay;
use crate::task::{chain, node};

/// Why a shell could not run its program.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    #[error(transparent)]
    Enrol(#[from] crate::task::EnrolError),
    #[error(transparent)]
    Relay(#[from] crate::relay::RelayError),
    #[error("the relay answered the shell with {0:?}")]
    Unexpected(Reply),
    #[error("a name with a NUL byte: {0:?}")]
    Nul(String),
    #[error("cannot load {program} (build PVM programs with -shared -fPIC: docs/pvm.md): {why}")]
    Load { program: String, why: String },
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a string valid until the next dl call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-NULL, NUL-terminated (above).
        unsafe { std::ffi::CStr::from_ptr(e) }
            .to_string_lossy()
            .into_owned()
    }
}

type Main = unsafe extern "C" fn(c_int, *mut *mut c_char, *mut *mut c_char) -> c_int;

fn run() -> Result<c_int, ShellError> {
    crate::task::take_sigterm();
    let (mc, _node) = node()?;
    let relay = Relay::connect()?;
    let me = mc.node_id().0 as u32;
    let (program, args, tid, parent, siblings) = match relay.ask(&Request::Park { node: me })? {
        Reply::Assign {
            program,
            args,
            tid,
            parent,
            siblings,
        } => (program, args, tid, parent, siblings),
        other => return Err(ShellError::Unexpected(other)),
    };
    drop(relay);
    std::env::set_var(env::TID, tid.to_string());
    if parent > 0 {
        std::env::set_var(env::PARENT, parent.to_string());
    } else {
        std::env::remove_var(env::PARENT);
    }
    let sibs: Vec<String> = siblings.iter().map(i32::to_string).collect();
    std::env::set_var(env::SIBLINGS, sibs.join(","));
    let c = |s: &str| CString::new(s).map_err(|_| ShellError::Nul(s.into()));
    let path = c(&program)?;
    // SAFETY: a NUL-terminated path; the library stays loaded for the
    // life of the process.
    let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        return Err(ShellError::Load {
            program,
            why: dlerror(),
        });
    }
    // SAFETY: h is a loaded object; the name is NUL-terminated.
    let sym = unsafe { libc::dlsym(h, c"main".as_ptr()) };
    if sym.is_null() {
        return Err(ShellError::Load {
            program,
            why: "it has no main".into(),
        });
    }
    // SAFETY: `main` of a C program has this signature (argc, argv, envp).
    let main: Main = unsafe { std::mem::transmute::<*mut libc::c_void, Main>(sym) };
    let mut owned = vec![c(&program)?];
    for a in &args {
        owned.push(c(a)?);
    }
    let mut argv: Vec<*mut c_char> = owned.iter().map(|s| s.as_ptr().cast_mut()).collect();
    argv.push(std::ptr::null_mut());
    let argc = c_int::try_from(owned.len())
        .expect("fewer than 2^31 arguments: they came in one line from the relay");
    extern "C" {
        static mut environ: *mut *mut c_char;
    }
    // SAFETY: argv is a NULL-terminated list of strings alive for the
    // call (and after: `owned` lives until exit); environ is the process's.
    let r = unsafe { main(argc, argv.as_mut_ptr(), environ) };
    std::mem::forget(owned);
    Ok(r)
}

/// The shell's whole life: park, run the program assigned, exit with its
/// status (through `exit`, so the program's stdio is flushed).
#[no_mangle]
pub extern "C" fn pvm_mc_shell_main() -> c_int {
    let code = match run() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pvm-task: {}", chain(&e));
            127
        }
    };
    // SAFETY: ends the process as C's exit does, running atexit handlers
    // (libpvm-mc's flush of pending sends) and flushing stdio.
    unsafe { libc::exit(code) }
}
