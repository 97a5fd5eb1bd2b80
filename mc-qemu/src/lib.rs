//! Real QEMU guests for `mc-host`: finding a QEMU that has the generic
//! vhost-user device, building the guest boot image, booting guests under
//! TCG, and clusters of them on one backend.
//!
//! Set-up (QEMU, guest kernel, busybox) is done by `scripts/setup.sh`, which
//! fills the cache directory ([`CacheDir`]) this crate reads. See
//! docs/qemu.md.
//!
//! Modules import one way, leaves first: [`shell`] (quoting), [`recipe`]
//! (the static build's command), [`version`], [`image_record`] (what an
//! image directory records) need nothing of ours; [`elf`] uses the recipe;
//! [`guest_build`] the recipe, shell and record; [`error`] names the errors
//! of `elf` and `guest_build`; [`cache`], [`cmdline`], [`cpio`], [`find`]
//! build on the error; [`image`] on `cpio`, `elf` and the record; [`boot`] on
//! `cmdline` and `find`; [`cluster`] on `boot`.

pub mod boot;
pub mod cache;
pub mod cluster;
pub mod cmdline;
pub mod cpio;
pub mod elf;
pub mod error;
pub mod find;
pub mod guest_build;
pub mod image;
pub mod image_record;
pub mod recipe;
pub mod shell;
pub mod version;

pub use boot::{boot, AdapterSpec, BootOutcome, BootSpec};
pub use cache::CacheDir;
pub use error::{QemuError, SETUP_COMMAND};
pub use find::{find_qemu, Accel, Qemu, QemuSource};
pub use image::{build_image, BuiltImage, GuestInputs};
pub use version::{QemuVersion, MIN_VERSION};
