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
. "$root/scripts/lib/install-c-library.sh"
install_c_library "$root" libump "$prefix" \
    guest-driver/libump/include/ump.h:ump.h \
    guest-driver/libimc/include/sys/imc.h:sys/imc.h
echo "build a program: cc -I $prefix/include prog.c $prefix/lib/libump.a -lpthread -ldl -lm -o prog"
