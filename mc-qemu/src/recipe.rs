//! The recipe of the static `mc-guest` that guest images carry: glibc,
//! statically linked, in a target directory of its own. Messages that tell
//! users how to build a static program quote it, and `guest_build` runs it.

/// The target the static guest is built for (glibc, statically linked: no
/// musl target is needed).
pub const STATIC_TARGET: &str = "x86_64-unknown-linux-gnu";

/// The target directory of the static build, relative to the workspace.
pub const STATIC_TARGET_DIR: &str = "target/static";

/// What `guest_build::GuestSources::build_command` runs, for messages and
/// docs (a test there holds the two together).
pub const STATIC_BUILD_COMMAND: &str = "RUSTFLAGS='-C target-feature=+crt-static' \
     cargo build --release -p mc-guest --bin mc-guest \
     --target x86_64-unknown-linux-gnu --target-dir target/static";
