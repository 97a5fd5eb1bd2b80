//! libump: UMP (seed 004, Table 3) for C programs, the calls of
//! `include/ump.h` over the `ump` crate. It links libimc in, so the
//! TruCluster calls and UMP share the process's one adapter (opened by
//! libimc from the environment on first use).
//!
//! A task is a heap object the C program holds by pointer; a started
//! non-blocking write is another. Every call checks its pointers, records
//! why it failed (for `ump_perror`) and returns a code of the header.

/// Turn a `Result` of codes into the code.
macro_rules! try_code {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(c) => return c,
        }
    };
}

mod channels;
mod errors;
mod handles;
mod info;
mod io;

pub use channels::*;
pub use errors::*;
pub use handles::{ump_exit, ump_init, UmpRequest, UmpTask};
pub use info::*;
pub use io::*;

#[cfg(test)]
mod tests {
    use std::ffi::c_int;

    use super::*;
    use crate::handles::transport;

    /// ump.h is kept by hand: every code there has the value the library
    /// returns.
    #[test]
    fn the_headers_codes_are_the_librarys() {
        let h = include_str!("../include/ump.h");
        let value = |name: &str| -> c_int {
            let line = h
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} is not in ump.h"));
            line.split_whitespace()
                .nth(2)
                .unwrap()
                .trim_matches(['(', ')'])
                .parse()
                .unwrap()
        };
        for (name, v) in [
            ("UMP_SUCCESS", UMP_SUCCESS),
            ("UMP_EBADPARM", UMP_EBADPARM),
            ("UMP_ENOINIT", UMP_ENOINIT),
            ("UMP_ENOCHANNEL", UMP_ENOCHANNEL),
            ("UMP_EEXISTS", UMP_EEXISTS),
            ("UMP_ECLOSED", UMP_ECLOSED),
            ("UMP_ETOOSMALL", UMP_ETOOSMALL),
            ("UMP_EDAMAGED", UMP_EDAMAGED),
            ("UMP_ETIMEOUT", UMP_ETIMEOUT),
            ("UMP_ENOSPACE", UMP_ENOSPACE),
            ("UMP_EUNREACHABLE", UMP_EUNREACHABLE),
            ("UMP_EMC", UMP_EMC),
            ("UMP_EAGAIN", UMP_EAGAIN),
            ("UMP_ANY", UMP_ANY),
            ("UMP_AUTO", 0),
            ("UMP_SHM", 1),
            ("UMP_MC", 2),
            ("UMP_EV_OPENED", 1),
            ("UMP_EV_MESSAGE", 2),
            ("UMP_EV_CLOSED", 3),
        ] {
            assert_eq!(value(name), v, "{name}");
            if name.starts_with("UMP_E") || name == "UMP_SUCCESS" {
                assert_ne!(describe(v), "unknown UMP code", "{name}");
            }
        }
        for t in 0..3 {
            assert!(transport(t).is_ok());
        }
        assert_eq!(transport(3).unwrap_err(), UMP_EBADPARM);
    }
}
