#!/usr/bin/env bash
# calibrate-work.sh: the rate of counted work (firmware_model::abi::
# reference::EDGE_PS, docs/virtual-time.md s.9): picoseconds of this host's processor
# per counted edge, so that --cpu-scale means the same under --work counted
# as under --work cpu-time.
#
#   scripts/calibrate-work.sh [PRESET] [APPS...]   (default: small, six apps)
#   scripts/calibrate-work.sh --protocol            (the protocol's rate)
#   scripts/calibrate-work.sh --paper [APPS...]      (the paper's processor)
#
# --paper: the rates of the paper's processor (firmware_model::abi::
# reference::PAPER, issue 39: "calibrate at the paper preset so that the
# sequential program's count gives Table III's time"). For each
# application (default: the ten of Table III), the counted build's
# sequential program at the paper preset, alone (`mc-guest csm APP
# --preset paper --sequential-only`: one run each, counts are
# deterministic), then seed 000 Table III's sequential seconds (from
# mc-report/src/paper.rs) over its count: the paper processor's
# picoseconds per edge for that application, and the CPU scale that is
# (ps/edge over EDGE_PS). The protocol's rate is PAPER_PROTOCOL_SCALE x
# EDGE_PS (--protocol). MC_TIMEOUT (seconds, default 7200) bounds each run.
#
# --protocol: the rate of protocol code on the paper's processor
# (firmware_model::abi::reference::PAPER_PROTOCOL_SCALE), from seed 000 Table
# II's operations that are one processor's work (a twin, a small diff, a
# large diff; no network in them). `mc-guest bench csm` (CSM-DMS, two
# nodes, counted build) gives each operation's predicted cost twice, at
# --cpu-scale 1 and 2 (the bench runs them on an application thread, so
# the CPU scale is theirs): the difference is the counted work C, the rest
# 2*p1 - p2 the model's unscaled charges M (vclock::unseen). The operation's
# scale is (paper - M) / C; the script prints each and their median, the
# value to commit. Counts, so the same on every host and run.
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
# The counted mc-guest and an mc-host, into $counted and $host, or a stop
# naming what is missing.
find_tools() {
    counted=$("$root/scripts/build-counted.sh" --print-dir)/mc-guest
    host=${MC_HOST:-$root/target/release/mc-host}
    [ -x "$host" ] || host=$root/target/debug/mc-host
    for f in "$counted" "$host"; do
        [ -x "$f" ] || {
            echo "calibrate-work.sh: $f: missing (see the header)" >&2
            exit 2
        }
    done
}
if [ "${1:-}" = --protocol ]; then
    find_tools
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    for scale in 1 2; do
        "$host" run --nodes 2 --clock virtual --work counted --cpu-scale "$scale" -- \
            "$counted" bench csm --iters 100 --json "$tmp/s$scale.jsonl" >/dev/null
    done
    echo "# calibrate-work.sh --protocol: $(date -u +%FT%TZ), $(nproc) cpus, $(uname -r)"
    echo "# operation paper_us counted_us model_us scale"
    python3 - "$tmp/s1.jsonl" "$tmp/s2.jsonl" <<'PY'
import json, statistics, sys
rows = [
    {r["operation"]: r for r in json.loads(open(f).read().splitlines()[-1])["rows"]}
    for f in sys.argv[1:3]
]
scales = []
for op in ["twin (8 KiB)", "diff, small (16 words)", "diff, large (whole page)"]:
    p1, p2 = rows[0][op]["predicted_us"], rows[1][op]["predicted_us"]
    paper = rows[0][op]["mc_direct_us"]
    counted, model = p2 - p1, 2 * p1 - p2
    scale = (paper - model) / counted
    scales.append(scale)
    print("%s | %.1f %.3f %.3f %.2f" % (op, paper, counted, model, scale))
print("median protocol scale %.2f (min %.2f, max %.2f)" % (statistics.median(scales), min(scales), max(scales)))
PY
    exit 0
fi
edge_ps=$(sed -n 's/^pub const EDGE_PS: u64 = \([0-9_]*\);/\1/p' \
    "$root/firmware-model/src/abi/reference.rs" | tr -d _)
[ -n "$edge_ps" ] || {
    echo "calibrate-work.sh: EDGE_PS not found in firmware-model/src/abi/reference.rs" >&2
    exit 2
}
if [ "${1:-}" = --paper ]; then
    shift
    apps=("$@")
    [ ${#apps[@]} -gt 0 ] || apps=(sor gauss water-nsquared water-spatial em3d clu lu ilink barnes tsp)
    find_tools
    protocol_scale=$(sed -n 's/^pub const PAPER_PROTOCOL_SCALE: f64 = \([0-9.]*\);/\1/p' \
        "$root/firmware-model/src/abi/reference.rs")
    echo "# calibrate-work.sh --paper ${apps[*]}: $(date -u +%FT%TZ), $(nproc) cpus, $(uname -r)"
    echo "# committed EDGE_PS=$edge_ps; protocol: PAPER_PROTOCOL_SCALE=$protocol_scale x EDGE_PS = $(python3 -c "print(round($protocol_scale * $edge_ps))") ps/edge"
    echo "# app table3_s edges ps_per_edge cpu_scale (wall_s of the counted run)"
    for a in "${apps[@]}"; do
        # Seed 000's Table III only (`fn table3`, up to its end): paper.rs
        # also holds seed 001's Table 1, whose rows look the same.
        paper_s=$(sed -n '/^pub fn table3(/,/^}/p' "$root/mc-report/src/paper.rs" |
            sed -n "s/^ *\"$a\" => (\".*\", \([0-9.]*\)),/\1/p")
        [ -n "$paper_s" ] || {
            echo "calibrate-work.sh: $a: no Table III time in mc-report/src/paper.rs" >&2
            exit 2
        }
        out=$("$host" run --nodes 1 --timeout "${MC_TIMEOUT:-7200}" --clock virtual --work counted -- \
            "$counted" csm "$a" --preset paper --sequential-only)
        line=$(printf '%s\n' "$out" | grep -o 'sequential (.*): work [0-9.]* s at scale 1 (counted), wall [0-9.]* s' || true)
        [ -n "$line" ] || {
            printf 'calibrate-work.sh: %s: no count in its output:\n%s\n' "$a" "$out" >&2
            exit 1
        }
        python3 - "$a" "$paper_s" "$edge_ps" "$line" <<'PY'
import re, sys
app, paper_s, edge_ps, line = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
m = re.search(r"work ([0-9.]+) s at scale 1 \(counted\), wall ([0-9.]+) s", line)
work_s, wall_s = float(m.group(1)), float(m.group(2))
edges = round(work_s * 1e12 / edge_ps)
ps = paper_s * 1e12 / edges
print("%s %.1f %d %.1f %.4f (%.1f)" % (app, paper_s, edges, ps, ps / edge_ps, wall_s))
PY
    done
    exit 0
fi
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
