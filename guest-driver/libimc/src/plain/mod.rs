//! Plain stores into transmit regions (seed 004: "writes to that region are
//! just simple stores to a process virtual address").
//!
//! The address `imc_asattach(.., IMC_TRANSMIT, ..)` returns is a view: pages
//! mapped with no access at all, each region backed by ordinary memory
//! elsewhere. A store into the view faults (SIGSEGV, a write); the handler
//! decodes the instruction (`decode`) and either
//!
//! - performs it itself when it is a plain `MOV` of a register or an
//!   immediate (the value and size are in the instruction): the bytes go
//!   into the backing memory and onto the network through the API's posted
//!   store path, and RIP moves past the instruction. One signal per store.
//! - or redirects it: adds the view-to-backing distance to its base
//!   register, sets the trap flag and returns; the instruction runs once,
//!   writing into the backing memory; the single-step trap (SIGTRAP) sends
//!   exactly the bytes it wrote, moves the register back and clears the
//!   flag. Two signals per store.
//!
//! Either way a store is on the network (in the node's transmit FIFO)
//! before the thread's next instruction, so one thread's stores go out in
//! program order, and with the hardware's guarantees from there on.
//!
//! Several threads: the view never becomes writable, so every store of
//! every thread faults; no thread can store while another has a page
//! "open". The single-step state (which register moved, where the store
//! goes) is per thread, a small stack in a thread-local, so a signal
//! handler of the program that stores while the thread is between fault
//! and trap nests correctly. Two threads that store to the same bytes at
//! the same moment each send what the backing memory holds after their
//! store: the last value is right everywhere, an intermediate one may be
//! sent twice instead of once each (such stores were unordered anyway).
//!
//! Limits: loads and read-modify-writes of a transmit address stop the
//! program (SIGSEGV, as on the hardware: transmit space is write-only);
//! stores without a base register or whose base is also their data or
//! index, and scatters, stop it too, with a message naming `imc_write`.
//! `rep movs`/`rep stos` (glibc's memcpy/memset above a few KiB) trap once
//! per element. The program must not install its own SIGSEGV or SIGTRAP
//! handler after its first imc call, nor block those signals. See
//! docs/c-api.md, "Plain stores".

mod context;
mod decode;
mod handler;
mod table;

use std::ffi::c_int;

use mc_api::TxRegion;

use crate::abi::{IMC_BADPARM, IMC_NOMEM, IMC_SUCCESS};
use crate::failure;

pub(crate) use handler::{install, lost_stores};

/// Map a transmit attachment: returns the view address the program
/// stores into.
pub(crate) fn map(tx: TxRegion) -> Result<usize, c_int> {
    let len = tx.len();
    let bytes = len.next_multiple_of(table::page());
    // SAFETY: anonymous mappings of our own; no existing memory is touched.
    let view = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if view == libc::MAP_FAILED {
        return Err(failure(IMC_NOMEM, "mapping a transmit view failed"));
    }
    // SAFETY: a private anonymous mapping at an address the kernel picks:
    // no existing memory is touched.
    let backing = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if backing == libc::MAP_FAILED {
        // SAFETY: the view mapped just above, used by nobody yet.
        unsafe { libc::munmap(view, bytes) };
        return Err(failure(
            IMC_NOMEM,
            "mapping a transmit region's memory failed",
        ));
    }
    match table::publish(view as usize, len, backing as usize, Box::new(tx)) {
        Ok(_) => Ok(view as usize),
        Err(tx) => {
            drop(tx);
            // SAFETY: both mapped above and never published.
            unsafe {
                libc::munmap(view, bytes);
                libc::munmap(backing, bytes);
            }
            Err(failure(
                IMC_NOMEM,
                "too many transmit attachments in this process",
            ))
        }
    }
}

/// Tear down the transmit mapping at `view` and hand back the API handle
/// (dropping it detaches). Stores made before are already posted.
pub(crate) fn unmap(view: usize) -> Option<TxRegion> {
    let (len, backing, tx) = table::unpublish(view)?;
    let bytes = len.next_multiple_of(table::page());
    // SAFETY: the mappings made in `map`, unpublished: no handler uses them.
    unsafe {
        libc::munmap(view as *mut libc::c_void, bytes);
        libc::munmap(backing as *mut libc::c_void, bytes);
    }
    Some(*tx)
}

/// `imc_write`: copy `src` to the transmit address `dst` as one posted
/// write, as the plain stores would, without a trap per store.
pub(crate) fn write(dst: usize, src: &[u8]) -> c_int {
    let Some(slot) = table::enter(dst) else {
        return failure(
            IMC_BADPARM,
            "imc_write: the destination is not in a transmit region of this process",
        );
    };
    let offset = dst - slot.view;
    if offset + src.len() > slot.len {
        return failure(
            IMC_BADPARM,
            "imc_write: the write crosses the end of its transmit region",
        );
    }
    // SAFETY: [offset, offset + len) lies in the backing mapping, which the
    // entered slot keeps mapped.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), (slot.backing + offset) as *mut u8, src.len());
    }
    match slot.tx().write(offset, src) {
        Ok(()) => IMC_SUCCESS,
        Err(e) => crate::api_failure(&e),
    }
}
