//! The numbers of `<sys/imc.h>`: return codes, permission bits and flags,
//! and how each [`McError`] of the Rust API becomes a return code. The
//! header is hand-kept; a test below reads it and checks every value.

use std::ffi::c_int;

use mc_api::McError;

pub const IMC_SUCCESS: c_int = 0;
pub const IMC_EXISTS: c_int = 1;
pub const IMC_BADPARM: c_int = 2;
pub const IMC_NOTINIT: c_int = 3;
pub const IMC_BADREGION: c_int = 4;
pub const IMC_BADLOCK: c_int = 5;
pub const IMC_ATTACHED: c_int = 6;
pub const IMC_NOTATTACHED: c_int = 7;
pub const IMC_SIZEMISMATCH: c_int = 8;
pub const IMC_MCFULL: c_int = 9;
pub const IMC_NOPERM: c_int = 10;
pub const IMC_BUSY: c_int = 11;
pub const IMC_LOCKBUSY: c_int = 12;
pub const IMC_NOTHELD: c_int = 13;
pub const IMC_HELD: c_int = 14;
pub const IMC_LOCKACTIVE: c_int = 15;
pub const IMC_BADHOST: c_int = 16;
pub const IMC_EINVAL: c_int = 17;
pub const IMC_EPERM: c_int = 18;
pub const IMC_ESRCH: c_int = 19;
pub const IMC_TIMEOUT: c_int = 20;
pub const IMC_OFFLINE: c_int = 21;
pub const IMC_MCERROR: c_int = 22;
pub const IMC_NOMEM: c_int = 23;
pub const IMC_ERRORS: c_int = 24;

/// Read bits of a region's permissions (any class).
pub const PERM_READ: c_int = 0o444;
/// Write bits of a region's permissions (any class).
pub const PERM_WRITE: c_int = 0o222;
/// Every permission bit a region or lock set may have.
pub const PERM_ALL: c_int = 0o666;

pub const IMC_COHERENT: c_int = 0x1;
pub const IMC_TRANSMIT: c_int = 1;
pub const IMC_RECEIVE: c_int = 2;
pub const IMC_SHARED: c_int = 0;
pub const IMC_EXCLUSIVE: c_int = 1;
pub const IMC_LOOPBACK: c_int = 0x1;
pub const IMC_CREATOR: c_int = 0x1;
pub const IMC_LOCKWAIT: c_int = 0;
pub const IMC_LOCKNOWAIT: c_int = 1;
pub const IMC_MAXNUMLOCKS: c_int = 1024;
pub const IMC_MAXHOSTS: usize = 64;
pub const IMC_HOSTNAMELEN: usize = 64;

/// What a return code means, for `imc_perror`.
pub fn describe(code: c_int) -> &'static str {
    match code {
        IMC_SUCCESS => "success",
        IMC_EXISTS => "the lock set exists already",
        IMC_BADPARM => "invalid parameter",
        IMC_NOTINIT => "the Memory Channel adapter could not be opened",
        IMC_BADREGION => "no such region in this process",
        IMC_BADLOCK => "no such lock set or lock in this process",
        IMC_ATTACHED => "the region is attached by this process",
        IMC_NOTATTACHED => "the region is not attached by this process",
        IMC_SIZEMISMATCH => "the key exists with another size",
        IMC_MCFULL => "out of Memory Channel space",
        IMC_NOPERM => "the region's permissions forbid it",
        IMC_BUSY => "the region is held exclusively or attached elsewhere",
        IMC_LOCKBUSY => "the lock is held",
        IMC_NOTHELD => "the lock is not held by this process",
        IMC_HELD => "the lock is already held by this thread",
        IMC_LOCKACTIVE => "a lock of the set is held by this process",
        IMC_BADHOST => "no cluster member by that name",
        IMC_EINVAL => "invalid signal",
        IMC_EPERM => "not permitted to signal that process",
        IMC_ESRCH => "no such process",
        IMC_TIMEOUT => "the cluster did not answer in time",
        IMC_OFFLINE => "this node's adapter is offline",
        IMC_MCERROR => "Memory Channel adapter error",
        IMC_NOMEM => "out of memory",
        IMC_ERRORS => "Memory Channel errors since the saved count",
        _ => "unknown return code",
    }
}

/// The return code for an error of the Rust API.
pub fn code_of(e: &McError) -> c_int {
    match e {
        McError::NoSuchRegion(_) => IMC_BADREGION,
        McError::RegionSize { .. } | McError::LockSetSize { .. } => IMC_SIZEMISMATCH,
        McError::EmptyRegion | McError::EmptyLockSet | McError::OutOfBounds { .. } => IMC_BADPARM,
        McError::BadDestination(_) => IMC_BADPARM,
        McError::NoSuchLockSet(_) | McError::NoSuchLock { .. } => IMC_BADLOCK,
        McError::LockSetExists(_) => IMC_EXISTS,
        McError::NoSpace(_) => IMC_MCFULL,
        McError::Busy { .. } => IMC_BUSY,
        McError::NotHeld { .. } => IMC_NOTHELD,
        McError::AlreadyHeld { .. } => IMC_HELD,
        McError::PermissionDenied { .. } => IMC_NOPERM,
        McError::Timeout { .. } => IMC_TIMEOUT,
        McError::Offline => IMC_OFFLINE,
        _ => IMC_MCERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `#define IMC_NAME value` of the header whose value is a number.
    fn header_defines() -> Vec<(String, i64)> {
        let text = include_str!("../include/sys/imc.h");
        text.lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                (w.next()? == "#define").then_some(())?;
                let name = w.next()?;
                let value = w.next()?;
                let v = if let Some(o) = value.strip_prefix("0x") {
                    i64::from_str_radix(o, 16).ok()?
                } else if value.len() > 1 && value.starts_with('0') {
                    i64::from_str_radix(&value[1..], 8).ok()?
                } else {
                    value.parse().ok()?
                };
                Some((name.to_string(), v))
            })
            .collect()
    }

    #[test]
    fn the_header_says_what_the_library_does() {
        let ours: &[(&str, i64)] = &[
            ("IMC_SUCCESS", IMC_SUCCESS.into()),
            ("IMC_EXISTS", IMC_EXISTS.into()),
            ("IMC_BADPARM", IMC_BADPARM.into()),
            ("IMC_NOTINIT", IMC_NOTINIT.into()),
            ("IMC_BADREGION", IMC_BADREGION.into()),
            ("IMC_BADLOCK", IMC_BADLOCK.into()),
            ("IMC_ATTACHED", IMC_ATTACHED.into()),
            ("IMC_NOTATTACHED", IMC_NOTATTACHED.into()),
            ("IMC_SIZEMISMATCH", IMC_SIZEMISMATCH.into()),
            ("IMC_MCFULL", IMC_MCFULL.into()),
            ("IMC_NOPERM", IMC_NOPERM.into()),
            ("IMC_BUSY", IMC_BUSY.into()),
            ("IMC_LOCKBUSY", IMC_LOCKBUSY.into()),
            ("IMC_NOTHELD", IMC_NOTHELD.into()),
            ("IMC_HELD", IMC_HELD.into()),
            ("IMC_LOCKACTIVE", IMC_LOCKACTIVE.into()),
            ("IMC_BADHOST", IMC_BADHOST.into()),
            ("IMC_EINVAL", IMC_EINVAL.into()),
            ("IMC_EPERM", IMC_EPERM.into()),
            ("IMC_ESRCH", IMC_ESRCH.into()),
            ("IMC_TIMEOUT", IMC_TIMEOUT.into()),
            ("IMC_OFFLINE", IMC_OFFLINE.into()),
            ("IMC_MCERROR", IMC_MCERROR.into()),
            ("IMC_NOMEM", IMC_NOMEM.into()),
            ("IMC_ERRORS", IMC_ERRORS.into()),
            ("IMC_COHERENT", IMC_COHERENT.into()),
            ("IMC_TRANSMIT", IMC_TRANSMIT.into()),
            ("IMC_RECEIVE", IMC_RECEIVE.into()),
            ("IMC_SHARED", IMC_SHARED.into()),
            ("IMC_EXCLUSIVE", IMC_EXCLUSIVE.into()),
            ("IMC_LOOPBACK", IMC_LOOPBACK.into()),
            ("IMC_CREATOR", IMC_CREATOR.into()),
            ("IMC_LOCKWAIT", IMC_LOCKWAIT.into()),
            ("IMC_LOCKNOWAIT", IMC_LOCKNOWAIT.into()),
            ("IMC_MAXNUMLOCKS", IMC_MAXNUMLOCKS.into()),
            ("IMC_MAXHOSTS", i64::try_from(IMC_MAXHOSTS).unwrap()),
            ("IMC_HOSTNAMELEN", i64::try_from(IMC_HOSTNAMELEN).unwrap()),
            ("IMC_URW", 0o600),
            ("IMC_ORW", 0o006),
        ];
        let header = header_defines();
        for (name, v) in ours {
            let h = header.iter().find(|(n, _)| n == name);
            assert_eq!(h.map(|h| h.1), Some(*v), "{name} in sys/imc.h");
        }
        // Every return code the header names is one the library describes.
        for (name, v) in &header {
            let is_code = *v <= 24
                && ours.iter().position(|(n, _)| n == name) < Some(25)
                && ours.iter().any(|(n, _)| n == name);
            if is_code {
                let code = c_int::try_from(*v).expect("a code is an int");
                assert_ne!(describe(code), "unknown return code", "{name}");
            }
        }
        // Codes are distinct.
        let mut codes: Vec<i64> = ours[..25].iter().map(|(_, v)| *v).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), 25);
    }
}
