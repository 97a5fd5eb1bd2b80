//! Access detection (seed 002 s.3.1): a SIGSEGV handler that resolves the
//! fault on the faulting thread itself, with no hand-off to another thread.
//!
//! Why running the protocol inside the handler is safe here:
//! - **It interrupted application code only.** The application view of the
//!   heap is the only memory whose protection Cashmere changes, and only
//!   `SharedArray::get`/`set` (a volatile load or store in the program's own
//!   code) touch it. Cashmere and the Memory Channel API work on the heap
//!   through the protocol view, which is always read-write, so they never
//!   fault, and a thread is never inside them (holding one of their locks)
//!   when it faults. Nor is it inside the allocator or stdio: those never
//!   touch the heap.
//! - **The only locks it takes are ones the interrupted code cannot hold:**
//!   the node's state (held only inside Cashmere calls) and, briefly, the
//!   API's internal ones on the same terms. Another thread holding them
//!   finishes without needing the faulting thread, as in any program.
//! - **It allocates nothing:** the page arrives into the protocol view,
//!   twins live in a reserved twin space, the protocol's lists have room for
//!   every page, and stores go through the allocation-free
//!   `TxRegion::post` (with `--reliable` the API's check of each store does
//!   allocate; that is still safe by the first point, but not free of it).
//! - **It waits by system calls** that are async-signal-safe: `futex`,
//!   `nanosleep`, `clock_gettime`, `mprotect`, `write`.
//! - **It does not fault itself** (protocol view only), so `SA_NODEFER` never
//!   nests it.
//!
//! A fault outside every registered heap reinstalls the previous handler and
//! returns, so it faults again under it (Rust's stack-overflow handler, or
//! the default action). If the protocol cannot resolve a fault, the handler
//! tells the other nodes (the abort word), writes the reason to stderr from
//! a buffer on its stack, and aborts the process.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Once;

/// Why a fault could not be resolved (the protocol's own error).
pub type FaultError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the handler needs from whoever owns a heap: where its application
/// view is, and how to resolve a fault in it. (A node of a DSM protocol;
/// the handler knows nothing else of it.)
pub trait FaultHandler: Sync {
    /// The application view: its first byte's address and its length.
    fn heap_view(&self) -> (usize, usize);
    /// Resolve a fault at byte `offset` of the view, on the faulting thread.
    fn resolve_fault(&self, offset: usize) -> Result<(), FaultError>;
    /// The fault cannot be resolved: tell the other nodes, who would wait
    /// for this one, before the process aborts.
    fn abandon(&self);
    /// Which node this is, for the last words.
    fn node_id(&self) -> u32;
}

/// A registered handler: a thin pointer to it, so that it fits an
/// `AtomicPtr` slot.
struct Registration(*const (dyn FaultHandler + 'static));

/// Heaps (nodes) one process can hold at once.
pub const MAX_HEAPS: usize = 64;
static HEAPS: [AtomicPtr<Registration>; MAX_HEAPS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_HEAPS];
static INSTALL: Once = Once::new();
static mut OLD: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();

extern "C" fn on_segv(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    for h in HEAPS.iter() {
        let r = h.load(Ordering::Acquire);
        if r.is_null() {
            continue;
        }
        // SAFETY: a registration and the handler it points at stay alive
        // until it is unregistered (the node's Drop), which happens after
        // its application threads, the only ones that fault in its heap,
        // are done.
        let handler = unsafe { &*(*r).0 };
        let (base, len) = handler.heap_view();
        if addr >= base && addr < base + len {
            // The trap and the signal's delivery, which no counter sees.
            mc_api::vclock::charge_unseen(mc_api::vclock::Unseen::PageFault);
            if let Err(e) = handler.resolve_fault(addr - base) {
                fail(handler, addr - base, &e);
            }
            return;
        }
    }
    // Not ours: put the previous handler back and let the access fault again.
    // SAFETY: OLD was filled in before this handler was installed.
    unsafe {
        libc::sigaction(
            libc::SIGSEGV,
            std::ptr::addr_of!(OLD).cast::<libc::sigaction>(),
            std::ptr::null_mut(),
        );
    }
}

/// The fault cannot be resolved: the access cannot be retried. Tell the
/// others, say why (the error and its causes), abort.
fn fail(handler: &dyn FaultHandler, offset: usize, e: &FaultError) -> ! {
    handler.abandon();
    let mut line = StackLine::default();
    let _ = writeln!(
        line,
        "dsm: node{}: the fault at heap offset {offset:#x} cannot be resolved: {}",
        handler.node_id(),
        mc_api::ErrorChain(&**e)
    );
    // SAFETY: write(2) and abort(3) are async-signal-safe; the buffer is
    // ours and `len` bytes long.
    unsafe {
        libc::write(2, line.buf.as_ptr().cast::<libc::c_void>(), line.len);
        libc::abort();
    }
}

/// A line formatted on the stack (no allocation), cut at its capacity.
struct StackLine {
    buf: [u8; 512],
    len: usize,
}

impl Default for StackLine {
    fn default() -> Self {
        StackLine {
            buf: [0; 512],
            len: 0,
        }
    }
}

impl std::fmt::Write for StackLine {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: installing a handler with a zeroed, then filled sigaction.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            // Under counted work none of the handler's edges count but the
            // fault's protocol work (`times::enter`): whether a thread
            // faults on a page at all follows the host (another thread of
            // its node may have fetched it first).
            let handler =
                mc_api::vclock::counter::uncounted_signal_handler(on_segv).unwrap_or(on_segv);
            sa.sa_sigaction = handler as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut sa.sa_mask);
            let old = std::ptr::addr_of_mut!(OLD).cast::<libc::sigaction>();
            libc::sigaction(libc::SIGSEGV, &sa, old);
        }
    });
}

/// Route faults in `handler`'s heap to it. Returns the registration index.
/// The caller keeps `handler` alive until it calls [`unregister`].
pub fn register(handler: &(dyn FaultHandler + 'static)) -> Option<usize> {
    install();
    let r = Box::into_raw(Box::new(Registration(handler)));
    for (i, h) in HEAPS.iter().enumerate() {
        if h.compare_exchange(std::ptr::null_mut(), r, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return Some(i);
        }
    }
    // SAFETY: `r` was made above by Box::into_raw and published nowhere.
    drop(unsafe { Box::from_raw(r) });
    None
}

pub fn unregister(index: usize) {
    let r = HEAPS[index].swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !r.is_null() {
        // SAFETY: made by Box::into_raw in `register`; the swap took it out
        // of the table, and no handler runs in this heap any more (see
        // `on_segv`).
        drop(unsafe { Box::from_raw(r) });
    }
}
