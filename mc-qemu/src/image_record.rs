//! What an image directory records about the image last built there: the
//! guest program (`image.guest`) and the user programs (`image.programs`),
//! so that `cluster up` and `qemu-boot` rebuild with them unless given
//! others. `image` writes these files; `guest_build` and the CLI read them.

use std::fs;
use std::path::{Path, PathBuf};

/// The guest program's absolute path (empty: none).
pub const GUEST_FILE: &str = "image.guest";
/// The user programs' absolute paths, one a line.
pub const PROGRAMS_FILE: &str = "image.programs";

/// The guest binary the image in `dir` was last built with, if any and if
/// it still exists: `mc-host qemu-boot` rebuilds with it when an input
/// (the init script, say) changed.
pub fn recorded_guest_binary(dir: &Path) -> Option<PathBuf> {
    let p = fs::read_to_string(dir.join(GUEST_FILE)).ok()?;
    let p = PathBuf::from(p.trim());
    (!p.as_os_str().is_empty() && p.is_file()).then_some(p)
}

/// The user programs the image in `dir` was last built with, those that
/// still exist.
pub fn recorded_programs(dir: &Path) -> Vec<PathBuf> {
    fs::read_to_string(dir.join(PROGRAMS_FILE))
        .unwrap_or_default()
        .lines()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .collect()
}
