//! The SIGSEGV and SIGTRAP handlers of plain stores (see the module doc),
//! and the per-thread record of a store between its fault and its
//! single-step trap.
//!
//! Both handlers run with every signal blocked. They take no lock a thread
//! could hold while storing into a transmit view, except the allocator
//! inside the API's post (see docs/c-api.md, "Plain stores", for what that
//! means for stores made from a program's own signal handlers).

use std::cell::Cell;
use std::ffi::c_int;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use iced_x86::InstructionInfoFactory;

use super::context::Context;
use super::decode::{self, DecodeRefusal, Plan, View, MAX_STORE};
use super::table::{self, Entered};

/// The handlers that were installed before ours, for faults that are not
/// ours.
static PREVIOUS: OnceLock<(libc::sigaction, libc::sigaction)> = OnceLock::new();
/// iced's instruction-info tables, built once outside any handler.
static FACTORY: Mutex<Option<InstructionInfoFactory>> = Mutex::new(None);
/// Plain stores the API refused to post (the adapter offline, say), and the
/// first such failure, for `imc_ckerrcnt`.
static LOST: AtomicU64 = AtomicU64::new(0);
static LOST_FIRST: Mutex<Option<String>> = Mutex::new(None);

/// `si_code` of a fault on a mapped page without the access right.
const SEGV_ACCERR: c_int = 2;

/// A store between its fault and its trap.
#[derive(Clone, Copy)]
struct Step {
    slot: usize,
    reg: c_int,
    delta: u64,
    addr: usize,
    size: usize,
}

const NO_STEP: Step = Step {
    slot: 0,
    reg: 0,
    delta: 0,
    addr: 0,
    size: 0,
};
/// Nesting depth: a store in a program's signal handler that interrupted a
/// store between fault and trap, and so on.
const DEPTH: usize = 4;

thread_local! {
    static STEPS: Cell<([Step; DEPTH], usize)> = const { Cell::new(([NO_STEP; DEPTH], 0)) };
}

/// Install the handlers (once per process).
pub(crate) fn install() -> Result<(), std::io::Error> {
    if PREVIOUS.get().is_some() {
        return Ok(());
    }
    *FACTORY.lock().unwrap_or_else(|p| p.into_inner()) = Some(InstructionInfoFactory::new());
    let segv = set(libc::SIGSEGV, on_segv as Handler as *const () as usize)?;
    let trap = set(libc::SIGTRAP, on_trap as Handler as *const () as usize)?;
    let _ = PREVIOUS.set((segv, trap));
    Ok(())
}

type Handler = extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void);

fn set(sig: c_int, handler: usize) -> Result<libc::sigaction, std::io::Error> {
    // SAFETY: sigaction is plain data; zero is a valid starting value.
    let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
    new.sa_sigaction = handler;
    new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: `sigaction` is a plain C struct of integers, masks and a
    // function address, for which all-zero is a valid value.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: the set is ours to fill; the call installs a handler that
    // follows the SA_SIGINFO convention and saves the old one.
    let rc = unsafe {
        libc::sigfillset(&mut new.sa_mask);
        libc::sigaction(sig, &new, &mut old)
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(old)
}

/// Plain stores lost since the last call, and the first reason.
pub(crate) fn lost_stores() -> Option<(u64, String)> {
    let n = LOST.swap(0, Ordering::AcqRel);
    (n > 0).then(|| {
        let why = LOST_FIRST
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_default();
        (n, why)
    })
}

/// Post the bytes a store wrote; a failure is counted, not raised: a store
/// instruction has no way to return an error.
fn post(slot: &Entered, addr: usize, data: &[u8]) {
    if let Err(e) = slot.tx().write(addr - slot.view, data) {
        if LOST.fetch_add(1, Ordering::AcqRel) == 0 {
            *LOST_FIRST.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        }
    }
}

extern "C" fn on_segv(sig: c_int, info: *mut libc::siginfo_t, raw: *mut libc::c_void) {
    // SAFETY: an SA_SIGINFO handler gets a valid siginfo from the kernel.
    let (addr, code) = unsafe { ((*info).si_addr() as usize, (*info).si_code) };
    let slot = if code == SEGV_ACCERR {
        table::enter(addr)
    } else {
        None
    };
    let Some(slot) = slot else {
        return chain(0, sig, info, raw);
    };
    // SAFETY: `raw` is this handler's ucontext.
    let mut ctx = unsafe { Context::from_raw(raw) };
    if !ctx.fault_was_write() {
        return refuse(DecodeRefusal::Read, addr, ctx.rip());
    }
    let mut code_bytes = [0u8; 15];
    let got = read_code(ctx.rip(), &mut code_bytes);
    let plan = {
        let mut f = FACTORY.lock().unwrap_or_else(|p| p.into_inner());
        match f.as_mut() {
            Some(f) => decode::plan(
                f,
                &code_bytes[..got],
                &ctx,
                View {
                    start: slot.view,
                    len: slot.len,
                },
            ),
            None => Plan::Refuse(DecodeRefusal::Undecodable),
        }
    };
    match plan {
        Plan::Emulate {
            addr,
            size,
            data,
            next_rip,
        } => {
            // SAFETY: decode checked [addr, addr + size) lies in the view,
            // so its image lies in the backing memory the slot keeps mapped.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    slot.backing_of(addr) as *mut u8,
                    size,
                );
            }
            post(&slot, addr, &data[..size]);
            ctx.set_rip(next_rip);
        }
        Plan::Redirect { reg, addr, size } => {
            let delta = (slot.backing as u64).wrapping_sub(slot.view as u64);
            let step = Step {
                slot: slot.index,
                reg,
                delta,
                addr,
                size,
            };
            let (mut steps, n) = STEPS.get();
            if n == DEPTH {
                drop(slot);
                return refuse(DecodeRefusal::Undecodable, addr, ctx.rip());
            }
            steps[n] = step;
            STEPS.set((steps, n + 1));
            ctx.add_to_gpr(reg, delta);
            ctx.set_trap_flag(true);
            // Kept entered until the trap has sent the store.
            slot.keep();
        }
        Plan::Refuse(why) => {
            let rip = ctx.rip();
            drop(slot);
            refuse(why, addr, rip);
        }
    }
}

extern "C" fn on_trap(sig: c_int, info: *mut libc::siginfo_t, raw: *mut libc::c_void) {
    // SAFETY: an SA_SIGINFO handler gets a valid siginfo from the kernel.
    let code = unsafe { (*info).si_code };
    let (mut steps, n) = STEPS.get();
    if n == 0 || code <= 0 {
        // Not a single step of ours (a breakpoint, or raise/kill).
        return chain(1, sig, info, raw);
    }
    let step = steps[n - 1];
    steps[n - 1] = NO_STEP;
    STEPS.set((steps, n - 1));
    // SAFETY: `raw` is this handler's ucontext.
    let mut ctx = unsafe { Context::from_raw(raw) };
    ctx.add_to_gpr(step.reg, step.delta.wrapping_neg());
    // This context is the stepped instruction's; an outer step (a program's
    // signal handler stored while its thread was between fault and trap)
    // keeps its trap flag in the outer context, restored when the
    // program's handler returns.
    ctx.set_trap_flag(false);
    if let Some(slot) = table::kept(step.slot) {
        let mut buf = [0u8; MAX_STORE];
        let data = &mut buf[..step.size];
        // SAFETY: the store's bytes lie in the backing memory, mapped while
        // the slot is entered (its count is still held from the fault).
        unsafe {
            std::ptr::copy_nonoverlapping(
                slot.backing_of(step.addr) as *const u8,
                data.as_mut_ptr(),
                step.size,
            );
        }
        post(&slot, step.addr, data);
        // Dropping `slot` releases the count the fault kept.
    } else {
        table::leave(step.slot);
    }
}

/// Read up to 15 bytes of code at `rip`. Within the instruction's page the
/// bytes are read directly (the page holds the code that just ran); only an
/// instruction that may run into the next page is read with
/// process_vm_readv, which stops at the first unmapped byte instead of
/// faulting.
fn read_code(rip: u64, out: &mut [u8; 15]) -> usize {
    let to_page_end = table::page() - (firmware_model::to_usize(rip) % table::page());
    if to_page_end >= out.len() {
        // SAFETY: the 15 bytes lie in the page RIP executes from, which is
        // mapped and readable (code pages are readable on x86-64 Linux).
        unsafe { std::ptr::copy_nonoverlapping(rip as *const u8, out.as_mut_ptr(), out.len()) };
        return out.len();
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast::<libc::c_void>(),
        iov_len: out.len(),
    };
    let remote = libc::iovec {
        iov_base: rip as *mut libc::c_void,
        iov_len: out.len(),
    };
    // SAFETY: reads our own memory into `out`; a partial read stops at the
    // first unmapped byte and reports how much it copied.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    usize::try_from(n).unwrap_or(0)
}

/// Hand a signal that is not ours to the handler installed before ours, or
/// let its default action happen.
fn chain(which: usize, sig: c_int, info: *mut libc::siginfo_t, raw: *mut libc::c_void) {
    let Some(prev) = PREVIOUS.get().map(|p| if which == 0 { p.0 } else { p.1 }) else {
        return default_action(sig);
    };
    match prev.sa_sigaction {
        libc::SIG_DFL => default_action(sig),
        libc::SIG_IGN => {}
        h if prev.sa_flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: the program installed this SA_SIGINFO handler; we call
            // it as the kernel would have.
            let f: Handler = unsafe { std::mem::transmute::<usize, Handler>(h) };
            f(sig, info, raw);
        }
        h => {
            // SAFETY: the program installed this plain handler.
            let f: extern "C" fn(c_int) =
                unsafe { std::mem::transmute::<usize, extern "C" fn(c_int)>(h) };
            f(sig);
        }
    }
}

/// Restore the default action: returning re-executes the faulting
/// instruction, which then ends the process with the signal (and a core).
fn default_action(sig: c_int) {
    // SAFETY: plain data, filled before the call; SIG_DFL takes no handler.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut dfl.sa_mask);
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
        if sig == libc::SIGTRAP {
            // A trap does not repeat on return: raise it again.
            libc::raise(sig);
        }
    }
}

/// Stop the program with a message saying why its store was refused.
fn refuse(why: DecodeRefusal, addr: usize, rip: u64) {
    let mut msg = StackText::new();
    let _ = writeln!(
        msg,
        "libimc: {} (address {addr:#x}, instruction at {rip:#x})",
        why.message()
    );
    // SAFETY: write(2) of our own buffer to stderr; async-signal-safe.
    unsafe { libc::write(2, msg.buf.as_ptr().cast::<libc::c_void>(), msg.len) };
    default_action(libc::SIGSEGV);
}

/// A message formatted without allocating (in a signal handler).
struct StackText {
    buf: [u8; 320],
    len: usize,
}

impl StackText {
    fn new() -> Self {
        StackText {
            buf: [0; 320],
            len: 0,
        }
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}
