#!/usr/bin/env bash
# The cost of Cashmere for the ANL-macro test programs (integration/c/anl),
# against their pthreads builds on this machine: the time of each program's
# parallel part (CREATE to WAIT_FOR_END, its own CLOCK, printed on stderr),
# the best of REPS runs, for the pthreads build with 1, 2 and 4 threads and
# for Cashmere on 1 x 1, 2 x 1, 2 x 2 and 4 x 1 virtual nodes (CSM-DMS).
#
# Usage: scripts/c-anl-bench.sh [REPS]    (default 3; release build)
# docs/c-programs.md, "Costs", has the figures and what they mean.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-3}
cargo build --quiet --release -p host -p mc-guest -p libcsm --manifest-path "$root/Cargo.toml"
host=${CARGO_TARGET_DIR:-$root/target}/release/mc-host
out=$(mktemp -d "${TMPDIR:-/tmp}/c-anl-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT
declare -A args=(
    [sor]="-n 514 -i 20"
    [lu]="-n 384 -b 32"
    [transpose]="-n 512 -r 4"
    [taskq]="-t 3000"
    [tree]="-d 16 -e 200"
    [prodcons]="-i 3000"
)
names=(sor lu transpose taskq tree prodcons)
for p in "${names[@]}"; do
    "$root/scripts/mc-cc" -o "$out/$p" "$root/integration/c/anl/$p.C"
    "$root/scripts/mc-cc" --posix -o "$out/$p-posix" "$root/integration/c/anl/$p.C"
done
# best of $reps: the "NAME: N us" line of each run
best() {
    local name=$1 b=
    shift
    for _ in $(seq "$reps"); do
        t=$("$@" 2>&1 | sed -n "s/^\(\[node0\] \)\{0,1\}$name: \([0-9]*\) us$/\2/p" | head -1)
        [ -n "$t" ] || { echo "failed: $*" >&2; echo "-"; return; }
        if [ -z "$b" ] || [ "$t" -lt "$b" ]; then b=$t; fi
    done
    echo "$b"
}
printf '| program | pthreads 1 | pthreads 2 | pthreads 4 | csm 1x1 | csm 2x1 | csm 2x2 | csm 4x1 |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for p in "${names[@]}"; do
    row="| $p ${args[$p]}"
    for t in 1 2 4; do
        if [ "$p" = prodcons ] && [ "$t" = 1 ]; then row+=" | -"; continue; fi
        # shellcheck disable=SC2086
        row+=" | $(best "$p" "$out/$p-posix" -p $t ${args[$p]})"
    done
    for shape in "1 1" "2 1" "2 2" "4 1"; do
        set -- $shape
        if [ "$p" = prodcons ] && [ $(($1 * $2)) = 1 ]; then row+=" | -"; continue; fi
        # shellcheck disable=SC2086
        row+=" | $(best "$p" "$host" run --nodes "$1" --threads "$2" -- "$out/$p" -p $(($1 * $2)) ${args[$p]})"
    done
    echo "$row |"
done
echo "(microseconds, best of $reps; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
