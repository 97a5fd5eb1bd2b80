#!/usr/bin/env bash
# calibrate-work.sh: the rate of counted work (mc_driver::vclock::meter::
# EDGE_PS, docs/virtual-time.md s.9): picoseconds of this host's processor
# per counted edge, so that --cpu-scale means the same under --work counted
# as under --work cpu-time.
#
#   scripts/calibrate-work.sh [PRESET] [APPS...]   (default: small, six apps)
#
# For each application: the sequential program's CPU time in the plain
# release build (--work cpu-time), and its counted work in the counted build
# (--work counted; the record's sequential_cpu_s is then the count at the
# committed EDGE_PS, so the count is that over EDGE_PS). The rate is their
# ratio; the script prints each and the median, the value to commit. The
# CPU time varies with the host; the count does not (the script recovers
# it from the record to within an edge or two of rounding, and a rerun
# gives the same counts).
#
# Needs target/release/mc-guest (cargo build --release -p mc-guest), the
# counted build (scripts/build-counted.sh) and mc-host (MC_HOST, default
# target/release/mc-host, else target/debug/mc-host).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-small}
shift || true
apps=("$@")
[ ${#apps[@]} -gt 0 ] || apps=(sor gauss water-nsquared water-spatial em3d clu)
plain=$root/target/release/mc-guest
counted=$("$root/scripts/build-counted.sh" --print-dir)/mc-guest
host=${MC_HOST:-}
if [ -z "$host" ]; then
    host=$root/target/release/mc-host
    [ -x "$host" ] || host=$root/target/debug/mc-host
fi
for f in "$plain" "$counted" "$host"; do
    [ -x "$f" ] || {
        echo "calibrate-work.sh: $f: missing (see the header)" >&2
        exit 2
    }
done
edge_ps=$(sed -n 's/^pub const EDGE_PS: u64 = \([0-9_]*\);/\1/p' \
    "$root/guest-driver/driver/src/vclock/meter.rs" | tr -d _)
[ -n "$edge_ps" ] || {
    echo "calibrate-work.sh: EDGE_PS not found in meter.rs" >&2
    exit 2
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seq_s() { # guest work app -> the record's sequential_cpu_s
    "$host" run --nodes 1 --clock virtual --work "$2" -- "$1" csm "$3" \
        --preset "$preset" --sequential --json "$tmp/r.jsonl" >/dev/null
    python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["times"]["sequential_cpu_s"])' "$tmp/r.jsonl"
    rm -f "$tmp/r.jsonl"
}
echo "# calibrate-work.sh $preset ${apps[*]}: $(date -u +%FT%TZ), $(nproc) cpus, $(uname -r)"
echo "# committed EDGE_PS=$edge_ps; app cpu_s edges ps_per_edge"
rates=()
for a in "${apps[@]}"; do
    cpu=$(seq_s "$plain" cpu-time "$a")
    work=$(seq_s "$counted" counted "$a")
    read -r edges rate < <(python3 -c '
import sys
cpu, work, ps = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
edges = round(work * 1e12 / ps)
print(edges, round(cpu * 1e12 / edges, 1))' "$cpu" "$work" "$edge_ps")
    echo "$a $cpu $edges $rate"
    rates+=("$rate")
done
python3 -c '
import statistics, sys
r = sorted(float(x) for x in sys.argv[1:])
print("median ps_per_edge %.0f (min %.1f, max %.1f)" % (statistics.median(r), r[0], r[-1]))' "${rates[@]}"
