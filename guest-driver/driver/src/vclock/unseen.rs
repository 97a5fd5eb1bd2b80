//! Work the counters cannot see, charged by a stated model (issue 39;
//! docs/virtual-time.md s.9).
//!
//! Counted work counts the edges of instrumented code only. The kernel
//! (a page fault's trap and signal delivery, `mprotect`) and the
//! precompiled libraries (libc's `memcpy` behind a page's copy) run
//! uncounted. Under counted work the protocol charges each such operation
//! here, at a constant from the literature, in virtual ns of the paper's
//! era processor, whatever the scales (the constants are already times on
//! such a processor). Under CPU time these calls do nothing: the thread's
//! CPU time already holds that work (the kernel's part included,
//! `CLOCK_THREAD_CPUTIME_ID` counts system time).
//!
//! The constants and their sources:
//! - [`PAGE_FAULT_NS`], 6.2 us: seed 001 (Bilas et al.'s VIA DSM study)
//!   Table 3, "Page fault 6.2 us" per page: the invocation of a user page
//!   fault handler on a 300 MHz Pentium II under Linux 2.2. Seed 000 (the
//!   Cashmere paper) gives no trap cost for its Alpha 21164A under Tru64;
//!   this is the nearest measured figure of the era.
//! - [`MPROTECT_NS`], 2.7 us: seed 001 Table 3, "Mprotect call 2.7 us",
//!   same machine. Charged per call (the table measures one page a call;
//!   Cashmere's calls here change one page or a run of pages).
//! - [`COPY_PS_PER_BYTE`], 8300 ps a byte: seed 000 s.3.1, "A twin
//!   operation requires 68 us" for an 8 KiB page on the paper's own
//!   AlphaServer 4100 (68 us / 8192 bytes); a twin is a page copy. (Seed
//!   001 Table 3's copy of a 4 KiB page, 23.2 us on the Pentium II, is 5.7
//!   ns a byte.)
//!
//! Not charged: the emulator's own system calls (the futex of a wait, a
//! clock read, the adapter's doorbells) are the emulation's machinery, with
//! no counterpart on the real cluster, whose adapter was written by stores;
//! and an application's own calls into libc (a C program's `memcpy`), which
//! the paper's sequential times include and the counters here do not.

use super::counter::Uncounted;
use super::thread::CLOCK;
use super::{enabled, WorkMeasure, GLOBAL};

/// A page fault's trap into the kernel and its signal's delivery to the
/// handler (seed 001 Table 3).
pub const PAGE_FAULT_NS: u64 = 6_200;
/// One `mprotect` call (seed 001 Table 3).
pub const MPROTECT_NS: u64 = 2_700;
/// Copying one byte (seed 000 s.3.1: a twin, 68 us for 8 KiB), in ps.
pub const COPY_PS_PER_BYTE: u64 = 68_000_000 / 8192;

/// An operation the counters cannot see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unseen {
    /// A page fault's trap and signal delivery, before the handler runs.
    PageFault,
    /// One `mprotect` system call.
    Mprotect,
    /// A copy by libc (`memcpy`) of this many bytes.
    Copy { bytes: u64 },
}

impl Unseen {
    /// What the model charges for it, in virtual ns.
    pub fn cost_ns(self) -> u64 {
        match self {
            Unseen::PageFault => PAGE_FAULT_NS,
            Unseen::Mprotect => MPROTECT_NS,
            Unseen::Copy { bytes } => {
                u64::try_from(u128::from(bytes) * u128::from(COPY_PS_PER_BYTE) / 1000)
                    .unwrap_or(u64::MAX)
            }
        }
    }
}

/// Charge `op` to the calling thread's clock under counted work (at its
/// next sync); nothing under CPU time or outside virtual time, and nothing
/// while the thread waits (unless it serves a request: a wait's work is not
/// its processor's). Async-signal-safe: the fault handler charges its trap.
pub fn charge_unseen(op: Unseen) {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return;
    };
    let _uncounted = Uncounted::enter();
    if g.config.work != WorkMeasure::Counted {
        return;
    }
    let _ = CLOCK.try_with(|c| {
        if c.waiting.get() == 0 || c.serving.get() {
            c.unseen.set(c.unseen.get().saturating_add(op.cost_ns()));
        }
    });
}
