//! Fuzz target: see mc_device::fuzz::vhost_user_sequence.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mc_device::fuzz::vhost_user_sequence(data);
});
