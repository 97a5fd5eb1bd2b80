#!/bin/sh
# Build libcsm, Cashmere for C programs written with the SPLASH-2/3 (ANL)
# macros (guest-driver/libcsm), and install it with its macro files and the
# mc-cc build helper:
#
#   PREFIX/bin/mc-cc            build a program: mc-cc -o prog prog.C
#   PREFIX/include/csm.h        the header the macros expand to calls of
#   PREFIX/lib/libcsm.a         static library (QEMU guests: mc-cc --static)
#   PREFIX/lib/libcsm.so        shared library
#   PREFIX/share/csm/c.m4.cashmere, c.m4.posix   the macro files
#
# Usage: scripts/install-libcsm.sh [PREFIX]     (default: target/csm)
# scripts/mc-cc also works straight from the checkout. See docs/c-programs.md.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$root/target/csm}
target=${CARGO_TARGET_DIR:-$root/target}
cargo build --release -p libcsm --manifest-path "$root/Cargo.toml"
install -d "$prefix/bin" "$prefix/lib" "$prefix/include" "$prefix/share/csm"
install -m 755 "$root/scripts/mc-cc" "$prefix/bin/mc-cc"
install -m 644 "$root/guest-driver/libcsm/include/csm.h" "$prefix/include/csm.h"
install -m 644 "$root/guest-driver/libcsm/m4/c.m4.cashmere" "$root/guest-driver/libcsm/m4/c.m4.posix" \
    "$prefix/share/csm/"
install -m 644 "$target/release/libcsm.a" "$prefix/lib/libcsm.a"
install -m 755 "$target/release/libcsm.so" "$prefix/lib/libcsm.so"
echo "installed libcsm in $prefix; build a program with:"
echo "  $prefix/bin/mc-cc -o prog prog.C"
