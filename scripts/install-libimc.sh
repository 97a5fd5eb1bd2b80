#!/bin/sh
# Build libimc, the TruCluster Memory Channel API for C (guest-driver/libimc),
# and install it for C programs:
#
#   PREFIX/include/sys/imc.h   the header (#include <sys/imc.h>)
#   PREFIX/lib/libimc.a        static library (what QEMU guests need: -static)
#   PREFIX/lib/libimc.so       shared library
#
# Usage: scripts/install-libimc.sh [PREFIX]     (default: target/imc)
# Then:  cc -I PREFIX/include prog.c PREFIX/lib/libimc.a -lpthread -ldl -lm -o prog
# See docs/c-api.md.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$root/target/imc}
target=${CARGO_TARGET_DIR:-$root/target}
cargo build --release -p libimc --manifest-path "$root/Cargo.toml"
install -d "$prefix/lib" "$prefix/include/sys"
install -m 644 "$root/guest-driver/libimc/include/sys/imc.h" "$prefix/include/sys/imc.h"
install -m 644 "$target/release/libimc.a" "$prefix/lib/libimc.a"
install -m 755 "$target/release/libimc.so" "$prefix/lib/libimc.so"
echo "installed libimc in $prefix:"
echo "  $prefix/include/sys/imc.h"
echo "  $prefix/lib/libimc.a"
echo "  $prefix/lib/libimc.so"
echo "build a program: cc -I $prefix/include prog.c $prefix/lib/libimc.a -lpthread -ldl -lm -o prog"
