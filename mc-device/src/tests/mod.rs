//! Test-only code: nothing here is built into the device. The unit tests
//! (`cfg(test)`), and what they share with code outside this crate, behind
//! the dev-only features of Cargo.toml:
//!
//! - rig/: guest RAM, the driver's side of a ring, a hostile frontend
//!   (feature `test-rig`, for the integration tests; `mc_device::test_rig`);
//! - fake_guest.rs: fake guests on the device state, driven without sockets,
//!   the model alongside as the oracle;
//! - fuzz.rs: the fuzz targets' entry points (feature `fuzzing`,
//!   `mc_device::fuzz`), replayed on every saved input by its tests;
//! - device.rs, delivery.rs, guest_log.rs, vtime.rs: the unit tests on fake
//!   guests.

pub mod rig;

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod fake_guest;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;

#[cfg(test)]
mod delivery;
#[cfg(test)]
mod device;
#[cfg(test)]
mod guest_log;
#[cfg(test)]
mod vtime;
