#!/bin/sh
# The C bench (libimc: plain stores, imc_write, one-way latency through
# plain stores) next to the Rust API's figures (mc-guest bench) and the
# real hardware's (MC2, seed 004 Table 2), on a virtual cluster.
#
# Usage: scripts/c-bench.sh [NODES] [ITERS]     (defaults: 2 nodes, 2000)
# Builds the release mc-host, mc-guest and libimc first; needs `cc`.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
nodes=${1:-2}
iters=${2:-2000}
target=${CARGO_TARGET_DIR:-$root/target}
cd "$root"
cargo build --release -p libimc -p host -p mc-guest >&2
bench="$target/release/imc_bench"
${CC:-cc} -O2 -Wall -I guest-driver/libimc/include guest-driver/libimc/bench/imc_bench.c \
    "$target/release/libimc.a" -lpthread -ldl -lm -o "$bench"
mc_host="$target/release/mc-host"
c_out=$(mktemp) rust_out=$(mktemp)
trap 'rm -f "$c_out" "$rust_out"' EXIT
"$mc_host" run --nodes "$nodes" -- "$bench" "$iters" | sed -n 's/^\[node0\] //p' > "$c_out"
{
    "$mc_host" run --nodes "$nodes" -- mc-guest bench latency --iters "$iters"
    "$mc_host" run --nodes "$nodes" -- mc-guest bench errcheck --iters "$iters"
} | sed -n 's/^\[node0\] //p' | grep -v '^ratios' > "$rust_out"

echo "== C, through libimc ($nodes virtual nodes, $iters samples)"
cat "$c_out"
echo
echo "== Rust, through mc-api (mc-guest bench latency errcheck)"
grep -v '^operation' "$rust_out" | grep -v '^$' || true
echo
# Side by side: the value and unit after the label $2 in the table $1.
value() { grep -F "$2" "$1" | head -1 | sed "s/^$2 *//" | awk '{print $1 " " $2}'; }
printf '%-34s %14s %14s %14s %10s\n' "side by side" "C plain store" "C imc_write" "Rust API" "MC2"
printf '%-34s %14s %14s %14s %10s\n' "one-way latency, 8 bytes (median)" \
    "$(value "$c_out" 'one-way latency, plain 8-byte store (median)')" \
    "$(value "$c_out" 'one-way latency, imc_write 8 bytes (median)')" \
    "$(value "$rust_out" 'one-way latency, 8-byte write (median)')" "2.9 us"
printf '%-34s %14s %14s %14s %10s\n' "error check through the ACK page" "" \
    "$(value "$c_out" 'imc_ckerrcnt (ACK page, median)')" \
    "$(value "$rust_out" 'error check via ACK page (imc_ckerrcnt)')" "< 5 us"
