//! Regions of Memory Channel space (seed 004, Table 1): imc_asalloc,
//! imc_asattach, imc_asdetach, imc_asdealloc. A transmit attachment
//! returns a view the program writes with plain stores (`plain`); a
//! receive attachment returns the receive memory itself, which the
//! adapter DMAs into and the program reads with plain loads.

use std::ffi::{c_char, c_int};

use mc_api::{McError, Permissions, Sharing};

use crate::abi::*;
use crate::library::library;
use crate::words::{int_of, word_of};
use crate::{api_failure, failure, plain};

/// Allocate `size` bytes (rounded up to whole pages) under `key`, or find
/// the region another process allocated under it; its id in `*id`.
///
/// # Safety
/// `id` must be NULL or point to a writable `imc_asid_t`.
#[no_mangle]
pub unsafe extern "C" fn imc_asalloc(
    key: c_int,
    size: libc::size_t,
    perm: c_int,
    flag: c_int,
    id: *mut c_int,
) -> c_int {
    if id.is_null() || size == 0 || flag & !IMC_COHERENT != 0 || perm & !PERM_ALL != 0 {
        return failure(
            IMC_BADPARM,
            "imc_asalloc: id NULL, size 0, or an unknown flag or permission bit",
        );
    }
    let lib = match library() {
        Ok(l) => l,
        Err(c) => return c,
    };
    let bytes = (size as u64).next_multiple_of(lib.page_size);
    let permissions = Permissions {
        others_transmit: perm & PERM_WRITE != 0,
        others_receive: perm & PERM_READ != 0,
    };
    match lib
        .mc
        .region_alloc_with(word_of(key), bytes, flag & IMC_COHERENT != 0, permissions)
    {
        Ok(rid) => {
            lib.regions().allocated.insert(rid);
            // SAFETY: checked non-NULL; the caller promises it is writable.
            unsafe { *id = int_of(rid) };
            IMC_SUCCESS
        }
        Err(e) => api_failure(&e),
    }
}

/// Attach region `id` for transmit or receive; its address in `*address`.
///
/// # Safety
/// `address` must be NULL or point to a writable `char *`.
#[no_mangle]
pub unsafe extern "C" fn imc_asattach(
    id: c_int,
    dir: c_int,
    mode: c_int,
    flag: c_int,
    address: *mut *mut c_char,
) -> c_int {
    let transmit = match dir {
        IMC_TRANSMIT => true,
        IMC_RECEIVE => false,
        _ => {
            return failure(
                IMC_BADPARM,
                "imc_asattach: dir is neither IMC_TRANSMIT nor IMC_RECEIVE",
            )
        }
    };
    let sharing = match mode {
        IMC_SHARED => Sharing::Shared,
        IMC_EXCLUSIVE => Sharing::Exclusive,
        _ => {
            return failure(
                IMC_BADPARM,
                "imc_asattach: mode is neither IMC_SHARED nor IMC_EXCLUSIVE",
            )
        }
    };
    let flags_ok = if transmit {
        flag & !IMC_LOOPBACK == 0
    } else {
        flag == 0
    };
    if address.is_null() || !flags_ok || id < 0 {
        return failure(
            IMC_BADPARM,
            "imc_asattach: address NULL, a negative id, or a flag other than IMC_LOOPBACK (transmit only)",
        );
    }
    let lib = match library() {
        Ok(l) => l,
        Err(c) => return c,
    };
    let rid = word_of(id);
    let mut book = lib.regions();
    let a = book.attached.entry(rid).or_default();
    if (transmit && a.tx.is_some()) || (!transmit && a.rx.is_some()) {
        return failure(
            IMC_ATTACHED,
            format!("region {id} is attached for that direction by this process already"),
        );
    }
    let at = if transmit {
        let tx = match lib
            .mc
            .attach_transmit(rid, sharing, flag & IMC_LOOPBACK != 0)
        {
            Ok(t) => t,
            Err(e) => return forget_empty(&mut book, rid, api_failure(&e)),
        };
        match plain::map(tx) {
            Ok(view) => {
                a_mut(&mut book, rid).tx = Some(view);
                view
            }
            Err(code) => return forget_empty(&mut book, rid, code),
        }
    } else {
        match lib.mc.attach_receive(rid, sharing, false) {
            Ok(rx) => {
                let p = rx.as_ptr() as usize;
                a_mut(&mut book, rid).rx = Some(rx);
                p
            }
            Err(e) => return forget_empty(&mut book, rid, api_failure(&e)),
        }
    };
    // SAFETY: checked non-NULL; the caller promises it is writable.
    unsafe { *address = at as *mut c_char };
    IMC_SUCCESS
}

fn a_mut(book: &mut crate::library::RegionBook, rid: u32) -> &mut crate::library::Attached {
    book.attached.entry(rid).or_default()
}

/// After a failed attach: drop an entry that holds no attachment.
fn forget_empty(book: &mut crate::library::RegionBook, rid: u32, code: c_int) -> c_int {
    if book
        .attached
        .get(&rid)
        .is_some_and(|a| a.tx.is_none() && a.rx.is_none())
    {
        book.attached.remove(&rid);
    }
    code
}

/// Detach every attachment of region `id` in this process.
#[no_mangle]
pub extern "C" fn imc_asdetach(id: c_int) -> c_int {
    let lib = match library() {
        Ok(l) => l,
        Err(c) => return c,
    };
    let Some(a) = lib.regions().attached.remove(&word_of(id)) else {
        return failure(
            IMC_NOTATTACHED,
            format!("region {id} is not attached by this process"),
        );
    };
    if let Some(view) = a.tx {
        // Dropping the handle detaches; the stores before are all posted.
        drop(plain::unmap(view));
    }
    drop(a.rx);
    IMC_SUCCESS
}

/// Deallocate region `id` for this process. The region itself goes when
/// no node has it attached any more (the last process's deallocation).
#[no_mangle]
pub extern "C" fn imc_asdealloc(id: c_int) -> c_int {
    let lib = match library() {
        Ok(l) => l,
        Err(c) => return c,
    };
    let rid = word_of(id);
    {
        let mut book = lib.regions();
        if book.attached.contains_key(&rid) {
            return failure(
                IMC_ATTACHED,
                format!("region {id} is still attached by this process: imc_asdetach first"),
            );
        }
        if !book.allocated.remove(&rid) {
            return failure(
                IMC_BADREGION,
                format!("region {id} was not allocated by this process"),
            );
        }
    }
    match lib.mc.region_dealloc(rid) {
        // Attached elsewhere, or already gone: this process's share is given
        // back either way.
        Ok(()) | Err(McError::Busy { .. }) | Err(McError::NoSuchRegion(_)) => IMC_SUCCESS,
        Err(e) => api_failure(&e),
    }
}
