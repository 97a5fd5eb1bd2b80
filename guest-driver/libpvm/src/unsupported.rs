//! The calls of pvm3.h that libpvm-mc does not support: each returns
//! PvmNotImpl and says so once on stderr (docs/pvm.md lists them), so a
//! program that uses one links and learns why it fails. pvm_catchout is
//! accepted: `mc-host pvm` prints every task's output already.

use std::ffi::c_int;

use crate::codes::{not_supported, PVM_OK};

macro_rules! unsupported {
    ($($name:ident),* $(,)?) => {$(
        /// Not supported by libpvm-mc: returns PvmNotImpl (docs/pvm.md).
        /// Arguments, whatever they are, are not read (on this ABI a
        /// caller may pass any).
        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            not_supported(stringify!($name))
        }
    )*};
}

unsupported!(
    pvm_addhosts,
    pvm_delhosts,
    pvm_halt,
    pvm_mstat,
    pvm_pstat,
    pvm_sendsig,
    pvm_start_pvmd,
    pvm_getfds,
    pvm_recvf,
    pvm_packf,
    pvm_unpackf,
    pvm_pkmesg,
    pvm_pkmesgbody,
    pvm_upkmesg,
    pvm_getminfo,
    pvm_setminfo,
    pvm_hostsync,
    pvm_tickle,
    pvm_archcode,
    pvm_export,
    pvm_unexport,
    pvm_putinfo,
    pvm_recvinfo,
    pvm_delinfo,
    pvm_getmboxinfo,
    pvm_insert,
    pvm_lookup,
    pvm_delete,
    pvm_newcontext,
    pvm_setcontext,
    pvm_getcontext,
    pvm_freecontext,
    pvm_addmhf,
    pvm_delmhf,
    pvm_reg_hoster,
    pvm_reg_rm,
    pvm_reg_tasker,
    pvm_reg_tracer,
    pvm_getnoresets,
    pvm_getmwid,
    pvm_setmwid,
);

/// pvm_catchout: every task's output already reaches `mc-host pvm`, which
/// prints it with the task's tid; accepted, nothing to do.
#[no_mangle]
pub extern "C" fn pvm_catchout(_file: *mut libc::FILE) -> c_int {
    PVM_OK
}
