#!/usr/bin/env bash
# MPI ping-pong and streaming bandwidth, 8 B to 4 MiB, between 2 ranks:
# on the emulated Memory Channel through the `mc` provider (2 nodes of a
# virtual cluster), and in the same run Open MPI's shared memory (vader)
# and libfabric's `udp;ofi_rxd` and `tcp;ofi_rxm`, beside seed 004's
# Digital MPI (16 us one way) and the adapter's own one-way latency and
# streaming bandwidth (`mc-guest bench latency` and `bandwidth`, same run),
# and the provider alone without MPI (integration/c/mpi/fi_pingpong.c).
#
#   scripts/mpi-bench.sh [MAX_BYTES] [ITERATIONS]     (4194304 200)
#
# Needs scripts/setup-mpi.sh. Builds the release binaries first.
set -euo pipefail
cd "$(dirname "$0")/.."

MAX="${1:-4194304}"
ITERS="${2:-200}"
ROOT_FLAG=()
[ "$(id -u)" -eq 0 ] && ROOT_FLAG=(--allow-run-as-root)

command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
    { echo "mpi-bench: Open MPI is not installed (scripts/setup-mpi.sh)" >&2; exit 1; }

cargo build --release -q -p host -p libfabric-mc -p mc-guest
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
mpicc -O2 -o "$OUT/bench" integration/c/mpi/bench.c
cc -O2 -o "$OUT/fi_pingpong" integration/c/mpi/fi_pingpong.c -lfabric
HOST=target/release/mc-host
mkdir "$OUT/fi" && ln -s "$PWD/target/release/libmc_fi.so" "$OUT/fi/libmc-fi.so"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== the adapter's own figures (mc-guest bench latency, bandwidth; 2 nodes)"
{ "$HOST" run --nodes 2 -- mc-guest bench latency; "$HOST" run --nodes 2 -- mc-guest bench bandwidth; } | tee "$OUT/adapter.txt" |
    grep -E "one-way latency, 8-byte write \(median\)|streaming, 65536" || true
ADAPTER_US=$(awk '/one-way latency, 8-byte write \(median\)/ {for (i=1;i<=NF;i++) if ($i ~ /^[0-9.]+$/) {print $i; exit}}' "$OUT/adapter.txt")
ADAPTER_MBS=$(awk '/streaming, 65536 B writes/ {for (i=1;i<NF;i++) if ($(i+1) == "MB/s") {print $i; exit}}' "$OUT/adapter.txt")

run_mc() {
    "$HOST" mpirun -np 2 -- "$OUT/bench" "$MAX" "$ITERS"
}
run_ompi() {
    mpirun "${ROOT_FLAG[@]}" -np 2 --bind-to none "$@" "$OUT/bench" "$MAX" "$ITERS"
}

echo "== the provider without MPI (fi_pingpong: fi_tsend, fi_cq_read; 8 B, median)"
FI_PROVIDER_PATH="$OUT/fi" FI_PROVIDER=mc "$HOST" run --nodes 2 -- "$OUT/fi_pingpong" 8 20000 |
    tee "$OUT/fi.txt" | grep fi_pingpong || true
FI_US=$(awk '/fi_pingpong 8 / {print $(NF-1); exit}' "$OUT/fi.txt")
echo "== mc provider (UMP on the emulated Memory Channel, 2 nodes)"
run_mc | grep '^bench [0-9]' > "$OUT/mc.txt" || true
echo "== vader (Open MPI shared memory)"
run_ompi --mca pml ob1 --mca btl self,vader | grep '^bench [0-9]' > "$OUT/vader.txt" || true
echo "== udp;ofi_rxd"
run_ompi --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "udp;ofi_rxd" |
    grep '^bench [0-9]' > "$OUT/rxd.txt" || true
echo "== tcp;ofi_rxm"
run_ompi --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "tcp;ofi_rxm" |
    grep '^bench [0-9]' > "$OUT/rxm.txt" || true

echo
echo "adapter's own one-way latency (8 B): ${ADAPTER_US:-?} us; streaming bandwidth: ${ADAPTER_MBS:-?} MB/s"
echo "the provider without MPI (fi_pingpong, 8 B): ${FI_US:-?} us one way"
echo "seed 004, Digital MPI on Memory Channel: 16 us one way"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%10s | %10s %10s | %10s %10s | %10s %10s | %10s %10s\n' size "mc us" "mc MB/s" "vader us" "MB/s" "rxd us" "MB/s" "rxm us" "MB/s"
join -j 2 -a 1 -e - -o 0,1.3,1.4,2.3,2.4 <(sort -k2,2 "$OUT/mc.txt") <(sort -k2,2 "$OUT/vader.txt") > "$OUT/a"
join -j 2 -a 1 -e - -o 0,1.3,1.4,2.3,2.4 <(sort -k2,2 "$OUT/rxd.txt") <(sort -k2,2 "$OUT/rxm.txt") > "$OUT/b"
join -a 1 -e - -o 0,1.2,1.3,1.4,1.5,2.2,2.3,2.4,2.5 <(sort "$OUT/a") <(sort "$OUT/b") | sort -n |
    awk '{printf "%10s | %10s %10s | %10s %10s | %10s %10s | %10s %10s\n", $1,$2,$3,$4,$5,$6,$7,$8,$9}'
echo
awk -v a="${ADAPTER_US:-0}" -v b="${ADAPTER_MBS:-0}" '
    $2 == 8 && a > 0 { printf "goal: 8 B one way %.2f us: %.2fx the adapter (goal <= 2x), %s 8 us\n", $3, $3 / a, ($3 < 8 ? "under" : "NOT under") }
    $2 == 1048576 && b > 0 { printf "goal: 1 MiB %.1f MB/s: %.2fx the adapter streaming (goal >= 0.7x)\n", $4, $4 / b }' "$OUT/mc.txt"
