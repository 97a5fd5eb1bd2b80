//! pvm3.h's numbers: return codes, data types, options; the text of each
//! code (pvm_perror, pvm_strerror) and the one-time notice of what is not
//! supported.

use std::collections::HashSet;
use std::ffi::c_int;
use std::sync::Mutex;

pub const PVM_OK: c_int = 0;
pub const PVM_BAD_PARAM: c_int = -2;
pub const PVM_MISMATCH: c_int = -3;
pub const PVM_OVERFLOW: c_int = -4;
pub const PVM_NO_DATA: c_int = -5;
pub const PVM_NO_HOST: c_int = -6;
pub const PVM_NO_FILE: c_int = -7;
pub const PVM_DENIED: c_int = -8;
pub const PVM_NO_MEM: c_int = -10;
pub const PVM_BAD_MSG: c_int = -12;
pub const PVM_SYS_ERR: c_int = -14;
pub const PVM_NO_BUF: c_int = -15;
pub const PVM_NO_SUCH_BUF: c_int = -16;
pub const PVM_NULL_GROUP: c_int = -17;
pub const PVM_DUP_GROUP: c_int = -18;
pub const PVM_NO_GROUP: c_int = -19;
pub const PVM_NOT_IN_GROUP: c_int = -20;
pub const PVM_NO_INST: c_int = -21;
pub const PVM_HOST_FAIL: c_int = -22;
pub const PVM_NO_PARENT: c_int = -23;
pub const PVM_NOT_IMPL: c_int = -24;
pub const PVM_DSYS_ERR: c_int = -25;
pub const PVM_BAD_VERSION: c_int = -26;
pub const PVM_OUT_OF_RES: c_int = -27;
pub const PVM_DUP_HOST: c_int = -28;
pub const PVM_CANT_START: c_int = -29;
pub const PVM_ALREADY: c_int = -30;
pub const PVM_NO_TASK: c_int = -31;
pub const PVM_NOT_FOUND: c_int = -32;
pub const PVM_EXISTS: c_int = -33;
pub const PVM_HOSTR_NMSTR: c_int = -34;
pub const PVM_PARENT_NOT_SET: c_int = -35;
pub const PVM_IP_LOOPBACK: c_int = -36;

/// Encodings of pvm_initsend / pvm_mkbuf.
pub const DATA_DEFAULT: c_int = 0;
pub const DATA_RAW: c_int = 1;
pub const DATA_IN_PLACE: c_int = 2;

/// pvm_spawn flags.
pub const TASK_HOST: c_int = 1;
pub const TASK_ARCH: c_int = 2;
pub const TASK_DEBUG: c_int = 4;
pub const TASK_TRACE: c_int = 8;

/// pvm_notify kinds.
pub const NOTIFY_TASK_EXIT: c_int = 1;

/// pvm_setopt / pvm_getopt.
pub const OPT_ROUTE: c_int = 1;
pub const OPT_DEBUG_MASK: c_int = 2;
pub const OPT_AUTO_ERR: c_int = 3;
pub const OPT_FRAG_SIZE: c_int = 10;
pub const OPT_SHOW_TIDS: c_int = 18;
pub const ROUTE_DIRECT: c_int = 3;

/// Data types (pvm_reduce, pvm_scatter, pvm_gather, pvm_psend).
pub const PVM_STR: c_int = 0;
pub const PVM_BYTE: c_int = 1;
pub const PVM_SHORT: c_int = 2;
pub const PVM_INT: c_int = 3;
pub const PVM_FLOAT: c_int = 4;
pub const PVM_CPLX: c_int = 5;
pub const PVM_DOUBLE: c_int = 6;
pub const PVM_DCPLX: c_int = 7;
pub const PVM_LONG: c_int = 8;
pub const PVM_USHORT: c_int = 9;
pub const PVM_UINT: c_int = 10;
pub const PVM_ULONG: c_int = 11;

/// The size in bytes of one element of a PVM data type (none for PVM_STR
/// or an unknown type).
/// A count or a length as pvm3.h's `int`. Counts of tasks, hosts and
/// group members are bounded by the cluster's 64 adapters; a message
/// longer than `c_int::MAX` bytes cannot be told in PVM's int and reads as
/// `c_int::MAX`.
pub fn count(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

pub fn type_size(t: c_int) -> Option<usize> {
    Some(match t {
        PVM_BYTE => 1,
        PVM_SHORT | PVM_USHORT => 2,
        PVM_INT | PVM_UINT | PVM_FLOAT => 4,
        PVM_CPLX | PVM_DOUBLE => 8,
        PVM_LONG | PVM_ULONG => std::mem::size_of::<std::ffi::c_long>(),
        PVM_DCPLX => 16,
        _ => return None,
    })
}

/// The text of a code, as PVM 3.4's pvm_errlist words it.
pub fn text(code: c_int) -> &'static str {
    match code {
        PVM_OK => "Ok",
        PVM_BAD_PARAM => "Bad parameter",
        PVM_MISMATCH => "Parameter mismatch",
        PVM_OVERFLOW => "Value too large",
        PVM_NO_DATA => "End of buffer",
        PVM_NO_HOST => "No such host",
        PVM_NO_FILE => "No such file",
        PVM_DENIED => "Permission denied",
        PVM_NO_MEM => "Malloc failed",
        PVM_BAD_MSG => "Can't decode message",
        PVM_SYS_ERR => "Can't contact local daemon",
        PVM_NO_BUF => "No current buffer",
        PVM_NO_SUCH_BUF => "No such buffer",
        PVM_NULL_GROUP => "Null group name",
        PVM_DUP_GROUP => "Already in group",
        PVM_NO_GROUP => "No such group",
        PVM_NOT_IN_GROUP => "Not in group",
        PVM_NO_INST => "No such instance",
        PVM_HOST_FAIL => "Host failed",
        PVM_NO_PARENT => "No parent task",
        PVM_NOT_IMPL => "Not implemented",
        PVM_DSYS_ERR => "Pvmd system error",
        PVM_BAD_VERSION => "Version mismatch",
        PVM_OUT_OF_RES => "Out of resources",
        PVM_DUP_HOST => "Duplicate host",
        PVM_CANT_START => "Can't start pvmd",
        PVM_ALREADY => "Already in progress",
        PVM_NO_TASK => "No such task",
        PVM_NOT_FOUND => "Not Found",
        PVM_EXISTS => "Already exists",
        PVM_HOSTR_NMSTR => "Hoster run on non-master host",
        PVM_PARENT_NOT_SET => "Spawning parent set PvmNoSpawnParent",
        PVM_IP_LOOPBACK => "Master Host IP is Loopback",
        _ => "Unknown error",
    }
}

/// Say on stderr, once per call name, that `call` is not supported by
/// libpvm-mc; the call returns PvmNotImpl.
pub fn not_supported(call: &'static str) -> c_int {
    static SAID: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if said.get_or_insert_with(HashSet::new).insert(call) {
        eprintln!("libpvm-mc: {call} is not supported (PvmNotImpl); docs/pvm.md lists what is");
    }
    PVM_NOT_IMPL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_own_text() {
        let mut seen = HashSet::new();
        for c in (-36..=0).filter(|c| ![-1, -9, -11, -13].contains(c)) {
            assert_ne!(text(c), "Unknown error", "code {c}");
            assert!(seen.insert(text(c)), "code {c} repeats a text");
        }
        assert_eq!(text(-1), "Unknown error");
    }

    #[test]
    fn sizes_follow_the_c_types() {
        assert_eq!(type_size(PVM_INT), Some(4));
        assert_eq!(type_size(PVM_DCPLX), Some(16));
        assert_eq!(type_size(PVM_LONG), Some(8));
        assert_eq!(type_size(PVM_STR), None);
    }
}
