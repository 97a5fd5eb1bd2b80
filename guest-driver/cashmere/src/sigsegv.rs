//! Access detection: a SIGSEGV handler that hands faults to the node's
//! protocol thread.
//!
//! Choice (documented in docs/cashmere.md): the handler itself does only
//! async-signal-safe things: atomic loads and stores on statically reachable
//! memory and `sched_yield`. It finds the node whose heap holds the faulting
//! address, claims a slot in that node's fault queue, records the address and
//! the protection the page had, and spins until the protocol thread marks the
//! slot done; then it returns and the access is retried. All protocol work
//! (locks, allocation, Memory Channel stores, `mprotect`) runs on the protocol
//! thread, in ordinary context. A fault outside every registered heap
//! reinstalls the previous handler and returns, so the access faults again
//! under it (Rust's stack-overflow handler, or the default action).

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::Once;

pub const SLOTS: usize = 64;
const FREE: u32 = 0;
const CLAIMED: u32 = 1;
const PENDING: u32 = 2;
const DONE: u32 = 3;
const FAILED: u32 = 4;

pub struct Slot {
    state: AtomicU32,
    addr: AtomicUsize,
    prot: AtomicU8,
}

/// One node's faults waiting for its protocol thread, and the protection of
/// each page as the handler may read it.
pub struct FaultQueue {
    base: usize,
    len: usize,
    page_size: usize,
    slots: [Slot; SLOTS],
    /// Current protection of each page of the application view (a `Prot`).
    pub prot: Box<[AtomicU8]>,
}

/// A fault for the protocol thread: offset in the heap, and the protection the
/// page had when it faulted.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    pub slot: usize,
    pub offset: usize,
    pub prot: u8,
}

impl FaultQueue {
    pub fn new(base: usize, len: usize, page_size: usize) -> FaultQueue {
        FaultQueue {
            base,
            len,
            page_size,
            slots: std::array::from_fn(|_| Slot {
                state: AtomicU32::new(FREE),
                addr: AtomicUsize::new(0),
                prot: AtomicU8::new(0),
            }),
            prot: (0..len / page_size).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    /// Faults waiting now.
    pub fn pending(&self, out: &mut Vec<Fault>) {
        for (i, s) in self.slots.iter().enumerate() {
            if s.state.load(Ordering::Acquire) == PENDING {
                out.push(Fault {
                    slot: i,
                    offset: s.addr.load(Ordering::Relaxed) - self.base,
                    prot: s.prot.load(Ordering::Relaxed),
                });
            }
        }
    }

    pub fn complete(&self, f: &Fault, ok: bool) {
        self.slots[f.slot]
            .state
            .store(if ok { DONE } else { FAILED }, Ordering::Release);
    }

    /// Signal context: only atomics and sched_yield.
    fn handle(&self, addr: usize) {
        let page = (addr - self.base) / self.page_size;
        let prot = self.prot[page].load(Ordering::Acquire);
        loop {
            for s in self.slots.iter() {
                if s.state
                    .compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    s.addr.store(addr, Ordering::Relaxed);
                    s.prot.store(prot, Ordering::Relaxed);
                    s.state.store(PENDING, Ordering::Release);
                    let r = loop {
                        let st = s.state.load(Ordering::Acquire);
                        if st == DONE || st == FAILED {
                            break st;
                        }
                        // SAFETY: async-signal-safe system call.
                        unsafe { libc::sched_yield() };
                    };
                    s.state.store(FREE, Ordering::Release);
                    if r == FAILED {
                        let msg = b"cashmere: the protocol could not resolve a fault\n";
                        // SAFETY: async-signal-safe calls.
                        unsafe {
                            libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len());
                            libc::abort();
                        }
                    }
                    return;
                }
            }
            // SAFETY: async-signal-safe system call.
            unsafe { libc::sched_yield() };
        }
    }
}

/// Heaps (nodes) one process can hold at once.
pub const MAX_HEAPS: usize = 32;
static HEAPS: [AtomicPtr<FaultQueue>; MAX_HEAPS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_HEAPS];
static INSTALL: Once = Once::new();
static mut OLD: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();

extern "C" fn on_segv(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    for h in HEAPS.iter() {
        let q = h.load(Ordering::Acquire);
        if q.is_null() {
            continue;
        }
        // SAFETY: a registered queue stays alive until it is unregistered, and
        // a node unregisters only after its application threads are done.
        let q = unsafe { &*q };
        if addr >= q.base && addr < q.base + q.len {
            q.handle(addr);
            return;
        }
    }
    // Not ours: put the previous handler back and let the access fault again.
    // SAFETY: OLD was filled in before this handler was installed.
    unsafe {
        libc::sigaction(
            libc::SIGSEGV,
            std::ptr::addr_of!(OLD) as *const libc::sigaction,
            std::ptr::null_mut(),
        );
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: installing a handler with a zeroed, then filled sigaction.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_segv as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut sa.sa_mask);
            let old = std::ptr::addr_of_mut!(OLD) as *mut libc::sigaction;
            libc::sigaction(libc::SIGSEGV, &sa, old);
        }
    });
}

/// Route faults in `q`'s range to it. Returns the registration index.
pub fn register(q: &FaultQueue) -> Option<usize> {
    install();
    let p = q as *const FaultQueue as *mut FaultQueue;
    for (i, h) in HEAPS.iter().enumerate() {
        if h.compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return Some(i);
        }
    }
    None
}

pub fn unregister(index: usize) {
    HEAPS[index].store(std::ptr::null_mut(), Ordering::Release);
}
