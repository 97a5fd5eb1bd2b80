#!/usr/bin/env bash
# PVM ping-pong (seed 004's Table 4): one-way time of an 8-byte
# pvm_send/pvm_recv round trip, and bandwidth at 64 KiB and 1 MiB, with
# guest-driver/libpvm/bench/pvm_pingpong.c, in one sitting:
#
#   - libpvm-mc between two hosts (`mc-host pvm -n 2 --slots 1`: 2 adapters);
#   - libpvm-mc between two tasks of one host (`-n 1 --slots 2`: each task
#     has its own adapter, and their UMP channel is shared memory between
#     the two processes: docs/pvm.md);
#   - UMP's own figures and the adapter's (`mc-guest bench ump`, 2 nodes:
#     one-way 8 B over Memory Channel and over shared memory, raw limits);
#   - Debian's PVM 3.4.6 over its daemon on this host (pvm_pingpong linked
#     with -lpvm3, the daemon started and halted here), when installed.
#
#   scripts/pvm-bench.sh [ITERATIONS]     (2000)
#
# Needs scripts/setup-pvm.sh. Builds the release binaries first.
set -euo pipefail
cd "$(dirname "$0")/.."
ITERS="${1:-2000}"
[ -f /usr/include/pvm3.h ] || { echo "pvm-bench: pvm3.h is not installed (scripts/setup-pvm.sh)" >&2; exit 1; }
cargo build --release -q -p host -p libpvm-mc -p mc-guest
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
SRC=guest-driver/libpvm/bench/pvm_pingpong.c
cc -O2 -shared -fPIC -o "$OUT/pvm_pingpong.so" "$SRC"
HOST=target/release/mc-host
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== libpvm-mc, two hosts (Memory Channel)"
"$HOST" pvm -n 2 --slots 1 -- "$OUT/pvm_pingpong.so" "$ITERS" | grep "one-way"
echo "== libpvm-mc, two tasks of one host (shared memory between the processes)"
"$HOST" pvm -n 1 --slots 2 -- "$OUT/pvm_pingpong.so" "$ITERS" node0 | grep "one-way"
echo "== UMP and the adapter (mc-guest bench ump, 2 nodes)"
"$HOST" run --nodes 2 -- mc-guest bench ump | grep -E "^\[node0\].*( 8 B|8 |65536|1048576|raw|adapter|memcpy|goal)" | head -40 || true

if command -v pvm >/dev/null 2>&1; then
    echo "== Debian's PVM 3.4.6 over its daemon, this host"
    cc -O2 -o "$OUT/pvm_pingpong" "$SRC" -lpvm3
    export PVM_ROOT="${PVM_ROOT:-/usr/lib/pvm3}"
    [ "$(id -u)" -eq 0 ] && export PVM_ALLOW_ROOT=1
    echo quit | pvm >/dev/null 2>&1 || true
    "$OUT/pvm_pingpong" "$ITERS" | grep "one-way" || true
    echo halt | pvm >/dev/null 2>&1 || true
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
