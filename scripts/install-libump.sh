#!/bin/sh
# Build libump, UMP (seed 004's Universal Message Passing) for C
# (guest-driver/libump), and install it next to libimc:
#
#   PREFIX/include/ump.h       the header (#include <ump.h>)
#   PREFIX/include/sys/imc.h   libimc's header (libump contains libimc)
#   PREFIX/lib/libump.a        static library (what QEMU guests need: -static)
#   PREFIX/lib/libump.so       shared library
#
# Usage: scripts/install-libump.sh [PREFIX]     (default: target/imc)
# Then:  cc -I PREFIX/include prog.c PREFIX/lib/libump.a -lpthread -ldl -lm -o prog
# Link libump alone: it holds the TruCluster calls (imc_*) too, and both
# share the process's adapter. See docs/ump.md.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$root/target/imc}
target=${CARGO_TARGET_DIR:-$root/target}
cargo build --release -p libump --manifest-path "$root/Cargo.toml"
install -d "$prefix/lib" "$prefix/include/sys"
install -m 644 "$root/guest-driver/libump/include/ump.h" "$prefix/include/ump.h"
install -m 644 "$root/guest-driver/libimc/include/sys/imc.h" "$prefix/include/sys/imc.h"
install -m 644 "$target/release/libump.a" "$prefix/lib/libump.a"
install -m 755 "$target/release/libump.so" "$prefix/lib/libump.so"
echo "installed libump in $prefix:"
echo "  $prefix/include/ump.h"
echo "  $prefix/include/sys/imc.h"
echo "  $prefix/lib/libump.a"
echo "  $prefix/lib/libump.so"
echo "build a program: cc -I $prefix/include prog.c $prefix/lib/libump.a -lpthread -ldl -lm -o prog"
