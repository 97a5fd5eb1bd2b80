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
. "$root/scripts/lib/install-c-library.sh"
install_c_library "$root" libimc "$prefix" guest-driver/libimc/include/sys/imc.h:sys/imc.h
echo "build a program: cc -I $prefix/include prog.c $prefix/lib/libimc.a -lpthread -ldl -lm -o prog"
